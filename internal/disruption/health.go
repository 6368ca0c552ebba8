package disruption

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// HealthRecord is the repair's debounced note on a node that has looked
// broken (contract.AnnotationUnhealthy): the clock a flap does not reset.
type HealthRecord struct {
	// Since is when the node was first seen broken: the bad condition's
	// lastTransitionTime the first time sluice saw it.
	Since time.Time `json:"since"`
	// Condition is the bad condition, as Type=Status.
	Condition string `json:"condition"`
	// HealthySince is when the node last looked healthy again; the record
	// goes once that lasted the pool's flapGrace.
	HealthySince *time.Time `json:"healthySince,omitempty"`
}

// HealthRecordOf reads the node's health record; nil when it has none.
func HealthRecordOf(n *corev1.Node) (*HealthRecord, error) {
	raw, ok := n.Annotations[contract.AnnotationUnhealthy]
	if !ok {
		return nil, nil
	}
	var r HealthRecord
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("reading %s on node %s: %w", contract.AnnotationUnhealthy, n.Name, err)
	}
	return &r, nil
}

// String is the record as the annotation holds it.
func (r HealthRecord) String() string {
	b, err := json.Marshal(r)
	if err != nil { // times and strings always marshal
		panic(err)
	}
	return string(b)
}

// Health is what a pool's repair makes of one node at one moment.
type Health struct {
	Node *corev1.Node
	// Bad is the pool's repair condition the node shows now, and the
	// node's own condition; nil when the node looks healthy.
	Bad     *v1alpha1.RepairCondition
	BadSeen *corev1.NodeCondition
	// Record is the record the node should carry now (nil: none), and
	// Changed whether that differs from the one it carries.
	Record  *HealthRecord
	Changed bool
	// Due is when the repair is due: Record.Since plus the bad
	// condition's toleration; zero when the node looks healthy.
	Due time.Time
	// Rebooted is when a repair last rebooted the node since it broke
	// (contract.AnnotationRepairRebooted); nil when none did.
	Rebooted *time.Time
	// Err is an unreadable record (rewritten from what the node shows).
	Err error
}

// Unhealthy says whether the node looks broken now, due or not: what the
// circuit breaker counts.
func (h Health) Unhealthy() bool { return h.Bad != nil }

// DueAt says whether the repair is due at now.
func (h Health) DueAt(now time.Time) bool { return h.Bad != nil && !now.Before(h.Due) }

// Describe says in a few words what is wrong with the node.
func (h Health) Describe() string {
	if h.BadSeen == nil {
		return "healthy"
	}
	s := fmt.Sprintf("%s=%s", h.BadSeen.Type, h.BadSeen.Status)
	if h.BadSeen.Reason != "" {
		s += " (" + h.BadSeen.Reason + ")"
	}
	return s
}

// HealthOf judges the node against the pool's repair conditions at now, and
// moves its debounced record along: a node is broken from the first time it
// was seen so, and a stretch of health shorter than flapGrace does not
// reset that (Karpenter's repair restarts its clock at each flap, and never
// fires on a flapping node).
func HealthOf(spec *v1alpha1.RepairSpec, n *corev1.Node, now time.Time) Health {
	h := Health{Node: n}
	old, err := HealthRecordOf(n)
	h.Err = err
	h.Bad, h.BadSeen = badCondition(spec, n)
	grace := spec.FlapGraceOrDefault()
	var next *HealthRecord
	switch {
	case h.Bad != nil && old == nil:
		next = &HealthRecord{Since: transition(h.BadSeen, now), Condition: conditionString(h.BadSeen)}
	case h.Bad != nil && old.HealthySince != nil && transition(h.BadSeen, now).Sub(*old.HealthySince) >= grace:
		// Healthy for the whole grace (the controller did not look in
		// between): this is a new breakage.
		next = &HealthRecord{Since: transition(h.BadSeen, now), Condition: conditionString(h.BadSeen)}
	case h.Bad != nil:
		r := *old
		r.HealthySince, r.Condition = nil, conditionString(h.BadSeen)
		next = &r
	case old == nil:
	case old.HealthySince == nil:
		r := *old
		at := healthySince(n, old, now)
		r.HealthySince = &at
		if now.Sub(at) < grace {
			next = &r
		}
	case now.Sub(*old.HealthySince) < grace:
		next = old
	}
	h.Record = next
	h.Changed = err != nil || (old == nil) != (next == nil) || old != nil && next != nil && old.String() != next.String()
	if h.Bad != nil {
		h.Due = next.Since.Add(h.Bad.Toleration.Duration)
	}
	if raw, ok := n.Annotations[contract.AnnotationRepairRebooted]; ok && next != nil {
		if at, err := time.Parse(time.RFC3339, raw); err == nil && !at.Before(next.Since) {
			h.Rebooted = &at
		}
	}
	return h
}

// PoolHealth judges the members the repair counts, in their order:
// replacements booting (named in replacements), nodes being deleted and
// nodes down for a reboot their OS asked for are left out, none of them a
// breakage. The controller and `sluice explain` count the breaker from it.
func PoolHealth(spec *v1alpha1.RepairSpec, members []*corev1.Node, replacements map[string]bool, now time.Time) []Health {
	out := make([]Health, 0, len(members))
	for _, n := range members {
		if replacements[n.Name] || n.DeletionTimestamp != nil || rebootingForOS(n) {
			continue
		}
		out = append(out, HealthOf(spec, n, now))
	}
	return out
}

