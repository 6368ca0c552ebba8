package budget

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/contract"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// claimBy is a drain claim held by holder, last renewed at renewed.
func claimBy(t *testing.T, holder string, renewed time.Time) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"id": "d-1", "holder": holder, "started": renewed, "renewed": renewed})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestDisrupting(t *testing.T) {
	ready := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: s}}
	}
	deleted := metav1.NewTime(noon.Add(-time.Minute))
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		deleting    bool
		cordoned    bool
		conditions  []corev1.NodeCondition
		why         string // empty when the node does not count
	}{
		{name: "Ready", conditions: ready(corev1.ConditionTrue)},
		{name: "cordoned", cordoned: true, conditions: ready(corev1.ConditionTrue), why: "cordoned"},
		{name: "being deleted", deleting: true, conditions: ready(corev1.ConditionTrue), why: "being deleted"},
		{name: "NotReady", conditions: ready(corev1.ConditionFalse), why: "NotReady"},
		{name: "Ready Unknown", conditions: ready(corev1.ConditionUnknown), why: "Ready Unknown"},
		{name: "no Ready condition", conditions: ready(corev1.ConditionTrue)[:1], why: "no Ready condition"},
		{name: "no conditions", why: "no Ready condition"},
		{
			name:        "marked for disruption",
			annotations: map[string]string{AnnotationDisruption: `{"reason":"Drifted"}`}, conditions: ready(corev1.ConditionTrue),
			why: "marked for disruption",
		},
		{
			name:        "a live drain claim",
			annotations: map[string]string{contract.AnnotationDrain: claimBy(t, "alice", noon.Add(-10*time.Second))}, conditions: ready(corev1.ConditionTrue),
			why: "being drained by alice",
		},
		{
			name:        "a live drain claim without a holder",
			annotations: map[string]string{contract.AnnotationDrain: claimBy(t, "", noon)}, conditions: ready(corev1.ConditionTrue),
			why: "being drained",
		},
		{
			name:        "a lapsed drain claim",
			annotations: map[string]string{contract.AnnotationDrain: claimBy(t, "alice", noon.Add(-time.Hour))}, conditions: ready(corev1.ConditionTrue),
		},
		{
			name:        "an unreadable drain claim",
			annotations: map[string]string{contract.AnnotationDrain: "alice"}, conditions: ready(corev1.ConditionTrue),
		},
		{
			name:        "other annotations",
			annotations: map[string]string{contract.AnnotationCordonedBy: "sluice", "sluice.dev/disruption-x": "1"}, conditions: ready(corev1.ConditionTrue),
		},
		{
			name:        "a drain says more than its cordon",
			annotations: map[string]string{contract.AnnotationDrain: claimBy(t, "alice", noon)}, cordoned: true, conditions: ready(corev1.ConditionTrue),
			why: "being drained by alice",
		},
		{name: "deletion says more than NotReady", deleting: true, conditions: ready(corev1.ConditionFalse), why: "being deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "pool-a1", Annotations: tc.annotations},
				Spec:       corev1.NodeSpec{Unschedulable: tc.cordoned},
				Status:     corev1.NodeStatus{Conditions: tc.conditions},
			}
			if tc.deleting {
				node.DeletionTimestamp = &deleted
			}
			why, counts := Disrupting(node, noon)
			if why != tc.why || counts != (tc.why != "") {
				t.Errorf("Disrupting = %q, %t; want %q", why, counts, tc.why)
			}
		})
	}
}

func TestDisruptingNil(t *testing.T) {
	if why, counts := Disrupting(nil, noon); counts || why != "" {
		t.Errorf("Disrupting(nil) = %q, %t", why, counts)
	}
}

// A replacement still booting does not count (the node it replaces does);
// once it is cordoned, marked or deleted, it counts like any node.
func TestCountLeavesOutBootingReplacements(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	node := func(name string, ready corev1.ConditionStatus, edit func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
		if edit != nil {
			edit(n)
		}
		return n
	}
	old := node("old", corev1.ConditionTrue, func(n *corev1.Node) { n.Annotations[AnnotationDisruption] = `{"replacement":"new"}` })
	tests := []struct {
		name  string
		nodes []*corev1.Node
		want  int
	}{
		{"booting replacement", []*corev1.Node{old, node("new", corev1.ConditionFalse, nil)}, 1},
		{"ready replacement", []*corev1.Node{old, node("new", corev1.ConditionTrue, nil)}, 1},
		{"cordoned replacement", []*corev1.Node{old, node("new", corev1.ConditionFalse, func(n *corev1.Node) { n.Spec.Unschedulable = true })}, 2},
		{"marked replacement", []*corev1.Node{old, node("new", corev1.ConditionTrue, func(n *corev1.Node) { n.Annotations[AnnotationDisruption] = `{}` })}, 2},
		{"NotReady node that replaces nothing", []*corev1.Node{old, node("other", corev1.ConditionFalse, nil)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Count(tt.nodes, map[string]bool{"new": true}, now); got != tt.want {
				t.Errorf("Count = %d, want %d", got, tt.want)
			}
		})
	}
}
