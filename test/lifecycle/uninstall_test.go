package lifecycle

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// helm uninstall in the middle of sluice's work — a drift with a
// replacement booting, a Redeploy's drain half done, a pool node cordoned
// by a person — runs the chart's pre-delete hook (the stand-in kubelet runs
// its Job's pod: `sluice uninstall` as the hook's service account), which
// stops the controller first; afterwards no node keeps a sluice.dev
// finalizer, taint or sluice-owned cordon, nothing is put back, the
// person's cordon stays, and `kubectl delete node` of a pool node
// completes.
func TestHelmUninstallMidWork(t *testing.T) {
	sc := newScene(t, sandboxtest.Release{})
	env, ns := sc.env, sc.env.Namespace
	jobs := sc.pods.playJobs(t, "sluice-uninstall")
	sc.helm(t, append([]string{"install", "sluice", sc.chartDir}, sc.values...)...)
	sc.pods.leading(t, env, sc.this)
	p, redeployed := sc.work(t)
	sc.startWork(t, p, redeployed)

	// A person cordons a pool node sluice is not working on.
	var personal string
	nodes, err := p.nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if _, marked := n.Annotations[contract.AnnotationDisruption]; !marked && !n.Spec.Unschedulable && n.DeletionTimestamp.IsZero() {
			personal = n.Name
			break
		}
	}
	if personal == "" {
		t.Fatal("no pool node left for a person to cordon; the scene is too small")
	}
	if _, err := env.Client.CoreV1().Nodes().Patch(t.Context(), personal, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	sc.helm(t, "uninstall", "sluice", "-n", ns, "--kubeconfig", sc.kubeconfig, "--wait", "--timeout", "3m")
	t.Logf("helm uninstall --wait, its hook included: %s", time.Since(began).Round(100*time.Millisecond))
	runs := jobs()
	if len(runs) != 1 || runs[0].err != nil {
		t.Fatalf("the hook's pods: %+v; want one that succeeded", runs)
	}
	t.Logf("sluice uninstall, as the hook ran it:\n%s", runs[0].output)
	if name, _ := sc.pods.running(); name != "" {
		t.Errorf("the controller %s still runs after helm uninstall", name)
	}
	if _, err := env.Client.BatchV1().Jobs(ns).Get(t.Context(), "sluice-uninstall", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the hook's Job after it succeeded: %v; want it deleted (hook-succeeded)", err)
	}

	// Nothing of sluice's is left on any node, nor put back.
	holdsFor(t, 5*time.Second, "no sluice finalizer, taint or own cordon on any node", func(ctx context.Context) bool {
		all, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return true
		}
		for _, n := range all.Items {
			owner := ownership.CordonedBy(&n)
			if slices.Contains(n.Finalizers, contract.FinalizerTermination) || owner != "" && owner != ownership.OwnerCLI ||
				slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return slices.Contains(contract.NodeWorkingTaints(), t.Key) }) {
				t.Logf("node %s: finalizers %v, cordoned by %q, taints %v", n.Name, n.Finalizers, owner, n.Spec.Taints)
				return false
			}
		}
		return true
	})
	if n, err := env.Client.CoreV1().Nodes().Get(t.Context(), personal, metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
		t.Errorf("the person's cordon on %s: %v; want it kept", personal, err)
	}
	if n, err := env.Client.CoreV1().Nodes().Get(t.Context(), redeployed, metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Errorf("the redeployed node %s: %v, still cordoned; sluice's cordon should be gone", redeployed, err)
	}
	// kubectl delete node of a pool node completes.
	run(t, sc.kubectl, "--kubeconfig", sc.kubeconfig, "delete", "node", personal, "--timeout=30s")
	if _, err := env.Client.CoreV1().Nodes().Get(t.Context(), personal, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s after kubectl delete: %v; want it gone", personal, err)
	}
}

// holdsFor fails the test when cond is false at any of its checks, every
// 200 ms for window.
func holdsFor(t *testing.T, window time.Duration, what string, cond func(context.Context) bool) {
	t.Helper()
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if !cond(t.Context()) {
			t.Errorf("%s: it did not hold", what)
			return
		}
	}
}
