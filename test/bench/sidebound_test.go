package bench

import (
	"slices"
	"testing"
	"time"
)

// The side-by-side's lower bound counts the rounds a 10 % budget of a
// shrinking pool allows (rounded up: 5, 5, 4, 4, 4, 3, 3, 3, 2, 2 from 50
// to 15), and groups drains into rounds by overlap.
func TestSideBound(t *testing.T) {
	for _, c := range []struct{ start, end, pct, want int }{
		{50, 15, 10, 10}, {50, 50, 10, 0}, {50, 45, 10, 1}, {50, 44, 10, 2}, {10, 1, 100, 1},
	} {
		if got := roundsAllowed(c.start, c.end, c.pct); got != c.want {
			t.Errorf("roundsAllowed(%d, %d, %d) = %d, want %d", c.start, c.end, c.pct, got, c.want)
		}
	}
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	w := &nodeChanges{
		deleting: map[string]time.Time{"a": at(0), "b": at(1), "c": at(20), "d": at(20.5)},
		gone:     map[string]time.Time{"a": at(3), "b": at(6), "c": at(21), "d": at(24), "e": at(40)},
	}
	if got, want := w.roundDrains(), []time.Duration{5 * time.Second, 3500 * time.Millisecond, 0}; !slices.Equal(got, want) {
		t.Fatalf("roundDrains() = %v, want %v (a and b overlap, c and d overlap; e went without a drain)", got, want)
	}
}
