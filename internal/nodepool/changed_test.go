package nodepool

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// TestChangedPassesWhatTheControllerReads: an edit passes when it moves
// nodes between pools (the selector) or changes what the controller reads;
// a limit's edit, read by none, passes by.
func TestChangedPassesWhatTheControllerReads(t *testing.T) {
	base := func() *v1alpha1.NodePool {
		p := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
		p.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "web"}}
		return p
	}
	limit, maintenance, selector := base(), base(), base()
	limit.Spec.Limits = &v1alpha1.Limits{Nodes: ptr.To(int32(3))}
	maintenance.Spec.Maintenance = &v1alpha1.MaintenanceSpec{}
	selector.Spec.NodeSelector.MatchLabels["pool"] = "api"
	readsMaintenance := Changed(func(p *v1alpha1.NodePool) any { return p.Spec.Maintenance })
	readsNothing := Changed(nil)
	for _, tc := range []struct {
		name        string
		edited      *v1alpha1.NodePool
		reads, none bool
	}{
		{"a limit", limit, false, false},
		{"the maintenance settings", maintenance, true, false},
		{"the selector", selector, true, true},
	} {
		e := event.UpdateEvent{ObjectOld: base(), ObjectNew: tc.edited}
		if got := readsMaintenance.Update(e); got != tc.reads {
			t.Errorf("%s, with the maintenance settings read: passed = %v, want %v", tc.name, got, tc.reads)
		}
		if got := readsNothing.Update(e); got != tc.none {
			t.Errorf("%s, with nothing more read: passed = %v, want %v", tc.name, got, tc.none)
		}
	}
}
