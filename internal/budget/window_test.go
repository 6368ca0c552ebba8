package budget

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("loading time zone %s: %v", name, err)
	}
	return loc
}

func TestActive(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	at := func(day, hour, minute int, loc *time.Location) time.Time {
		return time.Date(2026, time.June, day, hour, minute, 0, 0, loc) // June 1st is a Monday
	}
	office := scheduled("0", "0 9 * * mon-fri", "Europe/Berlin", 8*time.Hour)
	officeUTC := scheduled("0", "0 9 * * mon-fri", "", 8*time.Hour)
	nights := scheduled("0", "0 22 * * *", "", 4*time.Hour)
	newYear := scheduled("0", "0 0 1 1 *", "", 1000*time.Hour) // open until February 11th, 16:00
	hourly := scheduled("0", "0 * * * *", "", 3*time.Hour)     // windows overlap: always open
	for _, tc := range []struct {
		name   string
		budget v1alpha1.Budget
		now    time.Time
		want   bool
	}{
		{name: "no schedule", budget: nodes("1"), now: noon, want: true},
		{name: "office: Monday 10:00 in Berlin", budget: office, now: at(1, 10, 0, berlin), want: true},
		{name: "office: opens at 9:00", budget: office, now: at(1, 9, 0, berlin), want: true},
		{name: "office: not before", budget: office, now: at(1, 8, 59, berlin), want: false},
		{name: "office: open at 16:59", budget: office, now: at(1, 16, 59, berlin), want: true},
		{name: "office: closes at 17:00", budget: office, now: at(1, 17, 0, berlin), want: false},
		{name: "office: Monday 18:00 in Berlin", budget: office, now: at(1, 18, 0, berlin), want: false},
		{name: "office: Friday", budget: office, now: at(5, 10, 0, berlin), want: true},
		{name: "office: Saturday", budget: office, now: at(6, 10, 0, berlin), want: false},
		{name: "office: now in UTC, read in Berlin", budget: office, now: at(1, 7, 30, time.UTC), want: true},
		{name: "office in UTC: not yet", budget: officeUTC, now: at(1, 7, 30, time.UTC), want: false},
		{name: "office in UTC: 16:30 UTC is 18:30 in Berlin", budget: officeUTC, now: at(1, 16, 30, time.UTC), want: true},
		{name: "nights: open at 22:00", budget: nights, now: at(1, 22, 0, time.UTC), want: true},
		{name: "nights: not at 21:59", budget: nights, now: at(1, 21, 59, time.UTC), want: false},
		{name: "nights: open across midnight", budget: nights, now: at(2, 1, 0, time.UTC), want: true},
		{name: "nights: closed at 2:00", budget: nights, now: at(2, 2, 0, time.UTC), want: false},
		{name: "nights: closed at noon", budget: nights, now: noon, want: false},
		{name: "a window opened weeks ago", budget: newYear, now: time.Date(2026, time.February, 5, 0, 0, 0, 0, time.UTC), want: true},
		{name: "and since closed", budget: newYear, now: time.Date(2026, time.February, 11, 16, 0, 0, 0, time.UTC), want: false},
		{name: "overlapping windows", budget: hourly, now: at(1, 12, 34, time.UTC), want: true},
		{name: "@daily", budget: scheduled("0", "@daily", "", time.Hour), now: at(1, 0, 30, time.UTC), want: true},
		{name: "@daily, closed", budget: scheduled("0", "@daily", "", time.Hour), now: at(1, 1, 30, time.UTC), want: false},
		{
			// The clocks go forward in Berlin at 2:00 on 29 March 2026: a
			// window of two hours opened at 1:00 closes at 4:00.
			name:   "a duration is time elapsed, across a clock change",
			budget: scheduled("0", "0 1 * * *", "Europe/Berlin", 2*time.Hour),
			now:    time.Date(2026, time.March, 29, 3, 30, 0, 0, berlin), want: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Active(tc.budget, tc.now)
			if err != nil || got != tc.want {
				t.Errorf("Active(%v, %v) = %t, %v; want %t", tc.budget, tc.now, got, err, tc.want)
			}
		})
	}
}

