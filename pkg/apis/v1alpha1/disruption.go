package v1alpha1

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultBudget is the budget of a pool that sets none: 10% of its nodes.
var DefaultBudget = Budget{Nodes: "10%"}

// DisruptionSpec returns the pool's disruption settings, nil when the pool or
// its settings are nil; DisruptionSpec's methods answer with the defaults
// then.
func (p *NodePool) DisruptionSpec() *DisruptionSpec {
	if p == nil {
		return nil
	}
	return p.Spec.Disruption
}

// Consolidates says whether sluice removes the pool's nodes to save cost:
// it makes the pool's machines and consolidation is on.
func (p *NodePool) Consolidates() bool {
	_, on := p.DisruptionSpec().ConsolidateAfterDuration()
	return p != nil && p.Spec.Provider.Manages() && on
}

// ExpireAfterDuration returns how old a node may grow, and false when nodes
// never expire (Never, unset, or unreadable: the CRD refuses the last).
func (d *DisruptionSpec) ExpireAfterDuration() (time.Duration, bool) {
	if d == nil || d.ExpireAfter == "" || d.ExpireAfter == Never {
		return 0, false
	}
	v, err := time.ParseDuration(d.ExpireAfter)
	if err != nil || v <= 0 {
		return 0, false
	}
	return v, true
}

// TerminationGracePeriodOrNone returns how long a node being taken away may
// drain, and false when it may drain as long as its pods' budgets make it.
func (d *DisruptionSpec) TerminationGracePeriodOrNone() (time.Duration, bool) {
	if d == nil || d.TerminationGracePeriod == nil {
		return 0, false
	}
	return d.TerminationGracePeriod.Duration, true
}

// BudgetsOrDefault returns the pool's budgets, or the default one.
func (d *DisruptionSpec) BudgetsOrDefault() []Budget {
	if d == nil || len(d.Budgets) == 0 {
		return []Budget{DefaultBudget}
	}
	return d.Budgets
}

// IsPaused says whether voluntary disruption of the pool is paused.
func (d *DisruptionSpec) IsPaused() bool { return d != nil && d.Paused }

// AppliesTo says whether the budget limits disruptions for reason r; a
// budget that names no reasons limits every reason.
func (b Budget) AppliesTo(r DisruptionReason) bool {
	if len(b.Reasons) == 0 {
		return true
	}
	for _, x := range b.Reasons {
		if x == r {
			return true
		}
	}
	return false
}

// String shows the budget the way a user wrote it.
func (b Budget) String() string {
	s := "nodes " + b.Nodes
	if len(b.Reasons) > 0 {
		s += fmt.Sprintf(" for %v", b.Reasons)
	}
	if b.Schedule != nil {
		s += fmt.Sprintf(" during %q", *b.Schedule)
		if b.Duration != nil {
			s += " for " + b.Duration.Duration.String()
		}
		if b.TimeZone != nil {
			s += " (" + *b.TimeZone + ")"
		}
	}
	return s
}

// DefaultMinSavings is ConsolidationSpec.MinSavings' default, in percent.
const DefaultMinSavings = 10

// ConsolidateAfterDuration returns how long a node must go without pod
// churn before consolidation considers it, and false when consolidation is
// off (Never, or unreadable: the CRD refuses that). Unset is 30 s, as the
// CRD's default.
func (d *DisruptionSpec) ConsolidateAfterDuration() (time.Duration, bool) {
	if d == nil || d.ConsolidateAfter == "" {
		return 30 * time.Second, true
	}
	if d.ConsolidateAfter == Never {
		return 0, false
	}
	v, err := time.ParseDuration(d.ConsolidateAfter)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// Policy returns the consolidation policy, WhenEmptyOrUnderutilized when
// unset.
func (d *DisruptionSpec) Policy() ConsolidationPolicy {
	if d == nil || d.ConsolidationPolicy == "" {
		return ConsolidateWhenEmptyOrUnderutilized
	}
	return d.ConsolidationPolicy
}

// MinSavingsPercent returns the least saving a replacement must make, in
// percent.
func (d *DisruptionSpec) MinSavingsPercent() int {
	if d == nil || d.Consolidation == nil {
		return DefaultMinSavings
	}
	if v, ok := percent(d.Consolidation.MinSavings); ok {
		return v
	}
	return DefaultMinSavings
}

// UtilizationThresholdPercent returns the utilization rule, and false when
// the pool sets none.
func (d *DisruptionSpec) UtilizationThresholdPercent() (int, bool) {
	if d == nil || d.Consolidation == nil || d.Consolidation.UtilizationThreshold == nil {
		return 0, false
	}
	return percent(*d.Consolidation.UtilizationThreshold)
}

// SpotToSpotAllowed says whether a spot node may be replaced by spot.
func (d *DisruptionSpec) SpotToSpotAllowed() bool {
	return d != nil && d.Consolidation != nil && d.Consolidation.SpotToSpot
}

// percent reads "NN%" (0 to 100).
func percent(s string) (int, bool) {
	v, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || !strings.HasSuffix(s, "%") || v < 0 || v > 100 {
		return 0, false
	}
	return v, true
}
