package budget

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// noon is a Monday at noon, UTC.
var noon = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

func nodes(n string, reasons ...v1alpha1.DisruptionReason) v1alpha1.Budget {
	return v1alpha1.Budget{Nodes: n, Reasons: reasons}
}

// scheduled is a budget of n nodes whose window opens at schedule, read in
// zone (UTC when empty), for length.
func scheduled(n, schedule, zone string, length time.Duration) v1alpha1.Budget {
	b := v1alpha1.Budget{Nodes: n, Schedule: &schedule, Duration: &metav1.Duration{Duration: length}}
	if zone != "" {
		b.TimeZone = &zone
	}
	return b
}

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		nodes string
		total int
		want  int
		err   string // a part of the error; empty when none is expected
	}{
		{nodes: "3", total: 10, want: 3},
		{nodes: "3", total: 2, want: 3},
		{nodes: "0", total: 10, want: 0},
		{nodes: "10%", total: 6, want: 1},
		{nodes: "10%", total: 20, want: 2},
		{nodes: "10%", total: 21, want: 3},
		{nodes: "50%", total: 5, want: 3},
		{nodes: "0%", total: 6, want: 0},
		{nodes: "100%", total: 7, want: 7},
		{nodes: "20%", total: 0, want: 0},
		{nodes: "20%", total: -4, want: 0},
		{nodes: "70%", total: 1 << 58, want: 201761263306198221}, // total×70 would wrap
		{nodes: "100%", total: math.MaxInt, want: math.MaxInt},
		{nodes: "150%", err: `nodes: "150%" is over 100%: write a percentage from 0% to 100%`},
		{nodes: "", err: "write one such as 3 or 20%"},
		{nodes: "-1", err: `"-1" is neither`},
		{nodes: "+3", err: `"+3" is neither`},
		{nodes: "2.5%", err: `"2.5%" is neither`},
		{nodes: " 3", err: `" 3" is neither`},
		{nodes: "%", err: `"%" is neither`},
		{nodes: "3%%", err: `"3%%" is neither`},
		{nodes: "99999999999999999999", err: "is too large: write a number of nodes"},
	} {
		got, err := Limit(nodes(tc.nodes), tc.total)
		if tc.err != "" {
			var invalid *InvalidError
			if !errors.As(err, &invalid) || invalid.Field != "nodes" || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Limit(%q) = %d, %v; want an InvalidError of nodes saying %q", tc.nodes, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Limit(%q, %d) = %d, %v; want %d", tc.nodes, tc.total, got, err, tc.want)
		}
	}
}