func TestActiveRefusesUnreadableBudgets(t *testing.T) {
	noDuration := scheduled("0", "@daily", "", time.Hour)
	noDuration.Duration = nil
	noSchedule := nodes("0")
	noSchedule.Duration = &metav1.Duration{Duration: time.Hour}
	for _, tc := range []struct {
		name   string
		budget v1alpha1.Budget
		field  string
	}{
		{name: "bad cron", budget: scheduled("0", "0 25 * * *", "", time.Hour), field: "schedule"},
		{name: "four fields", budget: scheduled("0", "0 9 * *", "", time.Hour), field: "schedule"},
		{name: "unknown zone", budget: scheduled("0", "@daily", "Mars/Olympus", time.Hour), field: "timeZone"},
		{name: "schedule without duration", budget: noDuration, field: "duration"},
		{name: "duration without schedule", budget: noSchedule, field: "duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Active(tc.budget, noon)
			var invalid *InvalidError
			if !errors.As(err, &invalid) || invalid.Field != tc.field || invalid.Budget != -1 {
				t.Errorf("Active = %t, %v; want an InvalidError of %s", got, err, tc.field)
			}
		})
	}
}

func TestNextChange(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	at := func(day, hour, minute int, loc *time.Location) time.Time {
		return time.Date(2026, time.June, day, hour, minute, 0, 0, loc) // June 1st is a Monday
	}
	office := scheduled("0", "0 9 * * mon-fri", "Europe/Berlin", 8*time.Hour)
	nights := scheduled("0", "0 22 * * *", "", 4*time.Hour)
	for _, tc := range []struct {
		name    string
		budgets []v1alpha1.Budget
		now     time.Time
		want    time.Time // zero when nothing changes
	}{
		{name: "no budgets", now: noon},
		{name: "no schedules", budgets: []v1alpha1.Budget{nodes("1"), nodes("10%")}, now: noon},
		{name: "office: opens", budgets: []v1alpha1.Budget{office}, now: at(1, 8, 0, berlin), want: at(1, 9, 0, berlin)},
		{name: "office: closes", budgets: []v1alpha1.Budget{office}, now: at(1, 10, 0, berlin), want: at(1, 17, 0, berlin)},
		{name: "office: at opening, closes", budgets: []v1alpha1.Budget{office}, now: at(1, 9, 0, berlin), want: at(1, 17, 0, berlin)},
		{name: "office: at closing, opens tomorrow", budgets: []v1alpha1.Budget{office}, now: at(1, 17, 0, berlin), want: at(2, 9, 0, berlin)},
		{name: "office: opens on Monday", budgets: []v1alpha1.Budget{office}, now: at(5, 18, 0, berlin), want: at(8, 9, 0, berlin)},
		{name: "nights: closes after midnight", budgets: []v1alpha1.Budget{nights}, now: at(2, 1, 0, time.UTC), want: at(2, 2, 0, time.UTC)},
		{
			name:    "the earliest of two",
			budgets: []v1alpha1.Budget{nights, nodes("3"), office},
			now:     at(1, 12, 0, time.UTC), want: at(1, 17, 0, berlin), // 15:00 UTC, before 22:00 UTC
		},
		{
			name:    "the earliest of two, the other way",
			budgets: []v1alpha1.Budget{office, nights},
			now:     at(1, 20, 0, time.UTC), want: at(1, 22, 0, time.UTC),
		},
		{
			name:    "windows that meet close when the last does",
			budgets: []v1alpha1.Budget{scheduled("0", "*/30 9-10 * * *", "", 30*time.Minute)},
			now:     at(1, 9, 10, time.UTC), want: at(1, 11, 0, time.UTC),
		},
		{
			name:    "windows that overlap for good never close",
			budgets: []v1alpha1.Budget{scheduled("0", "0 * * * *", "", 90*time.Minute)},
			now:     noon,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := NextChange(tc.budgets, tc.now)
			if err != nil || ok != !tc.want.IsZero() || !got.Equal(tc.want) {
				t.Errorf("NextChange = %v, %t, %v; want %v", got, ok, err, tc.want)
			}
			if ok && got.Location() != tc.now.Location() {
				t.Errorf("NextChange answers in %v, asked in %v", got.Location(), tc.now.Location())
			}
		})
	}
}

