package capi

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
)

// A scale-down sluice holds for the budget (0) is held no longer than the
// Machine's nodeDrainTimeoutSeconds: then it is released without the
// exclusion, as sluice never drained it, and Cluster API drains and deletes
// it itself.
func TestAHeldDeletionIsReleasedAtItsBound(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const md = "md-b"
	workers := w.workers(md, 2)
	workers.NodeDrainTimeout = 20 * time.Second
	if err := workers.Create(ctx, w.dyn, w.Client, "a"); err != nil {
		t.Fatal(err)
	}
	w.createPool(t, md, "0")
	startSluice(t, w)
	w.waitHooked(t, 2)
	if _, err := w.dyn.Resource(clusterapi.MachineDeployments).Namespace(w.Namespace).Patch(ctx, md, types.MergePatchType,
		[]byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var held, node string
	w.waitMachines(t, time.Minute, "the scaled-down Machine held for the budget", func(ms []unstructured.Unstructured) bool {
		for i := range ms {
			if ms[i].GetDeletionTimestamp() == nil {
				continue
			}
			if status, reason, _ := drainedCondition(&ms[i]); status == "False" && reason == "WaitingForBudget" && hooked(ms[i]) {
				held, node = ms[i].GetName(), nodeRef(ms[i])
				return true
			}
		}
		return false
	})
	start := time.Now()
	w.waitMachines(t, 2*time.Minute, "Cluster API to delete the Machine once sluice lets it go", func(ms []unstructured.Unstructured) bool {
		for _, m := range ms {
			if m.GetName() == held {
				return false
			}
		}
		return true
	})
	if waited := time.Since(start); waited < 5*time.Second {
		t.Errorf("Machine %s went %s after it was seen held; want it held until its bound (20s from Cluster API's wait)", held, waited)
	}
	events, err := w.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, e := range events.Items {
		reasons[e.Reason] = true
	}
	if !reasons["DrainBoundReached"] || reasons["DrainedForClusterAPI"] {
		t.Errorf("Node %s's Events %v; want DrainBoundReached and no DrainedForClusterAPI (sluice never drained it)", node, reasons)
	}
}
