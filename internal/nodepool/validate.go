package nodepool

import (
	"errors"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/internal/alerts"
	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Reasons a pool cannot be applied, as its Ready condition gives them.
const (
	ReasonInvalidNodeSelector = "InvalidNodeSelector"
	ReasonInvalidBudget       = "InvalidBudget"
	ReasonTemplateNotSelected = "TemplateNotSelected"
	ReasonLimitsBelowSize     = "LimitsBelowSize"
	ReasonInvalidUpgrade      = "InvalidUpgrade"
	ReasonInvalidHealth       = "InvalidRepairOrReboot"
)

// Problem is why a pool cannot be applied: the pool is then left alone (its
// nodes get the default maintenance policy if its selector is the problem;
// nothing is disrupted voluntarily otherwise) while other pools carry on.
type Problem struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (p *Problem) Error() string { return p.Message }

// Validate judges what the API server cannot check in a pool: its selector
// parses, its budgets' schedules and time zones work, the nodes its provider
// would make from the template belong to it, and its limits leave room for
// the nodes it has. nodes is how many nodes the pool selects now. Nil means
// the pool can be applied.
func Validate(pool *v1alpha1.NodePool, nodes int) *Problem {
	if err := selectorError(pool); err != nil {
		return &Problem{Reason: ReasonInvalidNodeSelector, Message: err.Error() + "; its nodes get the default maintenance policy until it is fixed"}
	}
	if d := pool.Spec.Disruption; d != nil {
		if err := budget.Validate(d.Budgets); err != nil {
			return &Problem{Reason: ReasonInvalidBudget, Message: fmt.Sprintf("node pool %s: %v; no node of the pool is disrupted of sluice's own accord until it is fixed", pool.Name, err)}
		}
	}
	if t := pool.Spec.Template; t != nil && pool.Spec.Provider.Manages() {
		sel, _ := metav1.LabelSelectorAsSelector(&pool.Spec.NodeSelector) // parsed above
		if !sel.Matches(labels.Set(t.Labels)) {
			return &Problem{Reason: ReasonTemplateNotSelected, Message: fmt.Sprintf(
				"node pool %s: the nodes its provider would make from spec.template (labels %v) do not match its spec.nodeSelector, so they would belong to no pool; add the selector's labels to spec.template.labels", pool.Name, t.Labels)}
		}
	}
	if err := HealthError(pool); err != nil {
		return &Problem{Reason: ReasonInvalidHealth, Message: fmt.Sprintf("node pool %s: %v; no node of the pool is disrupted of sluice's own accord until it is fixed", pool.Name, err)}
	}
	if err := UpgradeError(pool, nodes); err != nil {
		return &Problem{Reason: ReasonInvalidUpgrade, Message: fmt.Sprintf("node pool %s: %v; no node of the pool is disrupted of sluice's own accord until it is fixed", pool.Name, err)}
	}
	if l := pool.Spec.Limits; l != nil && l.Nodes != nil && int(*l.Nodes) < nodes {
		return &Problem{Reason: ReasonLimitsBelowSize, Message: fmt.Sprintf(
			"node pool %s: spec.limits.nodes is %d but the pool has %d nodes; raise the limit (or remove nodes): sluice replaces nothing in the pool until then", pool.Name, *l.Nodes, nodes)}
	}
	return nil
}

// selectorError checks the pool's selector on its own (For only reports it
// while matching nodes, and a cluster may have none).
func selectorError(pool *v1alpha1.NodePool) *SelectorError {
	_, err := For(&corev1.Node{}, []v1alpha1.NodePool{*pool})
	var selErr *SelectorError
	if errors.As(err, &selErr) {
		return selErr
	}
	return nil
}

// UpgradeError says why the pool's upgrade settings cannot roll a pool of
// size nodes: unreadable, or surge and unavailable both 0 (the API server
// refuses the written 0s; a percentage can still round to 0 nodes).
func UpgradeError(pool *v1alpha1.NodePool, size int) error {
	u := pool.UpgradeSpecOf()
	surge, err := u.Surge(size)
	if err != nil {
		return fmt.Errorf("spec.upgrade.maxSurge %w", err)
	}
	unavailable, err := u.Unavailable(size)
	if err != nil {
		return fmt.Errorf("spec.upgrade.maxUnavailable %w", err)
	}
	if size > 0 && surge == 0 && unavailable == 0 {
		return fmt.Errorf("spec.upgrade.maxSurge and maxUnavailable come to 0 nodes of %d, so no node could ever be upgraded: raise maxSurge (such as 1 or 33%%) or maxUnavailable", size)
	}
	return nil
}

// HealthError judges what the API server cannot of spec.repair and
// spec.reboot (docs/health.md): the breaker's limits, the reboot windows'
// schedules and time zones, the blocking pod selectors, the Prometheus URL
// and alert filter. The error names the field.
func HealthError(pool *v1alpha1.NodePool) error {
	if r := pool.Spec.Repair; r != nil {
		poolMax, zoneMax := r.Limits()
		for field, v := range map[string]string{"maxUnhealthy": poolMax, "maxUnhealthyPerZone": zoneMax} {
			if _, err := budget.Limit(v1alpha1.Budget{Nodes: v}, 0); err != nil {
				return fmt.Errorf("spec.repair.%s %q: %w", field, v, err)
			}
		}
	}
	rb := pool.Spec.Reboot
	if rb == nil {
		return nil
	}
	if err := budget.Validate(rb.WindowBudgets()); err != nil {
		return fmt.Errorf("spec.reboot.windows: %w", err)
	}
	for i := range rb.BlockingPodSelectors {
		if _, err := metav1.LabelSelectorAsSelector(&rb.BlockingPodSelectors[i]); err != nil {
			return fmt.Errorf("spec.reboot.blockingPodSelectors[%d]: %w", i, err)
		}
	}
	if p := rb.Prometheus; p != nil {
		if err := (&alerts.Checker{URL: p.URL}).Validate(); err != nil {
			return fmt.Errorf("spec.reboot.prometheus.url: %w", err)
		}
		if _, err := regexp.Compile(p.AlertFilterRegexp); err != nil {
			return fmt.Errorf("spec.reboot.prometheus.alertFilterRegexp %q: %w", p.AlertFilterRegexp, err)
		}
	}
	return nil
}
