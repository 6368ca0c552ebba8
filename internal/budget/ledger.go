package budget

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Allowance is how many more of a pool's nodes may be disrupted now for one
// reason, and which budget says so.
type Allowance struct {
	// Nodes is how many more nodes may be disrupted now.
	Nodes int
	// Budget is the budget that bound Nodes, nil when no active budget
	// applies to the reason and only the pool's size bounds it.
	Budget *v1alpha1.Budget
	// Limit is the binding budget's nodes resolved against the pool's size,
	// or the pool's size when no budget bound the answer.
	Limit int
}

// InvalidError says which field of which budget is wrong, and what to write
// instead.
type InvalidError struct {
	// Budget is the budget's index in the pool's list; -1 when the budget was
	// judged on its own (Limit, Active).
	Budget int
	// Field is the budget's field at fault, as spelled in the NodePool:
	// nodes, schedule, timeZone or duration.
	Field string
	// Reason says what is wrong and how to mend it.
	Reason string
}

func (e *InvalidError) Error() string {
	if e.Budget < 0 {
		return e.Field + ": " + e.Reason
	}
	return fmt.Sprintf("budgets[%d].%s: %s", e.Budget, e.Field, e.Reason)
}

// Limit resolves a budget's nodes, a number ("3") or a percentage ("20%"),
// against the pool's node count; a percentage rounds up, so 10% of 6 nodes
// is 1, and only 0% of a pool is 0.
func Limit(b v1alpha1.Budget, total int) (int, error) {
	digits, percent := strings.CutSuffix(b.Nodes, "%")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, invalid("nodes", "%q is neither a number of nodes nor a percentage of the pool: write one such as 3 or 20%%", b.Nodes)
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, invalid("nodes", "%q is too large: write a number of nodes such as 3, or 100%% for the whole pool", b.Nodes)
	}
	if !percent {
		return n, nil
	}
	if n > 100 {
		return 0, invalid("nodes", "%q is over 100%%: write a percentage from 0%% to 100%%, such as 20%%", b.Nodes)
	}
	// ceil(total×n/100), in parts that cannot overflow for any total.
	total = max(total, 0)
	return total/100*n + (total%100*n+99)/100, nil
}

// Allowed says how many more of a pool's total nodes may be disrupted now for
// reason r while disrupting of them are out of service (Disrupting), and
// which budget bound the answer. The most restrictive budget that is active
// and applies to r wins; the empty reason, a person deleting a node, is
// bound only by budgets that name no reasons. A pool without budgets has
// v1alpha1.DefaultBudget; when no budget applies, only the pool's size
// bounds the answer. A budget that cannot be read allows nothing.
func Allowed(budgets []v1alpha1.Budget, total, disrupting int, r v1alpha1.DisruptionReason, now time.Time) (Allowance, error) {
	if len(budgets) == 0 {
		budgets = []v1alpha1.Budget{v1alpha1.DefaultBudget}
	}
	total = max(total, 0)
	room := max(total-disrupting, 0)
	a := Allowance{Nodes: room, Limit: total}
	for i, b := range budgets {
		// Every budget is read, not only those for r, so one that cannot be
		// read stops the pool whichever reason asks.
		limit, err := Limit(b, total)
		if err != nil {
			return Allowance{}, at(i, err)
		}
		active, err := Active(b, now)
		if err != nil {
			return Allowance{}, at(i, err)
		}
		if !active || !b.AppliesTo(r) {
			continue
		}
		if a.Budget == nil || limit < a.Limit {
			a.Budget, a.Limit = &b, limit
		}
	}
	if a.Budget != nil {
		a.Nodes = max(min(a.Limit-disrupting, room), 0)
	}
	return a, nil
}

// invalid is an InvalidError about a budget judged on its own.
func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Budget: -1, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// at places err, an InvalidError about a budget judged on its own, at the
// budget's index in the pool's list.
func at(index int, err error) error {
	var e *InvalidError
	if !errors.As(err, &e) {
		return fmt.Errorf("budgets[%d]: %w", index, err)
	}
	placed := *e
	placed.Budget = index
	return &placed
}
