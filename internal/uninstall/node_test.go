package uninstall

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// Clean takes off what sluice's controllers put on a node, and leaves what
// a person asked for and what only describes the node.
func TestClean(t *testing.T) {
	userTaint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	working := func() *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1",
				Finalizers: []string{"example.com/keep", contract.FinalizerTermination},
				Labels:     map[string]string{contract.LabelNodePool: "web", contract.LabelUpgradeStatus: "Blocked", "tier": "web"},
				Annotations: map[string]string{contract.AnnotationDrain: `{"holder":"x"}`, contract.AnnotationDisruption: "{}",
					contract.AnnotationMachine: "web-abc12", contract.AnnotationRegistered: "{}", contract.AnnotationDoNotDisrupt: "true"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{userTaint,
				{Key: contract.TaintMaintenance, Effect: corev1.TaintEffectNoSchedule},
				{Key: contract.TaintConsolidation, Effect: corev1.TaintEffectPreferNoSchedule},
				{Key: contract.TaintUnregistered, Value: "true", Effect: corev1.TaintEffectNoExecute}}},
		}
	}
	cordoned := func(owner string) *corev1.Node {
		n := working()
		n.Spec.Unschedulable = true
		if owner != "" {
			n.Annotations[contract.AnnotationCordonedBy] = owner
		}
		return n
	}
	for _, tc := range []struct {
		name        string
		node        *corev1.Node
		schedulable bool
		uncordoned  string
		kept        bool
	}{
		{"a node sluice works on, not cordoned", working(), true, "", false},
		{"cordoned for a maintenance event", cordoned(ownership.MaintenanceOwner("evt-1")), true, "maintenance/evt-1", false},
		{"cordoned to be deleted", cordoned("termination"), true, "termination", false},
		{"cordoned by a person's sluice drain", cordoned(ownership.OwnerCLI), false, "", true},
		{"cordoned with kubectl", cordoned(""), false, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.node.DeepCopy()
			got, c := Clean(tc.node)
			if !slices.Equal(got.Finalizers, []string{"example.com/keep"}) || !c.Finalizer {
				t.Errorf("finalizers %v (reported %v); want only example.com/keep left", got.Finalizers, c.Finalizer)
			}
			if !slices.Equal(got.Spec.Taints, []corev1.Taint{userTaint}) || len(c.Taints) != 3 {
				t.Errorf("taints %v (reported %v); want only the user's %s", got.Spec.Taints, c.Taints, userTaint.ToString())
			}
			if got.Spec.Unschedulable == tc.schedulable || c.Uncordoned != tc.uncordoned || (c.Kept != "") != tc.kept {
				t.Errorf("unschedulable %v, uncordoned %q, kept %q; want schedulable %v, uncordoned %q, a reason kept %v",
					got.Spec.Unschedulable, c.Uncordoned, c.Kept, tc.schedulable, tc.uncordoned, tc.kept)
			}
			for _, k := range []string{contract.AnnotationDrain, contract.AnnotationDisruption} {
				if _, ok := got.Annotations[k]; ok {
					t.Errorf("annotation %s left", k)
				}
			}
			for _, k := range []string{contract.AnnotationMachine, contract.AnnotationRegistered, contract.AnnotationDoNotDisrupt} {
				if got.Annotations[k] != before.Annotations[k] {
					t.Errorf("annotation %s = %q; want it kept as %q", k, got.Annotations[k], before.Annotations[k])
				}
			}
			if _, ok := got.Labels[contract.LabelUpgradeStatus]; ok || got.Labels[contract.LabelNodePool] != "web" || got.Labels["tier"] != "web" {
				t.Errorf("labels %v; want the upgrade status gone, the pool's and the user's kept", got.Labels)
			}
			if !c.MidDrain {
				t.Error("a node with a drain claim is not reported mid-drain")
			}
			if !equalNode(tc.node, before) {
				t.Error("Clean changed the node it was given")
			}
		})
	}
}

// A node sluice never touched gives no change.
func TestCleanLeavesOthersAlone(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"a": "b"}}}
	if _, c := Clean(n); !c.Empty() || c.Kept != "" {
		t.Errorf("Clean of an untouched node = %+v; want no change", c)
	}
}

func equalNode(a, b *corev1.Node) bool {
	return slices.Equal(a.Finalizers, b.Finalizers) && len(a.Spec.Taints) == len(b.Spec.Taints) &&
		a.Spec.Unschedulable == b.Spec.Unschedulable && len(a.Annotations) == len(b.Annotations) && len(a.Labels) == len(b.Labels)
}
