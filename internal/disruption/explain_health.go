package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Verdicts of a node a repair or a reboot concerns.
const (
	// VerdictUnhealthy: broken, within its toleration.
	VerdictUnhealthy VerdictCode = "Unhealthy"
	// VerdictRepairDue: broken past its toleration; repaired at the
	// controller's next pass (its next step named).
	VerdictRepairDue VerdictCode = "RepairDue"
	// VerdictRepairHalted: broken, but the pool's circuit breaker holds
	// every repair.
	VerdictRepairHalted VerdictCode = "RepairHalted"
	// VerdictBeingRepaired: on the repair's ladder, or rebooting.
	VerdictBeingRepaired VerdictCode = "BeingRepaired"
	// VerdictRebootPending: its OS asked for a reboot; waits for what the
	// message names.
	VerdictRebootPending VerdictCode = "RebootPending"
)

// HealthFacts are what the pool's repair makes of the node.
type HealthFacts struct {
	// Unhealthy: a condition spec.repair names holds now.
	Unhealthy bool   `json:"unhealthy"`
	Condition string `json:"condition,omitempty"`
	// Since is when the node was first seen broken (the debounced clock),
	// Due when the repair starts.
	Since *time.Time `json:"since,omitempty"`
	Due   *time.Time `json:"due,omitempty"`
	// NextStep is the ladder's next rung for this node.
	NextStep v1alpha1.RepairStep `json:"nextStep,omitempty"`
	// Halted says why the breaker holds the pool's repairs.
	Halted string `json:"halted,omitempty"`
}

// RebootFacts say that the node's OS asked for a reboot, and since when.
type RebootFacts struct {
	Since time.Time `json:"since"`
}

// explainHealth fills the health and reboot facts of a node of a pool.
func (e *Explanation) explainHealth(pool *v1alpha1.NodePool, node *corev1.Node, members []*corev1.Node, now time.Time) {
	if raw, ok := node.Annotations[contract.AnnotationRebootRequired]; ok {
		since, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			since = now
		}
		e.Reboot = &RebootFacts{Since: since}
	}
	spec := pool.Spec.Repair
	if spec == nil {
		return
	}
	h := HealthOf(spec, node, now)
	f := &HealthFacts{Unhealthy: h.Unhealthy()}
	if h.Unhealthy() {
		since, due := h.Record.Since, h.Due
		f.Condition, f.Since, f.Due = h.Describe(), &since, &due
		// The provider's abilities are the controller's to know; explain
		// names the ladder's step as a provider that reboots would take it.
		f.NextStep = NextStep(spec, h, true)
		// The cluster-wide scope needs every node, which explain does
		// not read: only the pool's and its zones' limits are weighed.
		healths := PoolHealth(spec, members, Replacements(members), now)
		if halt, err := Breaker(spec, healths, 0, 0); err == nil && halt != nil {
			f.Halted = halt.String()
		}
	}
	e.Health = f
}

