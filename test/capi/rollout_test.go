package capi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/test/audit"
)

// Cluster API's own rollout of a MachineDeployment (a new infrastructure
// template) goes through sluice: each old Machine is held by sluice's
// pre-drain hook, its Node drained by sluice under the pool's budget, a PDB
// that will not let its pod go shows as the blocker on the Machine, and once
// the PDB allows it the rollout finishes with every old Machine released to
// Cluster API as drained. The auditor watches the whole rollout.
func TestClusterAPIRolloutIsDrainedBySluice(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const md = "md-0"
	workers := w.workers(md, 3)
	if err := workers.Create(ctx, w.dyn, w.Client, "a"); err != nil {
		t.Fatal(err)
	}
	pool := w.createPool(t, md, "1")
	startSluice(t, w)
	w.waitHooked(t, 3)
	old := map[string]string{} // machine → node
	for _, m := range w.machines(t) {
		old[m.GetName()] = nodeRef(m)
	}
	poolSel := map[string]string{"pool": pool.Spec.NodeSelector.MatchLabels["pool"]}
	w.Create(t,
		fixture.Deployment(w.Namespace, "web", 3, fixture.NodeSelector(poolSel), fixture.ExitsAfter(1)),
		fixture.PDB(w.Namespace, "web", "web", fixture.MaxUnavailable("1")),
		fixture.Deployment(w.Namespace, "db", 1, fixture.NodeSelector(poolSel), fixture.ExitsAfter(1)),
		fixture.PDB(w.Namespace, "db", "db", fixture.MinAvailable("1")),
	)
	w.WaitForPods(t, "app=web", 3)
	w.WaitForPods(t, "app=db", 1)
	a, err := audit.Start(t.Context(), w.Config, t.Logf)
	if err != nil {
		t.Fatal(err)
	}

	// The rollout: a new template, as a person or a ClusterClass changes it.
	if err := workers.CreateTemplate(ctx, w.dyn, "b"); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"infrastructureRef":{"name":%q}}}}}`, md+"-b")
	if _, err := w.dyn.Resource(clusterapi.MachineDeployments).Namespace(w.Namespace).Patch(ctx, md, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// The db pod's PDB allows no eviction: its Machine waits, and says why.
	var blocked string
	w.waitMachines(t, 4*time.Minute, "the Machine of the db pod's Node to name its PDB as the blocker", func(ms []unstructured.Unstructured) bool {
		for i := range ms {
			if _, wasOld := old[ms[i].GetName()]; !wasOld || ms[i].GetDeletionTimestamp() == nil {
				continue
			}
			status, reason, msg := drainedCondition(&ms[i])
			if status == "False" && (reason == "Draining" || reason == "DrainBlocked") && strings.Contains(msg, "/db-") &&
				strings.Contains(msg, "PodDisruptionBudget db") {
				blocked = ms[i].GetName()
				t.Logf("Machine %s: %s", blocked, msg)
				return true
			}
		}
		return false
	})
	// Cluster API waits on the hook: it neither drained nor deleted the Node.
	time.Sleep(3 * time.Second)
	for _, m := range w.machines(t) {
		if m.GetName() == blocked && !hooked(m) {
			t.Errorf("Machine %s lost sluice's hook while its Node was still draining", blocked)
		}
	}
	if n, err := w.Client.CoreV1().Nodes().Get(ctx, old[blocked], metav1.GetOptions{}); err != nil || !n.DeletionTimestamp.IsZero() {
		t.Errorf("Node %s of the held Machine: %v; want it still there until sluice releases the Machine", old[blocked], err)
	}

	// A person relaxes the PDB; the rollout finishes.
	if _, err := w.Client.PolicyV1().PodDisruptionBudgets(w.Namespace).Patch(ctx, "db", types.MergePatchType,
		[]byte(`{"spec":{"minAvailable":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitMachines(t, 6*time.Minute, "the rollout to replace every old Machine", func(ms []unstructured.Unstructured) bool {
		fresh := 0
		for _, m := range ms {
			if _, wasOld := old[m.GetName()]; wasOld {
				return false
			}
			if nodeRef(m) != "" {
				fresh++
			}
		}
		return fresh == 3
	})
	sum := a.Finish()
	t.Logf("auditor:\n%s", sum)
	if v := sum.Violations(); v > 0 {
		t.Errorf("the auditor found %d violations", v)
	}
	if sum.Row(audit.PDBFloor).Checked == 0 {
		t.Errorf("the auditor never had occasion to check %s", audit.PDBFloor)
	}
	// Every old Node was drained by sluice for Cluster API, none by Cluster
	// API itself.
	events, err := w.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	drained := map[string]bool{}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Node" && e.Reason == "DrainedForClusterAPI" {
			drained[e.InvolvedObject.Name] = true
		}
	}
	for m, n := range old {
		if !drained[n] {
			t.Errorf("Node %s (Machine %s) has no DrainedForClusterAPI Event: sluice did not drain it for the rollout", n, m)
		}
	}
}
