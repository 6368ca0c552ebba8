package azure

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Documents shaped as Microsoft documents them ("Azure Metadata Service:
// Scheduled Events for Linux VMs", api-version 2020-07-01), and as real VMs
// and Microsoft's mock server send them.
const (
	// The documentation's example: a Freeze of two VMs, from the platform.
	docFreeze = `{
	"DocumentIncarnation": 1,
	"Events": [
		{
			"EventId": "f020ba2e-3bc0-4c40-a10b-86575a9eabd5",
			"EventType": "Freeze",
			"ResourceType": "VirtualMachine",
			"Resources": ["FrontEnd_IN_0", "BackEnd_IN_0"],
			"EventStatus": "Scheduled",
			"NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
			"Description": "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
			"EventSource": "Platform",
			"DurationInSeconds": 5
		}
	]
}`
	// A Spot eviction: the impact has no end (-1).
	docPreempt = `{"DocumentIncarnation": 7, "Events": [{"EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123", "EventStatus": "Scheduled",
		"EventType": "Preempt", "ResourceType": "VirtualMachine", "Resources": ["aks-spot-9999-vmss_0"], "NotBefore": "Sat, 21 Nov 2026 10:00:30 GMT",
		"Description": "", "EventSource": "Platform", "DurationInSeconds": -1}]}`
	// A restart the VM's owner asked for, already started: NotBefore is
	// empty once Started.
	docUserStarted = `{"DocumentIncarnation": 3, "Events": [{"EventId": "A123BC45-1234-5678-AB90-ABCDEF123456", "EventStatus": "Started",
		"EventType": "Reboot", "ResourceType": "VirtualMachine", "Resources": ["worker-7"], "NotBefore": "",
		"Description": "Virtual machine is going to be restarted as requested by authorized user.", "EventSource": "User", "DurationInSeconds": 0}]}`
	// As Microsoft's scheduled-events mock server sends it: NotBefore in
	// RFC 3339.
	docRFC3339 = `{"DocumentIncarnation": 2, "Events": [{"EventId": "B9AB5B6E-8EF1-4D9C-8BA4-2B7D8BD46B47", "EventStatus": "Scheduled",
		"EventType": "Redeploy", "ResourceType": "VirtualMachine", "Resources": ["worker-7"], "NotBefore": "2023-01-01T00:00:00Z",
		"Description": "Virtual machine is being redeployed", "EventSource": "Platform", "DurationInSeconds": 900}]}`
	// No events.
	docEmpty = `{"DocumentIncarnation": 0, "Events": []}`
)

func TestDocumentedPayloads(t *testing.T) {
	for _, tc := range []struct {
		name, doc, vm string
		want          maintenance.Event
	}{
		{"documented freeze", docFreeze, "BackEnd_IN_0", maintenance.Event{ID: "f020ba2e-3bc0-4c40-a10b-86575a9eabd5", Type: maintenance.TypeFreeze,
			Status: maintenance.StatusScheduled, NotBefore: time.Date(2016, 9, 19, 18, 29, 47, 0, time.UTC), Duration: maintenance.DurationOf(5 * time.Second),
			Initiator: maintenance.InitiatorPlatform}},
		{"spot eviction, duration unknown", docPreempt, "aks-spot-9999-vmss_0", maintenance.Event{ID: "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
			Type: maintenance.TypePreempt, Status: maintenance.StatusScheduled, NotBefore: time.Date(2026, 11, 21, 10, 0, 30, 0, time.UTC),
			Initiator: maintenance.InitiatorPlatform}},
		{"user restart, started, zero duration", docUserStarted, "worker-7", maintenance.Event{ID: "A123BC45-1234-5678-AB90-ABCDEF123456",
			Type: maintenance.TypeReboot, Status: maintenance.StatusStarted, Duration: maintenance.DurationOf(0), Initiator: maintenance.InitiatorUser}},
		{"mock server's RFC 3339", docRFC3339, "worker-7", maintenance.Event{ID: "B9AB5B6E-8EF1-4D9C-8BA4-2B7D8BD46B47", Type: maintenance.TypeRedeploy,
			Status: maintenance.StatusScheduled, NotBefore: time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC), Duration: maintenance.DurationOf(15 * time.Minute),
			Initiator: maintenance.InitiatorPlatform}},
	} {
		doc, err := ParseDocument([]byte(tc.doc))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		events, rejected := doc.EventsFor(tc.vm)
		if len(events) != 1 || len(rejected) != 0 {
			t.Errorf("%s: events %+v, rejected %v; want one event", tc.name, events, rejected)
			continue
		}
		e := events[0]
		if e.ID != tc.want.ID || e.Type != tc.want.Type || e.Status != tc.want.Status || !e.NotBefore.Equal(tc.want.NotBefore) ||
			!e.Deadline.Equal(tc.want.NotBefore) || !sameDuration(e.Duration, tc.want.Duration) || e.Initiator != tc.want.Initiator ||
			e.Source != maintenance.SourceAzure {
			t.Errorf("%s: %+v; want %+v", tc.name, e, tc.want)
		}
	}
	doc, err := ParseDocument([]byte(docEmpty))
	if events, rejected := doc.EventsFor("worker-7"); err != nil || len(events)+len(rejected) != 0 {
		t.Errorf("empty document: %v, %v, %v", events, rejected, err)
	}
}

