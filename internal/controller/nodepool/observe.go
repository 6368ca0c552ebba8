package nodepool

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// view is the pool's one view (disruption.View, which status, explain, plan
// and upgrade read too) and the controller's way to read a member's pods.
type view struct {
	*disruption.View
	podsOn func(string) ([]*corev1.Pod, error)
	// cluster is every node of the cluster, read only: the repair's
	// breaker reads a control plane failure from how many of those outside
	// the pool are not Ready (clusterReadiness), asked only of a pool with
	// spec.repair.
	cluster []*corev1.Node
	// health is the pass's reading of a repaired pool's members
	// (observeHealth); nil for a pool without spec.repair.
	health *health
}

// unseen says whether the controller marked the node in a pass its cache
// does not show yet.
func (v *view) unseen(node string) bool { return slices.Contains(v.Unseen, node) }

// clusterReadiness is how many of the cluster's nodes outside the pool are
// not Ready, of how many.
func (v *view) clusterReadiness() (notReady, total int) {
	members := make(map[string]bool, len(v.Nodes))
	for _, n := range v.Nodes {
		members[n.Name] = true
	}
	for _, n := range v.cluster {
		if members[n.Name] {
			continue
		}
		total++
		if !budget.NodeReady(n) {
			notReady++
		}
	}
	return notReady, total
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
