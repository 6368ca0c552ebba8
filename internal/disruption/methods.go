package disruption

import (
	"slices"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Method is one reason sluice disrupts a pool's nodes by itself. Methods
// lists them in their order of precedence, and that order is the only place
// precedence is decided: a node two methods would take is the earlier one's,
// and each method spends what the pool's budgets have left after the
// earlier ones in the same pass.
type Method struct {
	// Reason is what the method's disruptions count against in the budgets
	// and are recorded as.
	Reason v1alpha1.DisruptionReason
	// Mode is how the method takes a node away.
	Mode Mode
	// Revalidate says whether a decision waits, and is carried out only if
	// a second look, after the wait, makes it again (consolidation's
	// validation delay).
	Revalidate bool
	// Takes says, in a sentence for `sluice plan` and the docs, which
	// nodes the method takes.
	Takes string
	// owns says whether the candidate is the method's; nil for methods
	// that decide over the whole pool (consolidation), which take no
	// candidate another method owns.
	owns func(pool *v1alpha1.NodePool, c Candidate) bool
}

// Mode is how a method takes a node away.
type Mode string

// Modes.
const (
	// ModeReplaceFirst asks for the node's replacement, waits for it to be
	// a Ready node, then drains and deletes the node.
	ModeReplaceFirst Mode = "ReplaceFirst"
	// ModeSurge is an upgrade's: replacement first within maxSurge, drain
	// first within maxUnavailable once the surge is spent.
	ModeSurge Mode = "Surge"
	// ModeRemove drains and deletes nodes whose pods fit elsewhere
	// (consolidation may launch one cheaper node first).
	ModeRemove Mode = "Remove"
	// ModeRepair reboots a broken node in place where the provider can,
	// then replaces it replacement first if it stays broken; it spends
	// budget but is held only by the pool's circuit breaker.
	ModeRepair Mode = "Repair"
	// ModeReboot drains a node, reboots it in place, and puts it back in
	// service once it is Ready (replaced where the provider cannot reboot).
	ModeReboot Mode = "Reboot"
)

// Methods are every method, in order of precedence.
var Methods = []Method{
	{
		Reason: v1alpha1.ReasonUnhealthy, Mode: ModeRepair,
		Takes: "nodes showing a condition spec.repair names for longer than its toleration, unless the circuit breaker holds",
	},
	{
		Reason: v1alpha1.ReasonUpgrade, Mode: ModeSurge,
		Takes: "nodes whose image differs from the template, in a pool with spec.upgrade",
		owns:  upgradeOwns,
	},
	{
		Reason: v1alpha1.ReasonDrifted, Mode: ModeReplaceFirst,
		Takes: "nodes that differ from the template in a way their replacement would not",
		owns:  func(_ *v1alpha1.NodePool, c Candidate) bool { return Replaceable(c.Differences) },
	},
	{
		Reason: v1alpha1.ReasonExpired, Mode: ModeReplaceFirst,
		Takes: "nodes older than expireAfter",
		owns:  func(_ *v1alpha1.NodePool, c Candidate) bool { return !c.ExpiredAt.IsZero() },
	},
	{
		Reason: v1alpha1.ReasonRebootRequired, Mode: ModeReboot,
		Takes: "nodes whose OS asked for a reboot, in a pool with spec.reboot, inside its reboot windows",
	},
	{
		Reason: v1alpha1.ReasonEmpty, Mode: ModeRemove, Revalidate: true,
		Takes: "nodes with no pod that must move, once consolidateAfter has passed",
	},
	{
		Reason: v1alpha1.ReasonUnderutilized, Mode: ModeRemove, Revalidate: true,
		Takes: "nodes whose pods fit on the others (several at once first, then one, replaced by a cheaper one if that helps)",
	},
}

// Owner returns the reason of the first method that takes the candidate,
// "" when none does.
func Owner(pool *v1alpha1.NodePool, c Candidate) v1alpha1.DisruptionReason {
	for _, m := range Methods {
		if m.owns != nil && m.owns(pool, c) {
			return m.Reason
		}
	}
	return ""
}

// upgradeOwns: a pool that rolls image changes as upgrades (spec.upgrade
// and a template image) upgrades a node whose image drifted, whatever else
// differs; its replacement has the whole template.
func upgradeOwns(pool *v1alpha1.NodePool, c Candidate) bool {
	if pool.Spec.Upgrade == nil || pool.Spec.Template == nil || pool.Spec.Template.Image == "" {
		return false
	}
	return slices.ContainsFunc(c.Differences, func(d Difference) bool { return d.Field == "image" && d.Left == "" })
}