// rebootingForOS says whether the node is being rebooted for its OS (its
// record is RebootRequired's).
func rebootingForOS(n *corev1.Node) bool {
	rec, err := RecordOf(n)
	return err == nil && rec != nil && rec.Reason == v1alpha1.ReasonRebootRequired
}

// badCondition is the first of the pool's repair conditions the node shows.
func badCondition(spec *v1alpha1.RepairSpec, n *corev1.Node) (*v1alpha1.RepairCondition, *corev1.NodeCondition) {
	conds := spec.ConditionsOrDefault()
	for i := range conds {
		for j := range n.Status.Conditions {
			c := &n.Status.Conditions[j]
			if string(c.Type) == conds[i].Type && string(c.Status) == conds[i].Status {
				return &conds[i], c
			}
		}
	}
	return nil, nil
}

// transition is when the condition took its status, now when it does not
// say or says a time to come (a skewed clock).
func transition(c *corev1.NodeCondition, now time.Time) time.Time {
	if c == nil || c.LastTransitionTime.IsZero() || c.LastTransitionTime.After(now) {
		return now
	}
	return c.LastTransitionTime.Time
}

// healthySince is when the node's bad condition last changed, if after the
// record began; now otherwise.
func healthySince(n *corev1.Node, r *HealthRecord, now time.Time) time.Time {
	typ, _, _ := strings.Cut(r.Condition, "=")
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		if string(c.Type) != typ {
			continue
		}
		if t := transition(c, now); t.After(r.Since) {
			return t
		}
	}
	return now
}

func conditionString(c *corev1.NodeCondition) string { return fmt.Sprintf("%s=%s", c.Type, c.Status) }

// LabelZone is the well-known label the breaker counts zones by.
const LabelZone = corev1.LabelTopologyZone

// Halt is why the circuit breaker holds every repair of a pool.
type Halt struct {
	// Scope is "pool", "zone" or "cluster".
	Scope string
	// Zone names the zone when Scope is "zone".
	Zone string
	// Unhealthy of Of are broken; Limit may be.
	Unhealthy, Of, Limit int
}

func (h *Halt) String() string {
	switch h.Scope {
	case "zone":
		return fmt.Sprintf("%d of the pool's %d nodes in zone %s are unhealthy, more than maxUnhealthyPerZone allows (%d): a zone-wide failure that replacing nodes would not mend",
			h.Unhealthy, h.Of, h.Zone, h.Limit)
	case "cluster":
		return fmt.Sprintf("%d of the cluster's %d nodes outside the pool are not Ready too, more than half: the control plane or the network is failing, not the machines", h.Unhealthy, h.Of)
	}
	return fmt.Sprintf("%d of the pool's %d nodes are unhealthy, more than maxUnhealthy allows (%d)", h.Unhealthy, h.Of, h.Limit)
}

// Breaker says whether the pool's repairs are halted: more of its nodes
// unhealthy than maxUnhealthy, or than maxUnhealthyPerZone in one zone, or,
// beyond the pool, more than half (and at least clusterMinNotReady) of the
// cluster's other nodes not Ready (notReady of total): a failure that wide
// is the control plane's or the network's. nil when repairs may go on.
// healths are the pool's members' (HealthOf).
func Breaker(spec *v1alpha1.RepairSpec, healths []Health, notReady, total int) (*Halt, error) {
	if notReady >= clusterMinNotReady && notReady*2 > total {
		return &Halt{Scope: "cluster", Unhealthy: notReady, Of: total}, nil
	}
	poolMax, zoneMax := spec.Limits()
	unhealthy, zones, zoneBad := 0, map[string]int{}, map[string]int{}
	for _, h := range healths {
		z := h.Node.Labels[LabelZone]
		zones[z]++
		if h.Unhealthy() {
			unhealthy++
			zoneBad[z]++
		}
	}
	limit, err := budget.Limit(v1alpha1.Budget{Nodes: poolMax}, len(healths))
	if err != nil {
		return nil, fmt.Errorf("spec.repair.maxUnhealthy: %w", err)
	}
	if unhealthy > limit {
		return &Halt{Scope: "pool", Unhealthy: unhealthy, Of: len(healths), Limit: limit}, nil
	}
	names := make([]string, 0, len(zones))
	for z := range zones {
		if z != "" {
			names = append(names, z)
		}
	}
	sort.Strings(names)
	for _, z := range names {
		limit, err := budget.Limit(v1alpha1.Budget{Nodes: zoneMax}, zones[z])
		if err != nil {
			return nil, fmt.Errorf("spec.repair.maxUnhealthyPerZone: %w", err)
		}
		if zoneBad[z] > limit {
			return &Halt{Scope: "zone", Zone: z, Unhealthy: zoneBad[z], Of: zones[z], Limit: limit}, nil
		}
	}
	return nil, nil
}

// clusterMinNotReady is the fewest not-Ready nodes outside a pool that can
// say the cluster, not the pool, is failing: one or two of a handful are
// just broken machines.
const clusterMinNotReady = 3

// NextStep is the rung of the pool's repair ladder a due node takes now:
// Reboot when the ladder has it, the provider can, and no reboot was tried
// since the node broke; Replace otherwise (or "" when the ladder has
// neither left).
func NextStep(spec *v1alpha1.RepairSpec, h Health, canReboot bool) v1alpha1.RepairStep {
	steps := spec.StepsOrDefault()
	rebooted := h.Rebooted != nil
	if canReboot && !rebooted && slices.Contains(steps, v1alpha1.RepairReboot) {
		return v1alpha1.RepairReboot
	}
	if slices.Contains(steps, v1alpha1.RepairReplace) {
		return v1alpha1.RepairReplace
	}
	return ""
}
