package maintenance

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// An event missing from the answers stays until enough answers, spanning
// enough time, have gone without it; one that comes back starts over; a new
// one is never held back.
func TestEndConfirmerKeepsAnEventUntilItsEndIsConfirmed(t *testing.T) {
	type step struct {
		after  time.Duration // since the previous answer
		listed string        // the events the answer lists, by ID
		want   string        // the events confirmed
		kept   string        // of those, the ones the answer lacked
	}
	for _, tc := range []struct {
		name  string
		rule  EndConfirmation
		seed  string
		steps []step
	}{
		{"ends after two answers and ten seconds", DefaultEndConfirmation, "", []step{
			{0, "A", "A", ""},
			{time.Second, "", "A", "A"},
			{5 * time.Second, "", "A", "A"},
			{5 * time.Second, "", "", ""}, // ten seconds since the first answer without it
			{time.Second, "", "", ""},
		}},
		{"a flap starts over", DefaultEndConfirmation, "", []step{
			{0, "A", "A", ""},
			{time.Second, "", "A", "A"},
			{8 * time.Second, "", "A", "A"},
			{time.Second, "A", "A", ""}, // back after nine seconds
			{time.Second, "", "A", "A"},
			{9 * time.Second, "", "A", "A"},
			{time.Second, "", "", ""},
		}},
		{"one answer without it is not enough, however late", DefaultEndConfirmation, "", []step{
			{0, "A", "A", ""},
			{time.Hour, "", "A", "A"},
			{9 * time.Second, "", "A", "A"},
			{time.Second, "", "", ""},
		}},
		{"answers alone are not enough", DefaultEndConfirmation, "", []step{
			{0, "A", "A", ""},
			{time.Second, "", "A", "A"}, {time.Second, "", "A", "A"}, {time.Second, "", "A", "A"},
			{time.Second, "", "A", "A"}, {time.Second, "", "A", "A"}, {time.Second, "", "A", "A"},
			{time.Second, "", "A", "A"}, {time.Second, "", "A", "A"}, {time.Second, "", "A", "A"},
			{time.Second, "", "A", "A"},
			{time.Second, "", "", ""},
		}},
		{"a new event passes at once, beside one kept", DefaultEndConfirmation, "", []step{
			{0, "A", "A", ""},
			{time.Second, "P", "A P", "A"},
			{10 * time.Second, "P", "P", ""},
		}},
		{"one answer, no wait: the end is at once", EndConfirmation{Answers: 1}, "", []step{
			{0, "A", "A", ""},
			{0, "", "", ""},
		}},
		{"a seeded event ends like any other", DefaultEndConfirmation, "A", []step{
			{0, "", "A", "A"},
			{10 * time.Second, "", "", ""},
		}},
		{"a seeded event the answer lists is as read", DefaultEndConfirmation, "A", []step{
			{0, "A", "A", ""},
			{time.Second, "", "A", "A"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
			c := NewEndConfirmer(clk, tc.rule)
			c.Seed(events(tc.seed, StatusScheduled))
			for i, s := range tc.steps {
				clk.Step(s.after)
				obs, kept := c.Confirm(Observation{Events: events(s.listed, StatusStarted)})
				if got := ids(obs.Events); got != s.want || strings.Join(kept, " ") != s.kept {
					t.Fatalf("answer %d listing %q: events %q, kept %q; want %q, kept %q", i+1, s.listed, got, kept, s.want, s.kept)
				}
			}
		})
	}
}

// A kept event is the one last read; the answer's own events are as read.
func TestEndConfirmerKeepsTheEventAsLastRead(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	c := NewEndConfirmer(clk, DefaultEndConfirmation)
	c.Seed(events("A", StatusScheduled))
	c.Confirm(Observation{Events: events("A", StatusStarted)})
	obs, _ := c.Confirm(Observation{Rejected: []error{Reject("event #0", errors.New("not JSON"))}})
	if len(obs.Events) != 1 || obs.Events[0].Status != StatusStarted || len(obs.Rejected) != 1 {
		t.Errorf("kept %+v; want A as last read (Started), with the answer's rejected part", obs)
	}
}

func TestEndConfirmationValidate(t *testing.T) {
	for _, tc := range []struct {
		c  EndConfirmation
		ok bool
	}{
		{DefaultEndConfirmation, true},
		{EndConfirmation{Answers: 1}, true},
		{EndConfirmation{}, false},
		{EndConfirmation{Answers: 2, For: -time.Second}, false},
	} {
		if err := tc.c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.c, err)
		}
	}
}

// events are one event per space-separated ID.
func events(list string, status Status) []Event {
	var out []Event
	for _, id := range strings.Fields(list) {
		out = append(out, Event{ID: id, Source: SourceAzure, Type: TypePreempt, Status: status})
	}
	return out
}

func ids(events []Event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.ID)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// An answer with an unreadable part ends nothing, however long it lasts:
// the event it lacks may be in the part that could not be read.
func TestEndConfirmerCountsNoAnswerWithAnUnreadablePart(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))
	c := NewEndConfirmer(clk, DefaultEndConfirmation)
	a := Event{ID: "A", Type: TypePreempt, Status: StatusStarted}
	c.Confirm(Observation{Events: []Event{a}})
	garbled := Observation{Rejected: []error{errors.New(`instance/preempted: "TR" is not FALSE or TRUE`)}}
	for range 5 {
		clk.SetTime(clk.Now().Add(10 * time.Second))
		got, kept := c.Confirm(garbled)
		if len(got.Events) != 1 || got.Events[0].ID != "A" || !slices.Equal(kept, []string{"A"}) {
			t.Fatalf("after an answer with an unreadable part: events %v, kept %v; want A kept", got.Events, kept)
		}
	}
	// Readable answers without it count from here, and an answer that
	// could not be read at all starts the count over.
	clk.SetTime(clk.Now().Add(time.Second))
	if got, _ := c.Confirm(Observation{}); len(got.Events) != 1 {
		t.Fatalf("the first readable answer without A ended it")
	}
	clk.SetTime(clk.Now().Add(10 * time.Second))
	c.Interrupt()
	clk.SetTime(clk.Now().Add(time.Second))
	if got, _ := c.Confirm(Observation{}); len(got.Events) != 1 {
		t.Fatalf("two readable answers without A, with a failed one between, ended it")
	}
	clk.SetTime(clk.Now().Add(10 * time.Second))
	if got, _ := c.Confirm(Observation{}); len(got.Events) != 0 {
		t.Fatalf("two readable answers ten seconds apart without A did not end it: %v", got.Events)
	}
}
