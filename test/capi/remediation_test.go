package capi

import (
	"context"
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

// A MachineHealthCheck remediation is a repair: sluice drains the Machine's
// Node at once although the pool's budget allows no voluntary disruption
// (0), with its PDBs honoured, and Cluster API replaces the Machine.
func TestMachineHealthCheckRemediationIsDrainedPastTheBudget(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const md = "md-r"
	if err := w.workers(md, 3).Create(ctx, w.dyn, w.Client, "a"); err != nil {
		t.Fatal(err)
	}
	pool := w.createPool(t, md, "0")
	mhc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": clusterapi.Group + "/" + clusterapi.Version, "kind": "MachineHealthCheck",
		"metadata": map[string]any{"name": md, "namespace": w.Namespace},
		"spec": map[string]any{
			"clusterName": w.cluster,
			"selector":    map[string]any{"matchLabels": map[string]any{clusterapi.LabelDeploymentName: md}},
			"checks": map[string]any{"unhealthyNodeConditions": []any{
				map[string]any{"type": "Ready", "status": "Unknown", "timeoutSeconds": int64(300)},
			}},
		},
	}}
	if _, err := w.dyn.Resource(clusterapi.MachineHealthChecks).Namespace(w.Namespace).Create(ctx, mhc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startSluice(t, w)
	w.waitHooked(t, 3)
	poolSel := map[string]string{"pool": pool.Spec.NodeSelector.MatchLabels["pool"]}
	w.Create(t,
		fixture.Deployment(w.Namespace, "web", 3, fixture.NodeSelector(poolSel), fixture.ExitsAfter(1)),
		fixture.PDB(w.Namespace, "web", "web", fixture.MaxUnavailable("1")),
	)
	w.WaitForPods(t, "app=web", 3)
	a, err := audit.Start(t.Context(), w.Config, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	// The node has pods of web on it: pick the Machine of one that does.
	pods, err := w.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("listing web's pods: %v", err)
	}
	broken, node := "", pods.Items[0].Spec.NodeName
	for _, m := range w.machines(t) {
		if nodeRef(m) == node {
			broken = m.GetName()
		}
	}
	// A person tells the MachineHealthCheck the Machine is broken.
	patch := `{"metadata":{"annotations":{"` + clusterapi.AnnotationRemediateMachine + `":""}}}`
	if _, err := w.dyn.Resource(clusterapi.Machines).Namespace(w.Namespace).Patch(ctx, broken, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.WaitFor(t, 3*time.Minute, "Cluster API to replace the remediated Machine", func(context.Context) (bool, error) {
		fresh := 0
		for _, m := range w.machines(t) {
			if m.GetName() == broken {
				return false, nil
			}
			if nodeRef(m) != "" {
				fresh++
			}
		}
		return fresh == 3, nil
	})
	sum := a.Finish()
	t.Logf("auditor:\n%s", sum)
	if v := sum.Violations(); v > 0 {
		t.Errorf("the auditor found %d violations", v)
	}
	if sum.Row(audit.PDBFloor).Checked == 0 {
		t.Errorf("the auditor never had occasion to check %s", audit.PDBFloor)
	}
	events, err := w.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
	if err != nil {
		t.Fatal(err)
	}
	var draining, drained bool
	for _, e := range events.Items {
		switch e.Reason {
		case "DrainingForClusterAPI":
			draining = strings.Contains(e.Message, "remediation")
		case "DrainedForClusterAPI":
			drained = true
		case "ClusterAPIDeletionWaits":
			t.Errorf("the remediation waited for the budget: %s", e.Message)
		}
	}
	if !draining || !drained {
		t.Errorf("Node %s: sluice drained it as a remediation %v, released it drained %v; want both", node, draining, drained)
	}
}
