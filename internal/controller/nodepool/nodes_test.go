package nodepool

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// TestOnlyAMembershipChangeQueuesEveryPool: a pool's edit queues every
// other pool only when it can move nodes between pools (its selector), not
// for a budget, a limit or a status write; a pool made or deleted always
// does.
func TestOnlyAMembershipChangeQueuesEveryPool(t *testing.T) {
	pool := func(edit func(*v1alpha1.NodePool)) *v1alpha1.NodePool {
		p := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1}}
		p.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "web"}}
		edit(p)
		return p
	}
	old := pool(func(*v1alpha1.NodePool) {})
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.NodePool)
		want bool
	}{
		{"a limit", func(p *v1alpha1.NodePool) { p.Spec.Limits = &v1alpha1.Limits{Nodes: ptr.To(int32(9))} }, false},
		{"a status write", func(p *v1alpha1.NodePool) { p.Status.ObservedGeneration = 1 }, false},
		{"a selector's label", func(p *v1alpha1.NodePool) { p.Spec.NodeSelector.MatchLabels["pool"] = "api" }, true},
		{"a selector's expression", func(p *v1alpha1.NodePool) {
			p.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpExists}}
		}, true},
	} {
		if got := membershipChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: pool(tc.edit)}); got != tc.want {
			t.Errorf("%s: every pool queued = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !membershipChanged.Create(event.CreateEvent{Object: old}) || !membershipChanged.Delete(event.DeleteEvent{Object: old}) {
		t.Error("a pool made or deleted must queue every pool: the oldest pool selecting a node owns it")
	}
}
