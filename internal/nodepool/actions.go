package nodepool

import (
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// ForceEvictFor says whether a drain for an event of type t evicts
// unreplicated pods and pods with emptyDir data under the pool's
// maintenance spec m (nil: the defaults).
func ForceEvictFor(m *v1alpha1.MaintenanceSpec, t maintenance.Type) bool {
	policy := v1alpha1.DefaultForceEvict
	if m != nil && m.ForceEvict != "" {
		policy = m.ForceEvict
	}
	switch policy {
	case v1alpha1.ForceEvictAlways:
		return true
	case v1alpha1.ForceEvictNever:
		return false
	}
	return t.NodeGoesAway()
}

// ActionFor returns the action to take on a maintenance event of type t
// under the pool's maintenance spec m: the pool's own choice when it set one,
// otherwise the default. It is the one place the default table lives; m nil
// (the node has no pool) takes the defaults. An unknown type gets
// ActionNone: sluice never drains a node on an event it does not understand.
func ActionFor(m *v1alpha1.MaintenanceSpec, t maintenance.Type) v1alpha1.MaintenanceAction {
	if m != nil {
		if a := actionSet(&m.Actions, t); a != "" {
			return a
		}
	}
	switch t {
	case maintenance.TypeRedeploy, maintenance.TypePreempt, maintenance.TypeTerminate:
		return v1alpha1.ActionDrain
	case maintenance.TypeRebalance:
		return v1alpha1.ActionCordon
	default: // Freeze, Reboot, Maintenance and types sluice does not know.
		return v1alpha1.ActionNone
	}
}

// actionSet returns the action a sets for t, "" when none is.
func actionSet(a *v1alpha1.MaintenanceActions, t maintenance.Type) v1alpha1.MaintenanceAction {
	switch t {
	case maintenance.TypeFreeze:
		return a.Freeze
	case maintenance.TypeReboot:
		return a.Reboot
	case maintenance.TypeRedeploy:
		return a.Redeploy
	case maintenance.TypePreempt:
		return a.Preempt
	case maintenance.TypeTerminate:
		return a.Terminate
	case maintenance.TypeRebalance:
		return a.Rebalance
	case maintenance.TypeMaintenance:
		return a.Maintenance
	default:
		return ""
	}
}