func TestParseNotBefore(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time // zero: rejected
	}{
		{"Mon, 19 Sep 2016 18:29:47 GMT", time.Date(2016, 9, 19, 18, 29, 47, 0, time.UTC)},
		{"Sat, 1 Jan 2022 09:00:00 GMT", time.Date(2022, 1, 1, 9, 0, 0, 0, time.UTC)},
		{"2023-01-01T00:00:00Z", time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"2023-01-01T01:30:00+01:30", time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"2023-01-01T00:00:00.5Z", time.Date(2023, 1, 1, 0, 0, 0, 5e8, time.UTC)},
		{"tomorrow", time.Time{}},
		{"Mon, 19 Sep 2016 18:29:47 UTC", time.Date(2016, 9, 19, 18, 29, 47, 0, time.UTC)}, // Go's time.RFC1123 of a UTC time
		{"Mon, 19 Sep 2016 20:29:47 +0200", time.Date(2016, 9, 19, 18, 29, 47, 0, time.UTC)},
		{FormatNotBefore(time.Date(2016, 9, 19, 18, 29, 47, 0, time.UTC)), time.Date(2016, 9, 19, 18, 29, 47, 0, time.UTC)},
		{"Mon, 19 Sep 2016 18:29:47 PST", time.Time{}}, // a named zone other than GMT/UTC would be read as UTC: refused
		{"19 Sep 2016 18:29:47 GMT", time.Time{}},
		{"1474309787", time.Time{}},
	} {
		got, err := ParseNotBefore(tc.in)
		if tc.want.IsZero() {
			if err == nil {
				t.Errorf("%q: read as %s, want it rejected", tc.in, got)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("%q: %s, %v; want %s in UTC", tc.in, got, err, tc.want)
		}
	}
}

// Issue 11, item 2: every event of the RFC 3339 shape was lost.
func TestSourceReadsRFC3339NotBefore(t *testing.T) {
	s, c := start(t)
	s.SetNotBeforeLayout(time.RFC3339)
	s.Schedule(RawEvent{EventID: "R1", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{"vm1"},
		EventStatus: "Scheduled", NotBefore: "Sat, 21 Nov 2026 10:15:00 GMT", EventSource: "Platform", DurationInSeconds: 900})
	src := NewSource(c, "vm1", clocktesting.NewFakeClock(time.Now()), time.Second)
	obs, err := src.Next(context.Background())
	if err != nil || len(obs.Events) != 1 || len(obs.Rejected) != 0 {
		t.Fatalf("observed %+v, %v; want the Redeploy", obs, err)
	}
	if want := time.Date(2026, 11, 21, 10, 15, 0, 0, time.UTC); !obs.Events[0].NotBefore.Equal(want) {
		t.Errorf("NotBefore %s, want %s", obs.Events[0].NotBefore, want)
	}
}

