package disruption

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// View is one pool at one moment, as sluice decides with it: the NodePool
// controller spends its budgets from it, and `sluice status`, `explain`,
// `plan` and `upgrade` report from it, so what they say the budgets allow is
// what the controller would spend. Observe is the only way to make one.
type View struct {
	Pool *v1alpha1.NodePool
	// Nodes are the pool's members.
	Nodes []*corev1.Node
	// Size is the pool's size for its budgets, surges and limits: its
	// members less the replacements of nodes still there (a replacement
	// booting does not make the pool larger while the node it replaces is
	// still counted).
	Size int
	// Disrupting are the members out of service for any reason (budget.Count),
	// plus the nodes the controller marked that its cache does not show yet
	// (Unseen).
	Disrupting int
	// Replacements name the members made to replace members still there.
	Replacements map[string]bool
	// Candidates are the members to replace, oldest first, and why.
	Candidates []Candidate
	// Drifted counts the Candidates that differ from the template,
	// whichever method takes them; Expired those taken for their age.
	Drifted, Expired int
	// Resources is the members' summed capacity of CPU, memory and pods.
	Resources corev1.ResourceList
	// NextChange is how long until something changes by itself: a member
	// expires, a budget window opens or closes; zero when nothing will.
	NextChange time.Duration
	// Unseen are the nodes the controller marked whose mark its cache does
	// not show yet: counted as disrupting, never chosen again. Only the
	// controller knows them (MarkUnseen); a reader of the cluster sees them
	// a moment later as marked.
	Unseen []string
}

// Observe computes the pool's view from its members at now.
func Observe(pool *v1alpha1.NodePool, members []*corev1.Node, now time.Time) *View {
	v := &View{Pool: pool, Nodes: members, Resources: corev1.ResourceList{}}
	for _, n := range members {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			if q, ok := n.Status.Capacity[r]; ok {
				sum := v.Resources[r]
				if sum.IsZero() {
					sum = resource.Quantity{Format: q.Format}
				}
				sum.Add(q)
				v.Resources[r] = sum
			}
		}
		if at, expired, ok := Expiry(n, pool.DisruptionSpec(), now); ok && !expired && n.DeletionTimestamp.IsZero() {
			v.changesIn(at.Sub(now))
		}
	}
	v.Replacements = Replacements(members)
	v.Disrupting = budget.Count(members, v.Replacements, now)
	v.Size = len(members)
	for _, n := range members {
		if v.Replacements[n.Name] {
			v.Size--
		}
	}
	v.Candidates = Candidates(pool, members, provider.TemplateHash(pool.Spec.Template), now)
	for _, c := range v.Candidates {
		switch {
		case c.Drifted():
			v.Drifted++
		case c.Reason == v1alpha1.ReasonExpired:
			v.Expired++
		}
	}
	if t, ok, err := budget.NextChange(pool.DisruptionSpec().BudgetsOrDefault(), now); err == nil && ok {
		v.changesIn(t.Sub(now) + time.Second)
	}
	return v
}

// CountOnly counts as disrupting only these of the members (the deletion
// controller leaves out the deleted nodes still waiting their turn).
func (v *View) CountOnly(nodes []*corev1.Node, now time.Time) {
	v.Disrupting = budget.Count(nodes, v.Replacements, now)
}

// MarkUnseen counts a node the controller marked that its cache does not
// show marked yet.
func (v *View) MarkUnseen(node string) {
	v.Disrupting++
	v.Unseen = append(v.Unseen, node)
}

// Allowed is how many more of the pool's nodes the budgets let reason r
// disrupt now, of how many, and which budget binds: what the controller
// spends before it disrupts a node for r, and what status reports.
func (v *View) Allowed(r v1alpha1.DisruptionReason, now time.Time) (budget.Allowance, error) {
	return v.AllowedAfter(r, 0, now)
}

// AllowedAfter is Allowed once chosen more of the pool's nodes were taken in
// the controller's pass, before its cache shows them.
func (v *View) AllowedAfter(r v1alpha1.DisruptionReason, chosen int, now time.Time) (budget.Allowance, error) {
	return budget.Allowed(v.Pool.DisruptionSpec().BudgetsOrDefault(), v.Size, v.Disrupting+chosen, r, now)
}

// BudgetedReasons are the reasons the budgets hold, in the order sluice
// reports them: every reason but Unhealthy, which counts against the
// budgets but is held only by the repair's circuit breaker (a count of
// what a budget allows it would mislead).
func BudgetedReasons() []v1alpha1.DisruptionReason {
	out := make([]v1alpha1.DisruptionReason, 0, len(v1alpha1.DisruptionReasons))
	for _, r := range v1alpha1.DisruptionReasons {
		if r != v1alpha1.ReasonUnhealthy {
			out = append(out, r)
		}
	}
	return out
}

// AllowedByReason is Allowed for every budgeted reason, as the pool's
// status gives it.
func (v *View) AllowedByReason(now time.Time) []v1alpha1.AllowedDisruptions {
	out := make([]v1alpha1.AllowedDisruptions, 0, len(v1alpha1.DisruptionReasons))
	for _, r := range BudgetedReasons() {
		a, err := v.Allowed(r, now)
		if err != nil {
			continue
		}
		out = append(out, v1alpha1.AllowedDisruptions{Reason: r, Nodes: int32(min(a.Nodes, math.MaxInt32))}) //nolint:gosec // bounded above; never negative
	}
	return out
}

// Budget weighs the pool's budgets for reason r at now, with the next time
// they change: Allowed with what a person needs to read it.
func (v *View) Budget(r v1alpha1.DisruptionReason, now time.Time) BudgetFacts {
	budgets := v.Pool.DisruptionSpec().BudgetsOrDefault()
	f := BudgetFacts{Reason: r, Disrupting: v.Disrupting}
	a, err := v.Allowed(r, now)
	if err != nil {
		f.Error = err.Error()
		return f
	}
	f.Allowed, f.Limit = a.Nodes, a.Limit
	if a.Budget != nil {
		f.Binding = a.Budget.String()
	}
	at, ok, err := budget.NextChange(budgets, now)
	if err != nil || !ok {
		return f
	}
	then, err := v.Allowed(r, at)
	if err != nil {
		return f
	}
	f.NextChange = &BudgetChange{At: at, Allowed: then.Nodes}
	for _, b := range budgets {
		before, err1 := budget.Active(b, now)
		after, err2 := budget.Active(b, at)
		if err1 == nil && err2 == nil && before != after {
			f.NextChange.Budget, f.NextChange.Opens = b.String(), after
			break
		}
	}
	return f
}

// changesIn notes that something changes by itself after d (positive).
func (v *View) changesIn(d time.Duration) {
	if v.NextChange <= 0 || d < v.NextChange {
		v.NextChange = d
	}
}

// UpgradeWidth is spec.upgrade resolved against the pool's Size: how many
// surge nodes an upgrade makes ahead of the nodes they replace, and how many
// nodes it may drain before their replacement is Ready. The controller rolls
// with it; `sluice upgrade pool` and `sluice plan upgrade` print it.
func (v *View) UpgradeWidth() (surge, unavailable int, err error) {
	u := v.Pool.UpgradeSpecOf()
	if surge, err = u.Surge(v.Size); err != nil {
		return 0, 0, fmt.Errorf("spec.upgrade.maxSurge %w", err)
	}
	if unavailable, err = u.Unavailable(v.Size); err != nil {
		return 0, 0, fmt.Errorf("spec.upgrade.maxUnavailable %w", err)
	}
	return surge, unavailable, nil
}