func TestNextChangeRefusesUnreadableBudgets(t *testing.T) {
	budgets := []v1alpha1.Budget{nodes("1"), scheduled("0", "@daily", "Mars/Olympus", time.Hour)}
	_, ok, err := NextChange(budgets, noon)
	var invalid *InvalidError
	if !errors.As(err, &invalid) || invalid.Budget != 1 || invalid.Field != "timeZone" || ok {
		t.Errorf("NextChange = %t, %v; want an InvalidError of budgets[1].timeZone", ok, err)
	}
}

func TestValidate(t *testing.T) {
	noDuration := scheduled("0", "@daily", "", time.Hour)
	noDuration.Duration = nil
	good := []v1alpha1.Budget{
		nodes("10%"),
		nodes("0", v1alpha1.ReasonDrifted),
		scheduled("0", "0 9 * * mon-fri", "Europe/Berlin", 8*time.Hour),
		scheduled("0", "@weekly", "America/New_York", time.Hour),
		scheduled("0", "0 0 1 1 *", "", time.Hour),    // once a year is enough
		scheduled("0", "0 0 29 2 mon", "", time.Hour), // day of month or of week: every Monday in February too
		scheduled("0", "0 0 31 * *", "", time.Hour),   // the months that have one
	}
	for _, tc := range []struct {
		name   string
		budget v1alpha1.Budget // after the good ones; nothing to add when empty
		field  string          // at fault; empty when all is well
		says   string          // a part of the error
	}{
		{name: "all well"},
		{name: "bad cron", budget: scheduled("0", "61 * * * *", "", time.Hour), field: "schedule", says: `"61 * * * *" is not a cron expression`},
		{name: "four fields", budget: scheduled("0", "0 9 * *", "", time.Hour), field: "schedule", says: `write five fields`},
		{name: "six fields", budget: scheduled("0", "0 0 9 * * *", "", time.Hour), field: "schedule", says: `such as "0 9 * * mon-fri"`},
		{name: "unknown zone", budget: scheduled("0", "@daily", "Mars/Olympus", time.Hour), field: "timeZone", says: `"Mars/Olympus" is not an IANA time zone: write one such as Europe/Berlin`},
		{name: "the machine's zone", budget: scheduled("0", "@daily", "Local", time.Hour), field: "timeZone", says: `"Local" is not an IANA time zone`},
		{name: "never fires", budget: scheduled("0", "0 0 30 2 *", "", time.Hour), field: "schedule", says: `"0 0 30 2 *" never fires`},
		{name: "never fires, in a zone", budget: scheduled("0", "0 0 31 4,6 *", "Asia/Tokyo", time.Hour), field: "schedule", says: "never fires"},
		{name: "fires once in four years", budget: scheduled("0", "0 0 29 2 *", "", time.Hour), field: "schedule", says: "more than a year without firing (none from 2024-02-29 to 2028-02-29)"},
		{name: "a zone in the schedule", budget: scheduled("0", "CRON_TZ=Europe/Berlin 0 9 * * *", "", time.Hour), field: "schedule", says: "move it to timeZone"},
		{name: "@every", budget: scheduled("0", "@every 1h", "", time.Hour), field: "schedule", says: "repeats from no fixed time"},
		{name: "schedule without duration", budget: noDuration, field: "duration", says: "write one such as 8h"},
		{name: "nodes", budget: nodes("150%"), field: "nodes", says: "is over 100%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			budgets := good
			if tc.budget.Nodes != "" {
				budgets = append(good[:len(good):len(good)], tc.budget)
			}
			err := Validate(budgets)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			var invalid *InvalidError
			if !errors.As(err, &invalid) || invalid.Budget != len(good) || invalid.Field != tc.field {
				t.Fatalf("Validate = %v; want an InvalidError of budgets[%d].%s", err, len(good), tc.field)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Validate = %q; want it to say %q", err, tc.says)
			}
		})
	}
}
