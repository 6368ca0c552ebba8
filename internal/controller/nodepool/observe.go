package nodepool

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// view is the pool's one view (disruption.View, which status, explain, plan
// and upgrade read too) and the controller's way to read a member's pods.
type view struct {
	*disruption.View
	podsOn func(string) ([]*corev1.Pod, error)
}

// observe computes the pool's view from its members.
func observe(pool *v1alpha1.NodePool, nodes []*corev1.Node, podsOn func(string) ([]*corev1.Pod, error), now time.Time) *view {
	return &view{View: disruption.Observe(pool, nodes, now), podsOn: podsOn}
}

// AllowedNow is, per reason, how many more of the pool's members the
// controller would disrupt at now: what it writes to status.allowed, and
// what the first candidate of its pass may spend. `sluice status` must say
// the same (TestStatusSpendsWhatTheControllerSpends).
func AllowedNow(pool *v1alpha1.NodePool, members []*corev1.Node, now time.Time) []v1alpha1.AllowedDisruptions {
	return observe(pool, members, nil, now).AllowedByReason(now)
}
