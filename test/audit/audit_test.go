package audit_test

// TestAuditorCatchesEachBreach plays a careless controller against the real
// API server: it commits one breach of each invariant, and one act that is
// allowed beside it, and requires the auditor to count exactly the breaches.
// An auditor that cannot fail vouches for nothing.

import (
	"context"
	"fmt"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/test/audit"
)

func TestAuditorCatchesEachBreach(t *testing.T) {
	env := sandboxtest.New(t)
	ctx := t.Context()
	poolName := sandboxtest.UniqueName("audit")
	labels := map[string]string{"audit.sluice.dev/pool": poolName}
	nodes := env.CreateNodes(t, fixture.AKSPool(poolName, 7, fixture.WithLabels(labels)))
	createPool(t, env, poolName, labels)

	// Two workloads on the pool: "tight" may lose no pod, "loose" one.
	sel := fixture.NodeSelector(labels)
	env.Create(t,
		fixture.Deployment(env.Namespace, "tight", 3, sel), fixture.PDB(env.Namespace, "tight", "tight", fixture.MinAvailable("3")),
		fixture.Deployment(env.Namespace, "loose", 3, sel), fixture.PDB(env.Namespace, "loose", "loose", fixture.MaxUnavailable("1")))
	env.WaitForPods(t, "app=tight", 3)
	env.WaitForPods(t, "app=loose", 3)
	env.WaitForPDB(t, "tight", 3)
	env.WaitForPDB(t, "loose", 3)

	// Two pools for the health invariants, budgets wide open so that no
	// breach here is also the budget's: "mend" repairs with a breaker of
	// one node and reboots only in a window that is closed now; "patch"
	// reboots any time, but never under a pod labelled app=blocker.
	mendName, patchName := poolName+"m", poolName+"p"
	mendLabels, patchLabels := map[string]string{"audit.sluice.dev/pool": mendName}, map[string]string{"audit.sluice.dev/pool": patchName}
	mend := env.CreateNodes(t, fixture.AKSPool(mendName, 4, fixture.WithLabels(mendLabels)))
	patch := env.CreateNodes(t, fixture.AKSPool(patchName, 3, fixture.WithLabels(patchLabels)))
	createPool(t, env, mendName, mendLabels, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption = &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "100%"}}}
		p.Spec.Repair = &v1alpha1.RepairSpec{MaxUnhealthy: "1", MaxUnhealthyPerZone: "100%"}
		p.Spec.Reboot = &v1alpha1.RebootSpec{Windows: []v1alpha1.RebootWindow{{Schedule: "0 0 1 1 *", Duration: metav1.Duration{Duration: time.Hour}}}}
	})
	createPool(t, env, patchName, patchLabels, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption = &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "100%"}}}
		p.Spec.Reboot = &v1alpha1.RebootSpec{BlockingPodSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "blocker"}}}}
	})
	env.Create(t, fixture.Pod(env.Namespace, "blocker", fixture.OnNode(patch[0].Name), fixture.Label("app", "blocker")))
	for _, n := range mend[:2] {
		patchNode(t, env, n.Name, `{"metadata":{"annotations":{"sandbox.sluice.dev/not-ready":"true"}}}`)
		env.WaitForNodeReady(t, n.Name, false)
	}

	a, err := audit.Start(ctx, env.Config, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	n := func(i int) string { return nodes[i].Name }

	// budget (default 10% of 7 = 1) and one-replacement: two nodes marked,
	// both naming the same replacement.
	mark(t, env, n(0), "Drifted", "repl-a")
	mark(t, env, n(1), "Drifted", "repl-a")
	// one-replacement: a machine in the pool nobody asked for.
	stray := fixture.AKSPool(poolName+"x", 1, fixture.WithLabels(labels)).Nodes()[0]
	env.Create(t, stray)
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Nodes().Delete(context.Background(), stray.Name, metav1.DeleteOptions{})
	})

	// pdb-floor: an eviction the API server allows, then a delete that
	// takes "tight" below its floor.
	loose := env.WaitForPods(t, "app=loose", 3)
	evict(t, env, loose[0].Name)
	tight := env.WaitForPods(t, "app=tight", 3)
	if err := env.Client.CoreV1().Pods(env.Namespace).Delete(ctx, tight[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// person-cordon: a person's cordon undone, and one the person undoes
	// after saying so.
	patchNode(t, env, n(2), `{"spec":{"unschedulable":true}}`)
	patchNode(t, env, n(2), `{"spec":{"unschedulable":false}}`)
	patchNode(t, env, n(3), `{"spec":{"unschedulable":true}}`)
	a.WillUncordon(n(3))
	patchNode(t, env, n(3), `{"spec":{"unschedulable":false}}`)

	// do-not-disrupt: a protected node marked for drift.
	patchNode(t, env, n(4), `{"metadata":{"annotations":{"sluice.dev/do-not-disrupt":"true"}}}`)
	mark(t, env, n(4), "Drifted", "")

	// machine-after-pods: a node held by sluice's finalizer let go with a
	// pod still on it.
	victim := n(5)
	env.Create(t, fixture.Pod(env.Namespace, "left-behind", fixture.OnNode(victim)))
	patchNode(t, env, victim, `{"metadata":{"finalizers":["sluice.dev/termination"]}}`)
	if err := env.Client.CoreV1().Nodes().Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	patchNode(t, env, victim, `{"metadata":{"finalizers":null}}`)

	// undisturbed: a node declared off limits, cordoned.
	a.Undisturbed(n(6), "its metadata held only rejected entries")
	patchNode(t, env, n(6), `{"metadata":{"annotations":{"sluice.dev/cordoned-by":"maintenance/x"}},"spec":{"unschedulable":true}}`)

	// repair-breaker: a repair with two of four nodes NotReady, one allowed.
	mark(t, env, mend[0].Name, "Unhealthy", "")
	// reboot-held: a reboot outside the window, and one under a blocking
	// pod.
	mark(t, env, mend[2].Name, "RebootRequired", "")
	mark(t, env, patch[0].Name, "RebootRequired", "")
	// reboot-uncordon: a node back from its reboot, left cordoned by it;
	// and one uncordoned first, as it should be.
	for i, n := range patch[1:] {
		rec := `{"reason":"RebootRequired","phase":"Rebooting","since":"2026-11-23T10:00:00Z"}`
		patchNode(t, env, n.Name, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,"sluice.dev/cordoned-by":"reboot"}},"spec":{"unschedulable":true}}`, contract.AnnotationDisruption, rec))
		if i == 1 {
			patchNode(t, env, n.Name, `{"metadata":{"annotations":{"sluice.dev/cordoned-by":null}},"spec":{"unschedulable":false}}`)
		}
		patchNode(t, env, n.Name, fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, contract.AnnotationDisruption))
	}

	sum := a.Finish()
	t.Logf("auditor summary:\n%s", sum)
	want := map[audit.Invariant]int{
		audit.Budget: 2, audit.OneReplacement: 2, audit.PDBFloor: 1, audit.PersonCordon: 1,
		audit.DoNotDisrupt: 1, audit.MachineAfterPods: 1, audit.Undisturbed: 1,
		audit.RepairBreaker: 1, audit.RebootHeld: 2, audit.RebootUncordon: 1,
	}
	for inv, breaches := range want {
		r := sum.Row(inv)
		if r.Violated != breaches {
			t.Errorf("%s: %d violations counted, want %d: %v", inv, r.Violated, breaches, r.Examples)
		}
	}
	for _, inv := range []audit.Invariant{audit.PDBFloor, audit.PersonCordon, audit.RebootHeld, audit.RebootUncordon} {
		if r := sum.Row(inv); r.Checked <= r.Violated {
			t.Errorf("%s: checked %d, violated %d: the allowed act beside the breach was not judged a pass", inv, r.Checked, r.Violated)
		}
	}
}

func createPool(t *testing.T, env *sandboxtest.Env, name string, labels map[string]string, edits ...func(*v1alpha1.NodePool)) {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := nodepool.Install(t.Context(), ext); err != nil {
		t.Fatal(err)
	}
	pool := &v1alpha1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: labels},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok},
		},
	}
	for _, edit := range edits {
		edit(pool)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pool)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(v1alpha1.NodePoolResource).Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(v1alpha1.NodePoolResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func mark(t *testing.T, env *sandboxtest.Env, node, reason, replacement string) {
	t.Helper()
	record := fmt.Sprintf(`{"reason":%q,"phase":"Launching","since":"2026-11-23T10:00:00Z","replacement":%q}`, reason, replacement)
	patchNode(t, env, node, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, contract.AnnotationDisruption, record))
}

func patchNode(t *testing.T, env *sandboxtest.Env, node, patch string) {
	t.Helper()
	if _, err := env.Client.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching node %s with %s: %v", node, patch, err)
	}
}

func evict(t *testing.T, env *sandboxtest.Env, pod string) {
	t.Helper()
	e := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: pod}}
	if err := env.Client.PolicyV1().Evictions(env.Namespace).Evict(t.Context(), e); err != nil {
		t.Fatalf("evicting %s: %v", pod, err)
	}
}