func TestAllowed(t *testing.T) {
	weekdays := scheduled("0", "0 9 * * mon-fri", "", 8*time.Hour) // open at noon on Monday
	nights := scheduled("0", "0 22 * * *", "", 4*time.Hour)        // closed at noon
	for _, tc := range []struct {
		name        string
		budgets     []v1alpha1.Budget
		total, busy int
		reason      v1alpha1.DisruptionReason
		want        int
		binding     int // index of the binding budget; -1 for none, -2 for the default
		limit       int
	}{
		{name: "no budgets: the default 10%", total: 20, want: 2, binding: -2, limit: 2},
		{name: "the default less those disrupting", total: 20, busy: 1, want: 1, binding: -2, limit: 2},
		{name: "the default rounds up", total: 6, want: 1, binding: -2, limit: 1},
		{name: "empty list: the default", budgets: []v1alpha1.Budget{}, total: 30, want: 3, binding: -2, limit: 3},
		{name: "a number", budgets: []v1alpha1.Budget{nodes("3")}, total: 10, busy: 1, want: 2, binding: 0, limit: 3},
		{name: "more disrupting than allowed floors at 0", budgets: []v1alpha1.Budget{nodes("3")}, total: 10, busy: 5, want: 0, binding: 0, limit: 3},
		{name: "zero blocks", budgets: []v1alpha1.Budget{nodes("0")}, total: 10, reason: v1alpha1.ReasonDrifted, want: 0, binding: 0, limit: 0},
		{name: "0% blocks", budgets: []v1alpha1.Budget{nodes("0%")}, total: 10, want: 0, binding: 0, limit: 0},
		{name: "the most restrictive wins", budgets: []v1alpha1.Budget{nodes("50%"), nodes("2"), nodes("4")}, total: 10, want: 2, binding: 1, limit: 2},
		{name: "the first of equals binds", budgets: []v1alpha1.Budget{nodes("2"), nodes("20%")}, total: 10, want: 2, binding: 0, limit: 2},
		{name: "never more than the pool's nodes", budgets: []v1alpha1.Budget{nodes("100")}, total: 5, busy: 1, want: 4, binding: 0, limit: 100},
		{
			name:    "a budget for another reason does not bind",
			budgets: []v1alpha1.Budget{nodes("0", v1alpha1.ReasonDrifted)}, total: 10, busy: 1,
			reason: v1alpha1.ReasonExpired, want: 9, binding: -1, limit: 10,
		},
		{
			name:    "a budget for the reason binds",
			budgets: []v1alpha1.Budget{nodes("0", v1alpha1.ReasonDrifted, v1alpha1.ReasonExpired)}, total: 10,
			reason: v1alpha1.ReasonExpired, want: 0, binding: 0, limit: 0,
		},
		{
			name:    "a reason-less budget binds every reason",
			budgets: []v1alpha1.Budget{nodes("5", v1alpha1.ReasonDrifted), nodes("1")}, total: 10,
			reason: v1alpha1.ReasonDrifted, want: 1, binding: 1, limit: 1,
		},
		{
			name:    "a person's deletion: only reason-less budgets bind",
			budgets: []v1alpha1.Budget{nodes("0", v1alpha1.ReasonDrifted), nodes("3")}, total: 10,
			reason: "", want: 3, binding: 1, limit: 3,
		},
		{
			name:    "a person's deletion: no reason-less budget, nothing binds",
			budgets: []v1alpha1.Budget{nodes("0", v1alpha1.ReasonDrifted, v1alpha1.ReasonEmpty)}, total: 10, busy: 2,
			reason: "", want: 8, binding: -1, limit: 10,
		},
		{name: "an open window binds", budgets: []v1alpha1.Budget{nodes("5"), weekdays}, total: 10, want: 0, binding: 1, limit: 0},
		{name: "a closed window does not", budgets: []v1alpha1.Budget{nodes("5"), nights}, total: 10, want: 5, binding: 0, limit: 5},
		{name: "only a closed window: nothing binds", budgets: []v1alpha1.Budget{nights}, total: 10, busy: 3, want: 7, binding: -1, limit: 10},
		{name: "an empty pool", budgets: []v1alpha1.Budget{nodes("3")}, total: 0, want: 0, binding: 0, limit: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Allowed(tc.budgets, tc.total, tc.busy, tc.reason, noon)
			if err != nil {
				t.Fatal(err)
			}
			var binding *v1alpha1.Budget
			switch {
			case tc.binding == -2:
				binding = &v1alpha1.DefaultBudget
			case tc.binding >= 0:
				binding = &tc.budgets[tc.binding]
			}
			if a.Nodes != tc.want || a.Limit != tc.limit || !reflect.DeepEqual(a.Budget, binding) {
				t.Errorf("Allowed = {%d %v %d}, want {%d %v %d}", a.Nodes, a.Budget, a.Limit, tc.want, binding, tc.limit)
			}
		})
	}
}

func TestAllowedRefusesUnreadableBudgets(t *testing.T) {
	zone := "Mars/Olympus"
	badZone := scheduled("1", "@daily", zone, time.Hour)
	for _, tc := range []struct {
		name    string
		budgets []v1alpha1.Budget
		field   string
	}{
		{name: "nodes", budgets: []v1alpha1.Budget{nodes("3"), nodes("150%")}, field: "nodes"},
		{name: "time zone", budgets: []v1alpha1.Budget{nodes("3"), badZone}, field: "timeZone"},
		{name: "a budget for another reason", budgets: []v1alpha1.Budget{nodes("3"), nodes("x", v1alpha1.ReasonEmpty)}, field: "nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Allowed(tc.budgets, 10, 0, v1alpha1.ReasonDrifted, noon)
			var invalid *InvalidError
			if !errors.As(err, &invalid) || invalid.Budget != 1 || invalid.Field != tc.field {
				t.Fatalf("Allowed = %+v, %v; want an InvalidError of budgets[1].%s", a, err, tc.field)
			}
			if a.Nodes != 0 {
				t.Errorf("Allowed lets %d nodes go with an unreadable budget", a.Nodes)
			}
			if want := "budgets[1]." + tc.field + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

func TestAllowedKeepsTheDefault(t *testing.T) {
	saved := v1alpha1.DefaultBudget
	t.Cleanup(func() { v1alpha1.DefaultBudget = saved })
	a, err := Allowed(nil, 10, 0, v1alpha1.ReasonEmpty, noon)
	if err != nil {
		t.Fatal(err)
	}
	a.Budget.Nodes = "100%"
	if v1alpha1.DefaultBudget.Nodes != "10%" {
		t.Errorf("changing the answer's budget changed DefaultBudget to %q", v1alpha1.DefaultBudget.Nodes)
	}
}
