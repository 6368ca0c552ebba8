// Package poolstatus summarizes a NodePool from its member nodes with the
// functions the controller decides with: its counts, its provider, and what
// its budgets allow per reason. `sluice status`, `sluice status -w` and
// `sluice top` all print it, so a count on any of them is the count the
// controller spends its budgets by.
package poolstatus

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// ExpiringWindow is how far ahead a pool's nodes count as expiring soon.
const ExpiringWindow = 24 * time.Hour

// Pool is one NodePool, computed from its nodes. Its field names are part of
// the CLI contract (`sluice status -o json`).
type Pool struct {
	Name       string `json:"name"`
	Nodes      int    `json:"nodes"`
	Disrupting int    `json:"disrupting"`
	// Drifted and Expired count the candidates by their reason, as the
	// controller's status does: a node both drifted and expired is drifted.
	Drifted      int      `json:"drifted"`
	Expired      int      `json:"expired"`
	ExpiringSoon int      `json:"expiringWithin24h"`
	Provider     Provider `json:"provider"`
	Paused       bool     `json:"paused"`
	// Ready says whether the pool can be applied; Problem says why not.
	Ready   bool              `json:"ready"`
	Problem *nodepool.Problem `json:"problem,omitempty"`
	// Budgets are, per disruption reason, what the budgets allow now.
	Budgets []disruption.BudgetFacts `json:"budgets"`
	// NextBudgetChange is when a scheduled budget next opens or closes.
	NextBudgetChange *time.Time `json:"nextBudgetChange,omitempty"`
	// NextChange is how long until the summary changes by itself (a node
	// expires, a budget window opens or closes); zero when nothing will.
	NextChange time.Duration `json:"-"`
}

// Provider is the pool's provider and what the controller last said of it.
type Provider struct {
	Name    v1alpha1.ProviderName `json:"name"`
	Managed bool                  `json:"managed"`
	// Ready is the ProviderReady condition's status: True, False, or
	// Unknown when no controller has reported on a managed pool; empty for
	// provider none.
	Ready   metav1.ConditionStatus `json:"ready,omitempty"`
	Reason  string                 `json:"reason,omitempty"`
	Message string                 `json:"message,omitempty"`
	// Group is the machine group the pool maps to, where the provider has
	// one sluice can name without asking the cloud (Cluster API's
	// MachineDeployment or MachineSet).
	Group string `json:"group,omitempty"`
}

// Of summarizes the chosen pools over the cluster's nodes; all are every
// pool, which decides which pool a node several select follows.
func Of(chosen []*v1alpha1.NodePool, nodes []corev1.Node, all []v1alpha1.NodePool, now time.Time) []Pool {
	out := make([]Pool, 0, len(chosen))
	if len(chosen) == 0 {
		return out
	}
	members := poolctrl.MembersOfEach(chosen, nodes, all)
	for _, p := range chosen {
		out = append(out, Summarize(p, members[p.Name], now))
	}
	return out
}

// Summarize computes the pool's status from its member nodes at now.
func Summarize(pool *v1alpha1.NodePool, members []*corev1.Node, now time.Time) Pool {
	// The controller's own view of the pool: what it says the budgets
	// allow is what the controller would spend.
	return FromView(disruption.Observe(pool, members, now), now)
}

// FromView is the pool's status from its view (disruption.Observe) at now,
// for a caller that also reads the view's candidates.
func FromView(v *disruption.View, now time.Time) Pool {
	pool, members := v.Pool, v.Nodes
	s := Pool{
		Name:       pool.Name,
		Nodes:      len(members),
		Disrupting: v.Disrupting,
		Drifted:    v.Drifted,
		Expired:    v.Expired,
		Paused:     disruption.PoolPaused(pool),
		Provider:   ProviderOf(pool),
		Budgets:    []disruption.BudgetFacts{},
		NextChange: v.NextChange,
	}
	for _, n := range members {
		if ExpiringSoon(n, pool, now) {
			s.ExpiringSoon++
		}
	}
	s.Problem = nodepool.Validate(pool, v.Size)
	s.Ready = s.Problem == nil
	for _, r := range disruption.BudgetedReasons() {
		b := v.Budget(r, now)
		s.Budgets = append(s.Budgets, b)
		if b.NextChange != nil && s.NextBudgetChange == nil {
			at := b.NextChange.At
			s.NextBudgetChange = &at
		}
	}
	return s
}

// ExpiringSoon says whether the node, not yet expired nor being deleted,
// expires within ExpiringWindow of now.
func ExpiringSoon(n *corev1.Node, pool *v1alpha1.NodePool, now time.Time) bool {
	at, expired, ok := disruption.Expiry(n, pool.DisruptionSpec(), now)
	return ok && !expired && n.DeletionTimestamp == nil && at.Sub(now) <= ExpiringWindow
}

// ProviderOf is the pool's provider and its ProviderReady condition.
func ProviderOf(pool *v1alpha1.NodePool) Provider {
	p := Provider{Name: pool.Spec.Provider.NameOrNone(), Managed: pool.Spec.Provider.Manages()}
	if c := pool.Spec.Provider.ClusterAPI; c != nil {
		p.Group = "MachineSet " + c.Namespace + "/" + c.MachineSet
		if c.MachineDeployment != "" {
			p.Group = "MachineDeployment " + c.Namespace + "/" + c.MachineDeployment
		}
	}
	if !p.Managed {
		return p
	}
	c := meta.FindStatusCondition(pool.Status.Conditions, poolctrl.ConditionProviderReady)
	if c == nil {
		p.Ready, p.Reason, p.Message = metav1.ConditionUnknown, "NotReported", "no controller has reported on the pool's provider"
		return p
	}
	p.Ready, p.Reason, p.Message = c.Status, c.Reason, c.Message
	return p
}
