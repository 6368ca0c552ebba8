package budget

import (
	"errors"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// FuzzBudget reads a budget as a NodePool's owner may write it (nodes,
// schedule, timeZone and duration are strings the API server checks only
// loosely) and weighs it for a pool of total nodes at a time near now. It
// must never panic; Limit rounds a percentage up; a budget Validate accepts
// is one Allowed, Active and NextChange can read, Allowed stays within the
// pool, and NextChange names a later time at which the budget's window has
// opened or closed.
func FuzzBudget(f *testing.F) {
	for _, seed := range []struct {
		nodes, schedule, zone, length string
		total, disrupting             int
		offset                        int64
	}{
		{"10%", "", "", "", 10, 0, 0},
		{"10%", "", "", "", 1 << 58, 1 << 57, 0}, // no pool is this big, but nodes × percent must not wrap
		{"1", "", "", "", 3, 1, 0},
		{"0", "0 9 * * mon-fri", "Europe/Berlin", "8h", 20, 2, 0},
		{"20%", "@daily", "", "1h", 7, 0, 3600},
		{"100%", "0 22 * * *", "America/New_York", "4h", 5, 5, -86400},
		{"3", "30 2 * * *", "America/Sao_Paulo", "90m", 12, 1, 86400 * 150},
		{"50%", "0 * * * *", "", "3h", 9, 3, 0}, // windows overlap: open for good
		{"0%", "0 0 1 1 *", "Australia/Lord_Howe", "1000h", 1 << 40, 0, 0},
		{"1", "0 0 29 2 *", "", "1h", 4, 0, 0}, // fires once in four years
		{"1", "0 0 30 2 *", "", "1h", 4, 0, 0}, // never fires
		{"1", "@every 1h", "", "1h", 4, 0, 0},
		{"1", "CRON_TZ=UTC 0 9 * * *", "", "1h", 4, 0, 0},
		{"1", "0 9 * * *", "Local", "1h", 4, 0, 0},
		{"101%", "", "", "", 4, 0, 0},
		{"-1", "", "", "", 4, 0, 0},
		{"99999999999999999999", "", "", "", 4, 0, 0},
		{"", "", "", "8h", 4, 0, 0},
	} {
		f.Add(seed.nodes, seed.schedule, seed.zone, seed.length, seed.total, seed.disrupting, seed.offset)
	}
	f.Fuzz(func(t *testing.T, nodes, schedule, zone, length string, total, disrupting int, offset int64) {
		b := v1alpha1.Budget{Nodes: nodes}
		if schedule != "" {
			b.Schedule = &schedule
		}
		if zone != "" {
			b.TimeZone = &zone
		}
		if d, err := time.ParseDuration(length); err == nil {
			b.Duration = &metav1.Duration{Duration: d}
		}
		total, disrupting = max(total, 0), max(disrupting, 0)
		// A century either side of now: cron schedules are read in years
		// that have calendars.
		now := noon.Add(time.Duration(offset%(100*365*86400)) * time.Second)

		checkLimit(t, b, total)
		budgets := []v1alpha1.Budget{b}
		verr := Validate(budgets)
		if verr != nil {
			var inv *InvalidError
			if !errors.As(verr, &inv) || inv.Budget != 0 || !slices.Contains([]string{"nodes", "schedule", "timeZone", "duration"}, inv.Field) {
				t.Fatalf("%v: Validate: %#v", b, verr)
			}
		}
		for _, r := range append([]v1alpha1.DisruptionReason{""}, v1alpha1.DisruptionReasons...) {
			a, err := Allowed(budgets, total, disrupting, r, now)
			if err != nil {
				if verr == nil {
					t.Fatalf("%v: Validate accepts it, but Allowed(%d, %d, %q) says %v", b, total, disrupting, r, err)
				}
				continue
			}
			if a.Nodes < 0 || a.Nodes > total || a.Nodes > max(total-disrupting, 0) || a.Budget != nil && a.Nodes > max(a.Limit-disrupting, 0) {
				t.Fatalf("%v: Allowed(%d, %d, %q) = %+v", b, total, disrupting, r, a)
			}
		}
		if verr != nil {
			return
		}
		open, err := Active(b, now)
		if err != nil {
			t.Fatalf("%v: Validate accepts it, but Active says %v", b, err)
		}
		at, ok, err := NextChange(budgets, now)
		switch {
		case err != nil:
			t.Fatalf("%v: Validate accepts it, but NextChange says %v", b, err)
		case !ok:
			if !at.IsZero() {
				t.Fatalf("%v: NextChange(%s) = %s, not ok", b, now, at)
			}
			return
		case !at.After(now):
			t.Fatalf("%v: NextChange(%s) = %s, not after now", b, now, at)
		}
		if then, _ := Active(b, at); then == open {
			t.Fatalf("%v: NextChange(%s) = %s, but the budget is active %t at both", b, now, at, open)
		}
	})
}

// checkLimit holds Limit to its word: a number is itself, a percentage of
// total rounds up and stays within the pool.
func checkLimit(t *testing.T, b v1alpha1.Budget, total int) {
	t.Helper()
	got, err := Limit(b, total)
	if err != nil {
		if got != 0 {
			t.Fatalf("Limit(%q, %d) = %d with %v", b.Nodes, total, got, err)
		}
		return
	}
	digits, percent := strings.CutSuffix(b.Nodes, "%")
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 {
		t.Fatalf("Limit(%q, %d) = %d, but %q is no count", b.Nodes, total, got, digits)
	}
	if !percent {
		if got != n {
			t.Fatalf("Limit(%q, %d) = %d", b.Nodes, total, got)
		}
		return
	}
	// ceil(total×n/100), in numbers that cannot overflow.
	want := new(big.Int).Mul(big.NewInt(int64(total)), big.NewInt(int64(n)))
	want.Add(want, big.NewInt(99)).Quo(want, big.NewInt(100))
	if !want.IsInt64() || int64(got) != want.Int64() || got < 0 || got > total {
		t.Fatalf("Limit(%q, %d) = %d, want %s", b.Nodes, total, got, want)
	}
}