// Issue 11, items 2 and 6: one unreadable entry, whatever is wrong with it,
// is rejected alone; the others in the same document are still handled.
func TestOneUnreadableEntryLeavesTheOthers(t *testing.T) {
	s, c := start(t)
	s.Schedule(RawEvent{EventID: "good", EventType: "Reboot", Resources: []string{"vm1"}, EventStatus: "Scheduled",
		NotBefore: "Sat, 21 Nov 2026 10:15:00 GMT", EventSource: "Platform", DurationInSeconds: 300})
	s.Schedule(RawEvent{EventID: "rfc3339", EventType: "Redeploy", Resources: []string{"vm1"}, EventStatus: "Scheduled",
		NotBefore: "2026-11-21T10:20:00Z", EventSource: "User", DurationInSeconds: -1})
	s.Schedule(RawEvent{EventID: "bad-time", EventType: "Reboot", Resources: []string{"vm1"}, EventStatus: "Scheduled", NotBefore: "tomorrow"})
	s.Schedule(RawEvent{EventID: "other-vm", EventType: "Reboot", Resources: []string{"vm2"}, EventStatus: "Scheduled", NotBefore: "tomorrow"})
	s.AddRawEntry([]byte(`{"EventId": "wrong-type", "EventType": "Reboot", "Resources": ["vm1"], "EventStatus": "Scheduled", "DurationInSeconds": "900"}`))
	s.AddRawEntry([]byte(`{"EventId": "wrong-type-elsewhere", "Resources": ["vm2"], "DurationInSeconds": "900"}`))
	s.AddRawEntry([]byte(`"not an event"`))
	src := NewSource(c, "vm1", clocktesting.NewFakeClock(time.Now()), time.Second)
	obs, err := src.Next(context.Background())
	if err != nil {
		t.Fatalf("one bad entry turned the whole read into an error: %v", err)
	}
	var ids []string
	for _, e := range obs.Events {
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "good,rfc3339" {
		t.Errorf("events %v; want good and rfc3339", ids)
	}
	var parts []string
	for _, r := range obs.Rejected {
		var rej *maintenance.RejectedError
		if !errors.As(r, &rej) {
			t.Errorf("rejection %v is no RejectedError", r)
			continue
		}
		parts = append(parts, rej.Part)
	}
	if want := `event "bad-time",event "wrong-type",event #6`; strings.Join(parts, ",") != want {
		t.Errorf("rejected %v; want %s", obs.Rejected, want)
	}
}

// Issue 11, item 6: a known event whose entry turns unreadable for a while
// stays as it was last read; it ends only when a readable answer no longer
// lists it.
func TestSourceKeepsAKnownEventThroughAnUnreadableAnswer(t *testing.T) {
	s, c := start(t)
	clk := clocktesting.NewFakeClock(time.Now())
	src := NewSource(c, "vm1", clk, time.Second)
	next := func() maintenance.Observation {
		t.Helper()
		clk.Step(time.Second)
		obs, err := src.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	s.Schedule(RawEvent{EventID: "A1", EventType: "Redeploy", Resources: []string{"vm1"}, EventStatus: "Scheduled",
		NotBefore: "Sat, 21 Nov 2026 10:15:00 GMT", EventSource: "Platform", DurationInSeconds: 900})
	if obs := next(); len(obs.Events) != 1 {
		t.Fatalf("first read: %+v", obs)
	}
	s.Move("A1", "garbage")
	obs := next()
	if len(obs.Events) != 1 || obs.Events[0].ID != "A1" || !obs.Events[0].NotBefore.Equal(time.Date(2026, 11, 21, 10, 15, 0, 0, time.UTC)) || len(obs.Rejected) != 1 {
		t.Fatalf("A1 unreadable: %+v; want A1 as last read, and the rejection", obs)
	}
	// An entry with no readable EventId may be any event: A1 stays too.
	s.Finish("A1")
	s.AddRawEntry([]byte(`{"EventId": 42}`))
	if obs := next(); len(obs.Events) != 1 || obs.Events[0].ID != "A1" {
		t.Fatalf("an entry with no readable EventId: %+v; want A1 kept", obs)
	}
	s.ClearRawEntries()
	if obs := next(); len(obs.Events) != 0 || len(obs.Rejected) != 0 {
		t.Errorf("readable again, without A1: %+v; want A1 over", obs)
	}
}

func sameDuration(a, b *time.Duration) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// The emulator sends what it was given, in the layout asked for.
func TestServerSendsTheChosenLayout(t *testing.T) {
	s, c := start(t)
	s.Schedule(RawEvent{EventID: "A1", EventType: "Reboot", Resources: []string{"vm1"}, EventStatus: "Scheduled", NotBefore: "Mon, 19 Sep 2016 18:29:47 GMT"})
	s.SetNotBeforeLayout(time.RFC3339)
	var raw struct{ Events []map[string]any }
	s.mu.Lock()
	data, _ := json.Marshal(s.answerLocked())
	s.mu.Unlock()
	if err := json.Unmarshal(data, &raw); err != nil || raw.Events[0]["NotBefore"] != "2016-09-19T18:29:47Z" {
		t.Errorf("sent %s", data)
	}
	if _, err := c.Document(context.Background()); err != nil {
		t.Fatal(err)
	}
}
