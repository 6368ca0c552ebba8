package maintenance_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

func TestHolderKeepsOnlyTheEventsARejectedPartMayBe(t *testing.T) {
	ev := func(ids ...string) []maintenance.Event {
		var out []maintenance.Event
		for _, id := range ids {
			out = append(out, maintenance.Event{ID: id})
		}
		return out
	}
	bad := errors.New("unreadable")
	for _, tc := range []struct {
		name     string
		rejected []error
		want     []string
	}{
		{"nothing rejected: the missing events are over", nil, []string{"C"}},
		{"one named event", []error{maintenance.Reject(`event "A"`, bad, "A")}, []string{"C", "A"}},
		{"a part that may be any event", []error{maintenance.Reject("event #3", bad)}, []string{"C", "A", "spot-1"}},
		{"a prefix", []error{maintenance.RejectPrefix("spot/instance-action", bad, "spot-")}, []string{"C", "spot-1"}},
		{"a plain error may be anything", []error{bad}, []string{"C", "A", "spot-1"}},
		{"another event", []error{maintenance.Reject(`event "Z"`, bad, "Z")}, []string{"C"}},
	} {
		var h maintenance.Holder
		h.Hold(maintenance.Observation{Events: ev("A", "spot-1", "C")})
		got := h.Hold(maintenance.Observation{Events: ev("C"), Rejected: tc.rejected})
		var ids []string
		for _, e := range got.Events {
			ids = append(ids, e.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("%s: kept %v, want %v", tc.name, ids, tc.want)
		}
	}
}

func TestRejectedErrorText(t *testing.T) {
	if got := maintenance.Reject(`event "A"`, errors.New("bad time")).Error(); got != `event "A": bad time` {
		t.Errorf("got %q", got)
	}
	if got := maintenance.Reject("", errors.New("spot instance-action: bad time")).Error(); got != "spot instance-action: bad time" {
		t.Errorf("got %q", got)
	}
	r := maintenance.NewReport(maintenance.SourceAzure, true, nil).WithRejected([]error{errors.New("b"), errors.New("a"), errors.New("b")})
	if !slices.Equal(r.Rejected, []string{"a", "b"}) {
		t.Errorf("report's rejected %v; want sorted, without repeats", r.Rejected)
	}
}
