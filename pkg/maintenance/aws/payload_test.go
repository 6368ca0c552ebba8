package aws

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Answers shaped as AWS documents them (Amazon EC2 User Guide: "Spot
// Instance interruption notices", "Scheduled events for your instances",
// "EC2 instance rebalance recommendations").
const (
	spotTerminate = `{"action": "terminate", "time": "2017-09-18T08:22:00Z"}`
	spotHibernate = `{"action": "hibernate", "time": "2017-09-18T08:22:00Z"}`
	scheduledList = `[ 
  {
    "NotBefore" : "21 Jan 2019 09:00:43 GMT",
    "Code" : "system-reboot",
    "Description" : "scheduled reboot",
    "EventId" : "instance-event-0d59937288b749b32",
    "NotAfter" : "21 Jan 2019 09:17:23 GMT",
    "State" : "active"
  } 
]`
	historyList = `[ {"NotBefore" : "21 Jan 2019 09:00:43 GMT", "Code" : "system-reboot", "Description" : "[Canceled] scheduled reboot",
    "EventId" : "instance-event-0d59937288b749b32", "NotAfter" : "21 Jan 2019 09:17:23 GMT", "State" : "canceled"} ]`
	stopList  = `[{"NotBefore": "25 Feb 2021 02:00:00 GMT", "Code": "instance-stop", "Description": "The instance is running on degraded hardware", "EventId": "instance-event-087e363178449a61e", "State": "active"}]`
	rebalance = `{"noticeTime": "2020-10-27T08:22:00Z"}`
)

func TestDocumentedScheduledLists(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		typ        maintenance.Type
		status     maintenance.Status
		duration   *time.Duration
	}{
		{"system-reboot", scheduledList, maintenance.TypeReboot, maintenance.StatusScheduled, maintenance.DurationOf(16*time.Minute + 40*time.Second)},
		{"canceled, from the history", historyList, maintenance.TypeReboot, maintenance.StatusCanceled, maintenance.DurationOf(16*time.Minute + 40*time.Second)},
		{"instance-stop without NotAfter", stopList, maintenance.TypeTerminate, maintenance.StatusScheduled, nil},
	} {
		list, err := ParseScheduledList([]byte(tc.body))
		if err != nil || len(list.Events) != 1 || len(list.Unreadable) != 0 {
			t.Errorf("%s: %+v, %v", tc.name, list, err)
			continue
		}
		e, err := list.Events[0].Event()
		if err != nil || e.Type != tc.typ || e.Status != tc.status || (e.Duration == nil) != (tc.duration == nil) ||
			e.Duration != nil && *e.Duration != *tc.duration {
			t.Errorf("%s: %+v, %v; want %s %s lasting %v", tc.name, e, err, tc.typ, tc.status, tc.duration)
		}
	}
}

// Issue 11, item 6: an entry that turns unreadable while its event is known
// keeps the event as it was last read; a readable answer that no longer
// lists it ends it.
func TestSourceKeepsKnownEventsThroughUnreadableEntries(t *testing.T) {
	srv, _, c, clk := start(t)
	src := NewSource(c, clk, time.Second)
	next := func() maintenance.Observation {
		t.Helper()
		clk.Step(time.Second)
		obs, err := src.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	srv.Spot(SpotTerminate, epoch.Add(2*time.Minute))
	srv.ScheduleMaintenance(ScheduledEvent{NotBefore: "21 Jan 2019 09:00:43 GMT", Code: CodeInstanceRetirement, EventID: "instance-event-1"})
	srv.SetLifecycleState(LifecycleTerminated)
	srv.Rebalance(epoch)
	if obs := next(); len(obs.Events) != 4 {
		t.Fatalf("first read: %+v", obs)
	}

	srv.AnswerRaw(SpotActionPath, []byte(`{"action": "explode", "time": "2017-09-18T08:22:00Z"}`))
	srv.AnswerRaw(ScheduledPath, []byte(`[{"NotBefore": "tomorrow", "Code": "instance-retirement", "EventId": "instance-event-1", "State": "active"}]`))
	srv.AnswerRaw(LifecyclePath, []byte("Terminating:Wait"))
	srv.AnswerRaw(RebalancePath, []byte(`{"noticeTime": "27 Oct 2020 08:22:00 GMT"}`))
	obs := next()
	if len(obs.Events) != 4 || len(obs.Rejected) != 4 {
		t.Fatalf("every entry unreadable: %d events %+v, rejected %v; want the four known events kept and four rejections", len(obs.Events), obs.Events, obs.Rejected)
	}

	// An entry of another event does not keep these.
	srv.AnswerRaw(SpotActionPath, nil)
	srv.AnswerRaw(LifecyclePath, nil)
	srv.AnswerRaw(RebalancePath, nil)
	srv.ClearSpot()
	srv.ClearRebalance()
	srv.SetLifecycleState(LifecycleInService)
	srv.AnswerRaw(ScheduledPath, []byte(`[{"NotBefore": "tomorrow", "Code": "system-reboot", "EventId": "instance-event-2", "State": "active"}]`))
	if obs := next(); len(obs.Events) != 0 || len(obs.Rejected) != 1 {
		t.Errorf("all over, one unrelated bad entry: %+v; want no events", obs)
	}
}

func FuzzSpotAction(f *testing.F) {
	for _, seed := range []string{spotTerminate, spotHibernate, `{"action": "stop", "time": "2017-09-18T08:22:00+02:00"}`, `{"action": false}`, `[]`, `<html>`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var a SpotAction
		if json.Unmarshal(body, &a) != nil {
			return
		}
		e, err := a.Event()
		if err == nil && (e.ID == "" || e.Type != maintenance.TypePreempt || e.Deadline.IsZero() || !e.Deadline.Equal(e.NotBefore)) {
			t.Fatalf("mapped %+v from %q", e, body)
		}
	})
}

