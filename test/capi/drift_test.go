package capi

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/test/audit"
)

// sluice's own replacements on a cluster-api pool: the pool's template labels
// change (drift), then its nodes expire, and each time sluice replaces all
// six nodes one at a time (budget 1), each replacement first (a Machine more
// through the MachineDeployment's replicas, Ready and registered with the
// pool's labels) and the old one drained, then removed through the
// delete-machine mark; the MachineDeployment ends where it began. The auditor
// watches budget, PDB floor and one replacement per node.
func TestDriftAndExpiryOfAMachineDeploymentPool(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const md = "md-d"
	if err := w.workers(md, 6).Create(ctx, w.dyn, w.Client, "a"); err != nil {
		t.Fatal(err)
	}
	kube := poolClient(t, w.Env)
	pool := workerPool(w, md, "1")
	// The template names the selector's label too, as every pool's must; the
	// kubelet registers it already (its bootstrap data), the rest sluice adds.
	pool.Spec.Template = &v1alpha1.NodeTemplate{Labels: map[string]string{"tier": "a", "pool": pool.Spec.NodeSelector.MatchLabels["pool"]}}
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), pool) })
	startSluice(t, w)
	sel := labels.SelectorFromSet(pool.Spec.NodeSelector.MatchLabels)
	generation := func(tier string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			nodes, err := w.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
			if err != nil {
				return false, err
			}
			n := 0
			for _, node := range nodes.Items {
				if node.Labels["tier"] == tier && node.DeletionTimestamp.IsZero() && !node.Spec.Unschedulable {
					n++
				}
			}
			return n == 6 && len(nodes.Items) == 6, nil
		}
	}
	w.WaitFor(t, 2*time.Minute, "6 nodes registered with tier=a", generation("a"))
	names := func() map[string]bool {
		nodes, err := w.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, n := range nodes.Items {
			m[n.Name] = true
		}
		return m
	}
	first := names()
	w.Create(t,
		fixture.Deployment(w.Namespace, "web", 6, fixture.NodeSelector(pool.Spec.NodeSelector.MatchLabels), fixture.ExitsAfter(1)),
		fixture.PDB(w.Namespace, "web", "web", fixture.MaxUnavailable("1")),
	)
	w.WaitForPods(t, "app=web", 6)
	a, err := audit.Start(t.Context(), w.Config, t.Logf)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	setPool(t, kube, pool, func(p *v1alpha1.NodePool) { p.Spec.Template.Labels["tier"] = "b" })
	w.WaitFor(t, 8*time.Minute, "the drift to replace all 6 nodes with tier=b ones", generation("b"))
	second := names()
	for n := range second {
		if first[n] {
			t.Errorf("node %s of the first generation is still in the pool after the drift", n)
		}
	}
	t.Logf("drift of 6 nodes at budget 1: %s", time.Since(start).Round(time.Second))
	w.settle(t, md)
	if r := w.replicas(t, md); r != 6 {
		t.Errorf("MachineDeployment %s has %d replicas after the drift; want 6, as before", md, r)
	}

	// Expiry: every node older than a minute goes; once the drift's nodes
	// have all been replaced, expiry is turned off again.
	start = time.Now()
	setPool(t, kube, pool, func(p *v1alpha1.NodePool) { p.Spec.Disruption.ExpireAfter = "1m" })
	w.WaitFor(t, 10*time.Minute, "expiry to replace every node of the drift's generation", func(ctx context.Context) (bool, error) {
		now := names()
		if len(now) != 6 {
			return false, nil
		}
		for n := range now {
			if second[n] {
				return false, nil
			}
		}
		return true, nil
	})
	setPool(t, kube, pool, func(p *v1alpha1.NodePool) { p.Spec.Disruption.ExpireAfter = v1alpha1.Never })
	t.Logf("expiry of 6 nodes at budget 1: %s", time.Since(start).Round(time.Second))
	w.settle(t, md)

	sum := a.Finish()
	t.Logf("auditor:\n%s", sum)
	if v := sum.Violations(); v > 0 {
		t.Errorf("the auditor found %d violations", v)
	}
	for _, inv := range []audit.Invariant{audit.Budget, audit.PDBFloor, audit.OneReplacement} {
		if sum.Row(inv).Checked == 0 {
			t.Errorf("the auditor never had occasion to check %s", inv)
		}
	}
}
