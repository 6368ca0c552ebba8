package budget

import (
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Active says whether the budget is in force at now. A budget without a
// schedule always is; a scheduled one is from each firing of its schedule,
// read in its time zone, for its duration.
func Active(b v1alpha1.Budget, now time.Time) (bool, error) {
	w, scheduled, err := windowOf(b)
	if err != nil {
		return false, err
	}
	return !scheduled || w.openAt(now), nil
}

// NextChange says when a scheduled budget next opens or closes after now, so
// the caller knows when to weigh the budgets again; ok is false when none
// will: no budget has a schedule, or those that do stay open for good.
func NextChange(budgets []v1alpha1.Budget, now time.Time) (t time.Time, ok bool, err error) {
	for i, b := range budgets {
		w, scheduled, err := windowOf(b)
		if err != nil {
			return time.Time{}, false, at(i, err)
		}
		if !scheduled {
			continue
		}
		if c, changes := w.nextChange(now); changes && (t.IsZero() || c.Before(t)) {
			t = c.In(now.Location())
		}
	}
	return t, !t.IsZero(), nil
}

// Validate judges what the API server cannot: that each budget's nodes and
// schedule parse, that its time zone exists, and that its window opens at
// least once a year. The error is an *InvalidError naming the first budget
// and field at fault.
func Validate(budgets []v1alpha1.Budget) error {
	for i, b := range budgets {
		if _, err := Limit(b, 0); err != nil {
			return at(i, err)
		}
		w, scheduled, err := windowOf(b)
		if err != nil {
			return at(i, err)
		}
		if !scheduled {
			continue
		}
		if err := w.firesYearly(*b.Schedule); err != nil {
			return at(i, err)
		}
	}
	return nil
}

// parser reads five-field cron expressions and macros such as @daily.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// window is a scheduled budget, read.
type window struct {
	schedule cron.Schedule
	zone     *time.Location
	length   time.Duration
}

// windowOf reads the budget's schedule, time zone and duration; scheduled is
// false for a budget without a schedule, which is always active.
func windowOf(b v1alpha1.Budget) (w window, scheduled bool, err error) {
	if b.Schedule == nil {
		if b.Duration != nil {
			return window{}, false, invalid("duration", "a duration needs a schedule saying when the window opens: set schedule, such as \"0 9 * * mon-fri\", or remove duration for a budget always active")
		}
		return window{}, false, nil
	}
	spec := strings.TrimSpace(*b.Schedule)
	switch {
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return window{}, false, invalid("schedule", "%q names a time zone: move it to timeZone and leave five fields in schedule", spec)
	case strings.HasPrefix(spec, "@every"):
		// @every counts from whenever it is asked, not from the clock, so
		// its window would open and close at no particular time.
		return window{}, false, invalid("schedule", "%q repeats from no fixed time: write a cron expression such as \"0 */6 * * *\", or a macro such as @daily", spec)
	}
	w.schedule, err = parser.Parse(spec)
	if err != nil {
		return window{}, false, invalid("schedule", "%q is not a cron expression (%v): write five fields (minute hour day-of-month month day-of-week), such as \"0 9 * * mon-fri\", or a macro such as @daily", spec, err)
	}
	if b.Duration == nil || b.Duration.Duration <= 0 {
		return window{}, false, invalid("duration", "a schedule needs a duration saying how long its window stays open: write one such as 8h")
	}
	w.length = b.Duration.Duration
	w.zone = time.UTC
	if b.TimeZone != nil && *b.TimeZone != "" {
		name := *b.TimeZone
		// Local would read the schedule in whatever zone the controller's
		// machine happens to be in.
		if w.zone, err = time.LoadLocation(name); err != nil || name == "Local" {
			return window{}, false, invalid("timeZone", "%q is not an IANA time zone: write one such as Europe/Berlin, or leave timeZone out for UTC", name)
		}
	}
	return w, true, nil
}

// openAt says whether a window is open at t. The firing that could have
// opened a window still open at t is the first one after t less the
// window's length: a later one opens its window later still.
func (w window) openAt(t time.Time) bool {
	f := w.next(t.Add(-w.length))
	return !f.IsZero() && !f.After(t)
}

// maxSteps bounds how many firings nextChange follows through overlapping
// windows before concluding that the budget stays open for good.
const maxSteps = 10000

// nextChange says when the budget next opens or closes after now.
func (w window) nextChange(now time.Time) (time.Time, bool) {
	if !w.openAt(now) {
		f := w.next(now)
		return f, !f.IsZero()
	}
	// Open: the window closes its length after the last firing, unless the
	// schedule fires again by then and keeps it open.
	f := w.next(now.Add(-w.length))
	for range maxSteps {
		closes := f.Add(w.length)
		n := w.next(f)
		if n.IsZero() || n.After(closes) {
			return closes, true
		}
		f = n
	}
	return time.Time{}, false
}

// firesYearly refuses a schedule that can go more than a year without firing
// (robfig's Next answers zero when it finds nothing within five years).
// Validate reads no clock: it walks one leap-year cycle from a fixed start
// instead, the calendar repeating, to a day's accuracy, after it.
func (w window) firesYearly(spec string) error {
	key := spec + "\x00" + w.zone.String()
	yearly.Lock()
	err, ok := yearly.seen[key]
	yearly.Unlock()
	if ok {
		return err
	}
	err = w.walkYears(spec)
	yearly.Lock()
	defer yearly.Unlock()
	if len(yearly.seen) >= yearlyKept {
		yearly.seen = map[string]error{}
	}
	yearly.seen[key] = err
	return err
}

// yearly keeps firesYearly's answers by schedule and time zone: the walk
// is 1,461 firings, and every pass of every pool validates its budgets.
var yearly = struct {
	sync.Mutex
	seen map[string]error
}{seen: map[string]error{}}

// yearlyKept bounds yearly; past it, it starts again.
const yearlyKept = 4096

// walkYears is firesYearly's walk.
func (w window) walkYears(spec string) error {
	start := time.Date(2024, time.January, 1, 0, 0, 0, 0, w.zone)
	end := start.AddDate(4, 0, 0)
	for t := start; t.Before(end); {
		f := w.next(t)
		if f.IsZero() {
			return invalid("schedule", "%q never fires, no date matching it: check that its day of month exists in its month (February has no 30th)", spec)
		}
		if f.After(t.AddDate(0, 0, 366)) {
			return invalid("schedule", "%q goes more than a year without firing (none from %s to %s): write a schedule that opens its window at least once a year", spec, t.Format(time.DateOnly), f.Format(time.DateOnly))
		}
		t = later(f, t.AddDate(0, 0, 1))
	}
	return nil
}

// next is the schedule's first firing after t, read in the budget's time
// zone; zero when it never fires.
func (w window) next(t time.Time) time.Time {
	return w.schedule.Next(t.In(w.zone))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