func FuzzScheduledList(f *testing.F) {
	for _, seed := range []string{scheduledList, historyList, stopList, `[]`, `[{"EventId": 7}, "x", null]`, `{"Events": []}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		list, err := ParseScheduledList(body)
		if err != nil {
			return
		}
		for _, s := range list.Events {
			e, err := s.Event()
			if err != nil {
				continue
			}
			if e.ID == "" || e.Type == "" || e.Status == "" || !e.Deadline.Equal(e.NotBefore) || e.Duration != nil && *e.Duration < 0 {
				t.Fatalf("mapped %+v from %q", e, body)
			}
		}
	})
}

func FuzzRebalanceAndLifecycle(f *testing.F) {
	for _, seed := range []string{rebalance, `{"noticeTime": 1603786920}`, "InService", "Warmed:Terminated", "Terminated", "Pending:Wait"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r RebalanceRecommendation
		if json.Unmarshal(body, &r) == nil {
			if e, err := r.Event(); err == nil && (e.Type != maintenance.TypeRebalance || !e.Deadline.IsZero()) {
				t.Fatalf("rebalance %+v from %q", e, body)
			}
		}
		if e, ok, err := LifecycleEvent(string(body)); ok && (err != nil || e.Type != maintenance.TypeTerminate) {
			t.Fatalf("lifecycle %+v, %v from %q", e, err, body)
		}
	})
}

// FuzzToken reads arbitrary answers to a session token request: the body is
// sent back in a header on every later request, so it must be one a header
// carries unchanged; and the token lasts no longer than asked, nor a
// nonpositive time (which would ask for a new token on every request),
// whatever the TTL header the service sends back says.
func FuzzToken(f *testing.F) {
	for _, seed := range [][2]string{
		{"AQAEAFUc3ZPfH5qXyXyH9oC8W7n3QJmFxnbK0D9PzJ8UGbAmVpaiZw==", "21600"}, {"token\n", "60"}, {"token", ""},
		{"token", "0"}, {"token", "-5"}, {"to ken", "60"}, {"<html>gateway</html>", "21600"}, {"", "1"},
	} {
		f.Add([]byte(seed[0]), seed[1])
	}
	f.Fuzz(func(t *testing.T, body []byte, granted string) {
		token, ttl, err := parseToken(body, granted, MaxTokenTTL)
		if err != nil {
			return
		}
		if token == "" || strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("token %q from %q", token, body)
		}
		if ttl <= 0 || ttl > MaxTokenTTL {
			t.Fatalf("TTL header %q: the token lasts %s", granted, ttl)
		}
	})
}

// FuzzLifecycleState reads arbitrary target lifecycle state documents, as
// the agent does before mapping them: what it accepts is a state name, every
// state AWS documents is accepted, and only Terminated ones mean the
// machine is leaving.
func FuzzLifecycleState(f *testing.F) {
	documented := []string{LifecycleInService, LifecycleTerminated, LifecycleDetached, LifecycleStandby,
		LifecycleWarmedHibernated, LifecycleWarmedRunning, LifecycleWarmedStopped, LifecycleWarmedTerminated}
	for _, seed := range append(documented, "Pending:Wait", "InService\n", ":", "Warmed:", "a:b:c", "<html>", "Terminated ", "") {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		state, err := ParseLifecycleState(body)
		if slices.Contains(documented, strings.TrimSpace(string(body))) && err != nil {
			t.Fatalf("documented state %q refused: %v", body, err)
		}
		if err != nil {
			return
		}
		if state == "" || strings.Count(state, ":") > 1 || strings.ContainsFunc(state, func(r rune) bool {
			return r != ':' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z')
		}) {
			t.Fatalf("state %q from %q", state, body)
		}
		e, leaving, err := LifecycleEvent(state)
		if leaving != strings.HasSuffix(state, "Terminated") && slices.Contains(documented, state) || leaving && (err != nil || e.ID == "") {
			t.Fatalf("state %q: %+v, leaving %t, %v", state, e, leaving, err)
		}
	})
}