// healthVerdict is the verdict on a node the repair or a reboot concerns;
// ok is false for any other.
func (e *Explanation) healthVerdict(pool *v1alpha1.NodePool, now time.Time) (Verdict, bool) {
	if h := e.Health; h != nil && h.Unhealthy {
		switch {
		case h.Halted != "":
			return Verdict{VerdictRepairHalted, fmt.Sprintf("broken (%s since %s) but not repaired: the pool's circuit breaker holds every repair: %s",
				h.Condition, when(*h.Since, now), h.Halted)}, true
		case now.Before(*h.Due) && e.Candidate != "":
			return Verdict{}, false // replaced for its candidacy first, unless the repair comes due
		case now.Before(*h.Due):
			return Verdict{VerdictUnhealthy, fmt.Sprintf("broken (%s since %s; a flap shorter than flapGrace does not reset that): repaired at %s unless it is healthy again by then",
				h.Condition, when(*h.Since, now), when(*h.Due, now))}, true
		case PoolPaused(pool):
			return Verdict{VerdictPaused, fmt.Sprintf("broken (%s since %s), past its toleration, but the pool is paused: its repair waits", h.Condition, when(*h.Since, now))}, true
		}
		msg := fmt.Sprintf("broken (%s since %s), past its toleration: repaired at the controller's next pass, %s",
			h.Condition, when(*h.Since, now), stepClause(h.NextStep))
		if e.Protection != nil {
			msg += "; " + e.Protection.Message + " does not hold a repair: the node is broken"
		}
		return Verdict{VerdictRepairDue, msg}, true
	}
	if e.Reboot == nil || pool.Spec.Reboot == nil {
		return Verdict{}, false
	}
	waiting := fmt.Sprintf("its OS asked for a reboot at %s", when(e.Reboot.Since, now))
	if e.Protection != nil {
		return Verdict{VerdictRebootPending, waiting + "; held: " + e.Protection.Message}, true
	}
	if open, at, err := RebootWindowOpen(pool.Spec.Reboot, now); err != nil {
		return Verdict{VerdictRebootPending, waiting + "; the pool's reboot windows cannot be read: " + err.Error()}, true
	} else if !open {
		msg := waiting + "; no reboot window is open"
		if !at.IsZero() {
			msg += ", the next opens at " + when(at, now)
		}
		return Verdict{VerdictRebootPending, msg}, true
	}
	b := e.Budget
	if b == nil || b.Reason != v1alpha1.ReasonRebootRequired {
		return Verdict{VerdictRebootPending, waiting + "; drained and rebooted at the controller's next pass when the budget for RebootRequired allows (blocking pods and Prometheus alerts, when the pool sets them, are weighed then)"}, true
	}
	if b.Allowed < 1 {
		return Verdict{VerdictRebootPending, fmt.Sprintf("%s; waits for the budget: %s (%s)", waiting, b.allowedNow(), e.budgetClause())}, true
	}
	return Verdict{VerdictRebootPending, fmt.Sprintf("%s; drained and rebooted at the controller's next pass: %s (blocking pods and Prometheus alerts, when the pool sets them, are weighed then)",
		waiting, b.allowedNow())}, true
}

func stepClause(s v1alpha1.RepairStep) string {
	switch s {
	case v1alpha1.RepairReboot:
		return "first by a reboot in place (drained first while its kubelet answers; replaced if the reboot does not mend it within rebootTimeout, or where the provider cannot reboot)"
	case v1alpha1.RepairReplace:
		return "by a replacement (made first; the node is then drained under its pods' budgets and deleted)"
	}
	return "but the pool's repair ladder has no step left for it"
}

// RebootWindowOpen says whether a reboot may start now (a pool without
// windows: always) and, when not, when the next window opens (zero when
// none will). The windows are read as scheduled budgets, so one cron
// reading (internal/budget) serves both.
func RebootWindowOpen(spec *v1alpha1.RebootSpec, now time.Time) (bool, time.Time, error) {
	if len(spec.Windows) == 0 {
		return true, time.Time{}, nil
	}
	windows := spec.WindowBudgets()
	for i := range windows {
		open, err := budget.Active(windows[i], now)
		if err != nil {
			return false, time.Time{}, fmt.Errorf("spec.reboot.windows[%d]: %w", i, err)
		}
		if open {
			return true, time.Time{}, nil
		}
	}
	at, ok, err := budget.NextChange(windows, now)
	if err != nil || !ok {
		return false, time.Time{}, err
	}
	return false, at, nil
}

// rebooting says where a node on the reboot's steps stands.
func (e *Explanation) rebooting(pool *v1alpha1.NodePool, now time.Time) string {
	r := e.Record
	what := "being rebooted for its OS"
	timeout := pool.Spec.Reboot.TimeoutOrDefault()
	if r.Reason == v1alpha1.ReasonUnhealthy {
		what, timeout = "being repaired", pool.Spec.Repair.RebootTimeoutOrDefault()
	}
	switch {
	case r.Phase == PhaseDraining:
		return fmt.Sprintf("%s (%s): draining since %s, then rebooted in place", what, r.Reason, when(r.Since, now))
	case r.RebootedAt != nil:
		return fmt.Sprintf("%s (%s): rebooted in place %s; back in service once Ready on a new boot with nothing wrong left, else replaced at %s",
			what, r.Reason, when(*r.RebootedAt, now), when(r.RebootedAt.Add(timeout), now))
	}
	return fmt.Sprintf("%s (%s, phase %s)", what, r.Reason, r.Phase)
}
