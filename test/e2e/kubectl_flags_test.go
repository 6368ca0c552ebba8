package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/drain"
)

const holdFinalizer = "e2e.sluice.dev/hold"

// kubectl drain and sluice drain with --skip-wait-for-delete-timeout and
// --chunk-size, each on its own node with its own copy of the pods: a pod
// held terminating past its grace period (a finalizer stands in for a gone
// kubelet) is evicted and not waited for, one already terminating longer is
// left alone, and both finish, paging their lists one pod at a time.
func TestWaitAndPagingFlagsMatchKubectl(t *testing.T) {
	env := sandboxtest.New(t)
	tools, err := sandbox.FindBinaries(context.Background(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	kubectl, sluice := filepath.Join(tools, "kubectl"), sandboxtest.Sluice(t)
	kubeconfig := writeKubeconfig(t, env)
	nodes := env.CreateNodes(t, fixture.KarpenterPool(sandboxtest.UniqueName("flags"), 3))
	ctx := context.Background()
	type side struct{ node, ns string }
	sides := map[string]side{"kubectl": {nodes[0].Name, env.Namespace}, "sluice": {nodes[1].Name, env.Namespace + "-s"}}
	env.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sides["sluice"].ns}})
	waitForServiceAccount(t, env, sides["sluice"].ns)
	heldOn := func(tool string) string { return "e2e.sluice.dev/held-" + tool }
	for tool, s := range sides {
		t.Cleanup(func() { releaseHeld(env, s.ns) })
		// held lands on the node to drain (labelled for it); its
		// replacement, once the label has moved, on the spare.
		patchLabel(t, env, s.node, heldOn(tool), "yes")
		env.Create(t,
			fixture.Deployment(s.ns, "held", 1, fixture.NodeSelector(map[string]string{heldOn(tool): "yes"}),
				fixture.Finalizer(holdFinalizer), fixture.GracePeriod(1)),
			fixture.Pod(s.ns, "stuck", fixture.OnNode(s.node), fixture.Finalizer(holdFinalizer)),
			fixture.Deployment(s.ns, "plain", 2, hostname(s.node), fixture.ExitsAfter(0.5)))
	}
	for tool, s := range sides {
		env.WaitFor(t, time.Minute, "the pods in "+s.ns, func(ctx context.Context) (bool, error) {
			pods, err := env.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
			return err == nil && len(pods.Items) == 4, nil
		})
		if err := env.Client.CoreV1().Pods(s.ns).Delete(ctx, "stuck", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		patchLabel(t, env, s.node, heldOn(tool), "")
		patchLabel(t, env, nodes[2].Name, heldOn(tool), "yes")
	}
	time.Sleep(3 * time.Second) // stuck's deletion timestamp is now more than 2s old

	flags := []string{"--skip-wait-for-delete-timeout=2", "--chunk-size=1", "--timeout=60s", "--kubeconfig", kubeconfig, "-v=6"}
	start := time.Now()
	_, kErr, kCode := run(t, kubectl, append([]string{"drain", sides["kubectl"].node}, flags...)...)
	kTook := time.Since(start)
	start = time.Now()
	sOut, sErr, sCode := run(t, sluice, append([]string{"drain", sides["sluice"].node, "-o", "json"}, flags...)...)
	sTook := time.Since(start)
	if kCode != 0 || sCode != 0 {
		t.Fatalf("kubectl exit %d (%s), sluice exit %d (%s%s); want both 0", kCode, kErr, sCode, sOut, sErr)
	}
	if kTook > 30*time.Second || sTook > 30*time.Second {
		t.Errorf("kubectl took %s, sluice %s: one waited for a pod it should not have", kTook, sTook)
	}
	// -v 6 logs every request: both list the node's pods a page of one at a
	// time, and sluice lists nothing whole (its watches' first lists, of the
	// node's pods and of the budgets, included).
	for tool, log := range map[string]string{"kubectl": kErr, "sluice": sErr} {
		var lists, whole []string
		for _, l := range podLists.FindAllString(log, -1) {
			if strings.Contains(l, "watch=true") {
				continue
			}
			lists = append(lists, l)
			if !strings.Contains(l, "limit=1") {
				whole = append(whole, l)
			}
		}
		if !slices.ContainsFunc(lists, func(l string) bool { return strings.Contains(l, "continue=") }) {
			t.Errorf("%s read no second page of pods with --chunk-size=1; its lists: %q", tool, lists)
		}
		if tool == "sluice" && len(whole) > 0 {
			t.Errorf("sluice listed without --chunk-size's limit: %q", whole)
		}
	}
	var report drain.Report
	if err := json.Unmarshal([]byte(sOut), &report); err != nil {
		t.Fatal(err)
	}
	for tool, s := range sides {
		pods, err := env.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + s.node})
		if err != nil {
			t.Fatal(err)
		}
		left := map[string]bool{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				t.Errorf("%s left %s on the node, not terminating", tool, p.Name)
			}
			left[p.Labels[fixture.LabelApp]] = true
		}
		if !left["held"] || !left["stuck"] || left["plain"] {
			t.Errorf("%s: terminating on the node %v; want held and stuck (held by their finalizer), plain gone", tool, left)
		}
	}
	outcomes := map[string]drain.PodOutcome{}
	for _, p := range report.Nodes[0].Pods {
		outcomes[strings.SplitN(p.Name, "-", 2)[0]] = p.Outcome
	}
	if outcomes["stuck"] != drain.PodSkipped || outcomes["held"] != drain.PodEvicted || outcomes["plain"] != drain.PodEvicted {
		t.Errorf("sluice's report %v; want stuck skipped, held and plain evicted", outcomes)
	}

	// kubectl 1.34 no longer takes --delete-local-data; sluice keeps it as
	// the deprecated name of --delete-emptydir-data.
	_, kErr, kCode = run(t, kubectl, "drain", sides["kubectl"].node, "--delete-local-data", "--kubeconfig", kubeconfig)
	if kCode == 0 || !strings.Contains(kErr, "unknown flag: --delete-local-data") {
		t.Errorf("kubectl --delete-local-data: exit %d %q; the pinned kubectl took it: compare the two here", kCode, kErr)
	}
}

// podLists matches the URL of a LIST of pods or budgets in a -v 6 request
// log line (a watch says watch=true; one pod's GET has no query).
var podLists = regexp.MustCompile(`/(pods|poddisruptionbudgets)\?[^"\s]*`)

func patchLabel(t *testing.T, env *sandboxtest.Env, node, key, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = `"` + value + `"`
	}
	patch := []byte(`{"metadata":{"labels":{"` + key + `":` + v + `}}}`)
	if _, err := env.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func releaseHeld(env *sandboxtest.Env, ns string) {
	ctx := context.Background()
	pods, _ := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		_, _ = env.Client.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}
