package nodepool

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// view is what the controller sees of one pool at one moment.
type view struct {
	nodes []*corev1.Node
	// size is the pool's size for its budgets: its nodes less the
	// replacements of nodes still there.
	size       int
	resources  corev1.ResourceList
	disrupting int
	drifted    int
	expired    int
	// candidates are the nodes to replace, oldest first, and why.
	candidates []disruption.Candidate
	// nextChange is how long until something changes by itself: a node
	// expires, a budget window opens or closes; zero when nothing will.
	nextChange time.Duration
	podsOn     func(string) ([]*corev1.Pod, error)
	// replacements name the nodes made to replace nodes still there.
	replacements map[string]bool
	// unseen are nodes the controller marked that its cache does not show
	// marked yet: counted as disrupting, never chosen again.
	unseen []string
}

// observe computes the pool's view from its nodes.
func observe(pool *v1alpha1.NodePool, nodes []*corev1.Node, podsOn func(string) ([]*corev1.Pod, error), now time.Time) *view {
	v := &view{nodes: nodes, resources: corev1.ResourceList{}, podsOn: podsOn}
	for _, n := range nodes {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			if q, ok := n.Status.Capacity[r]; ok {
				sum := v.resources[r]
				if sum.IsZero() {
					sum = resource.Quantity{Format: q.Format}
				}
				sum.Add(q)
				v.resources[r] = sum
			}
		}
		if at, expired, ok := disruption.Expiry(n, pool.DisruptionSpec(), now); ok && !expired && n.DeletionTimestamp.IsZero() {
			v.nextChange = sooner(v.nextChange, at.Sub(now))
		}
	}
	replacements := disruption.Replacements(nodes)
	v.replacements = replacements
	v.disrupting = budget.Count(nodes, replacements, now)
	v.size = len(nodes)
	for _, n := range nodes {
		if replacements[n.Name] {
			v.size--
		}
	}
	v.candidates = disruption.Candidates(pool, nodes, provider.TemplateHash(pool.Spec.Template), now)
	for _, c := range v.candidates {
		switch c.Reason {
		case v1alpha1.ReasonDrifted:
			v.drifted++
		case v1alpha1.ReasonExpired:
			v.expired++
		}
	}
	if t, ok, err := budget.NextChange(pool.DisruptionSpec().BudgetsOrDefault(), now); err == nil && ok {
		v.nextChange = sooner(v.nextChange, t.Sub(now)+time.Second)
	}
	return v
}

// allowed is, per reason, how many more of the pool's nodes may be
// disrupted now.
func (v *view) allowed(pool *v1alpha1.NodePool, now time.Time) []v1alpha1.AllowedDisruptions {
	budgets := pool.DisruptionSpec().BudgetsOrDefault()
	out := make([]v1alpha1.AllowedDisruptions, 0, len(v1alpha1.DisruptionReasons))
	for _, r := range v1alpha1.DisruptionReasons {
		a, err := budget.Allowed(budgets, v.size, v.disrupting, r, now)
		if err != nil {
			continue
		}
		out = append(out, v1alpha1.AllowedDisruptions{Reason: r, Nodes: clamp32(a.Nodes)})
	}
	return out
}
