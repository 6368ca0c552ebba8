package audit

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// The auditor's own reading of docs/health.md.
const (
	reasonUnhealthy      = "Unhealthy"
	reasonRebootRequired = "RebootRequired"
	phaseRebooting       = "Rebooting"
	ownerReboot          = "reboot"
	labelZone            = "topology.kubernetes.io/zone"
	defaultMaxUnhealthy  = "20%"
)

// defaultRepairConditions are the conditions docs/health.md says a pool's
// repair watches when it names none.
var defaultRepairConditions = [][2]string{{"Ready", "False"}, {"Ready", "Unknown"}, {"KernelDeadlock", "True"}, {"ReadonlyFilesystem", "True"}}

// healthRecordAppeared judges a repair's or a reboot's start.
func (a *Auditor) healthRecordAppeared(n *corev1.Node, rec *record) {
	pool := a.poolOf(n)
	if pool == nil {
		return
	}
	switch rec.Reason {
	case reasonUnhealthy:
		if pool.Spec.Repair != nil {
			a.checkBreaker(n, pool)
		}
	case reasonRebootRequired:
		if pool.Spec.Reboot != nil {
			a.checkRebootHeld(n, pool)
		}
	}
}

// checkBreaker counts the pool's unhealthy members, and each zone's, when a
// repair starts.
func (a *Auditor) checkBreaker(n *corev1.Node, pool *v1alpha1.NodePool) {
	spec := pool.Spec.Repair
	conds := defaultRepairConditions
	if len(spec.Conditions) > 0 {
		conds = nil
		for _, c := range spec.Conditions {
			conds = append(conds, [2]string{c.Type, c.Status})
		}
	}
	poolMax, zoneMax := spec.MaxUnhealthy, spec.MaxUnhealthyPerZone
	if poolMax == "" {
		poolMax = defaultMaxUnhealthy
	}
	if zoneMax == "" {
		zoneMax = defaultMaxUnhealthy
	}
	size, bad := 0, 0
	zones, zoneBad := map[string]int{}, map[string]int{}
	var names []string
	for _, st := range a.nodes {
		m := st.node
		if st.goneRV != 0 || m == nil || m.DeletionTimestamp != nil || a.poolOf(m) != pool {
			continue
		}
		size++
		z := m.Labels[labelZone]
		zones[z]++
		if unhealthy(m, conds) {
			bad++
			zoneBad[z]++
			names = append(names, m.Name)
		}
	}
	limit, err := nodesOf(poolMax, size)
	if err != nil {
		return
	}
	if bad > limit {
		a.violate(RepairBreaker, "pool %s: node %s repaired with %d of %d nodes unhealthy (%s); maxUnhealthy %s allows %d",
			pool.Name, n.Name, bad, size, strings.Join(names, ","), poolMax, limit)
		return
	}
	for z, count := range zones {
		zl, err := nodesOf(zoneMax, count)
		if z == "" || err != nil {
			continue
		}
		if zoneBad[z] > zl {
			a.violate(RepairBreaker, "pool %s: node %s repaired with %d of zone %s's %d nodes unhealthy; maxUnhealthyPerZone %s allows %d",
				pool.Name, n.Name, zoneBad[z], z, count, zoneMax, zl)
			return
		}
	}
	a.pass(RepairBreaker)
}

func unhealthy(n *corev1.Node, conds [][2]string) bool {
	for _, c := range n.Status.Conditions {
		for _, want := range conds {
			if string(c.Type) == want[0] && string(c.Status) == want[1] {
				return true
			}
		}
	}
	return false
}

// checkRebootHeld: a reboot starts inside one of the pool's windows (when it
// has any) and never with a blocking pod on the node.
func (a *Auditor) checkRebootHeld(n *corev1.Node, pool *v1alpha1.NodePool) {
	spec := pool.Spec.Reboot
	now := a.clock.Now()
	if len(spec.Windows) > 0 {
		open := false
		for _, w := range spec.Windows {
			schedule, d := w.Schedule, w.Duration
			in, err := inForce(v1alpha1.Budget{Schedule: &schedule, Duration: &d, TimeZone: w.TimeZone}, now)
			if err != nil {
				return // unreadable: not judged
			}
			open = open || in
		}
		if !open {
			a.violate(RebootHeld, "node %s of pool %s was marked for its reboot outside every reboot window", n.Name, pool.Name)
			return
		}
	}
	for _, ps := range a.pods {
		p := ps.pod
		if p.Spec.NodeName != n.Name || p.DeletionTimestamp != nil || ps.goneRV != 0 {
			continue
		}
		for _, s := range spec.BlockingPodSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&s)
			if err != nil {
				continue
			}
			if sel.Matches(labels.Set(p.Labels)) {
				a.violate(RebootHeld, "node %s of pool %s was marked for its reboot with blocking pod %s/%s on it", n.Name, pool.Name, p.Namespace, p.Name)
				return
			}
		}
	}
	a.pass(RebootHeld)
}

// rebootEnded: a reboot's record goes once the node is back; the reboot's
// own cordon must go with it.
func (a *Auditor) rebootEnded(n *corev1.Node, old *record) {
	if old.Phase != phaseRebooting || n.DeletionTimestamp != nil {
		return
	}
	if n.Spec.Unschedulable && n.Annotations[annotationCordonedBy] == ownerReboot {
		a.violate(RebootUncordon, "node %s came back from its reboot (%s) still cordoned by the reboot", n.Name, old.Reason)
		return
	}
	a.pass(RebootUncordon)
}
