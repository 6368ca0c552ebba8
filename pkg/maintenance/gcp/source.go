package gcp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// The values Google documents for the two keys.
const (
	PreemptedFalse = "FALSE"
	PreemptedTrue  = "TRUE"

	MaintenanceNone      = "NONE"
	MaintenanceMigrate   = "MIGRATE_ON_HOST_MAINTENANCE"
	MaintenanceTerminate = "TERMINATE_ON_HOST_MAINTENANCE"
)

// How much notice Compute Engine gives, counted from when the value changes.
//
// Where Google's documentation corrects sluice's design doc:
//   - TERMINATE_ON_HOST_MAINTENANCE gives 60 seconds to most VMs but one
//     hour to VMs with GPUs (so its deadline is a lower bound, not the
//     moment of the stop).
//   - maintenance-event is populated only for VMs set to live-migrate and
//     for VMs with GPUs: any other VM set to terminate on host maintenance
//     (Spot and preemptible VMs included) gets no maintenance notice here.
//   - The 60-second warning is given only if the key was read since the
//     last maintenance event; otherwise the event starts at once.
//   - The metadata server may answer 503 during maintenance.
const (
	// PreemptNotice: a preempted VM gets an ACPI soft-off and is powered
	// off 30 seconds later. (Spot VMs created with a longer preemption
	// notice duration, a beta setting, get more; 30 seconds is never late.)
	PreemptNotice = 30 * time.Second
	// MaintenanceNotice: maintenance-event changes 60 seconds before the
	// event starts. A VM with GPUs is stopped only an hour after
	// TERMINATE_ON_HOST_MAINTENANCE appears; nothing in the two keys says
	// which kind of VM this is, so the shorter notice is used: draining
	// early is safe, draining late is not.
	MaintenanceNotice = 60 * time.Second
	// DefaultWait is how long one long poll is held (timeout_sec), the value
	// Google's own guest agent uses.
	DefaultWait = 60 * time.Second
)

// Event IDs. GCP gives its notices no IDs; these are stable for as long as a
// notice lasts, so repeated observations name the same event.
const (
	IDPreempted = "gcp-preempted"
	IDMigrate   = "gcp-migrate-on-host-maintenance"
	IDTerminate = "gcp-terminate-on-host-maintenance"
)

// watched are the keys a Source long-polls, each on its own: both are
// documented keys with their own ETags, which Google's samples long-poll
// one at a time. The recursive instance/ directory would also take
// wait_for_change, but it wakes on every unrelated change (attributes,
// network) and carries all of them, custom metadata included, towards the
// answer cap.
var watched = [...]string{PathPreempted, PathMaintenanceEvent}

// Source watches one VM's preemption and host-maintenance notices. Compute
// Engine has no call to start an event early, so Source is no
// maintenance.Approver. Next must not be called concurrently.
type Source struct {
	client  *Client
	clock   clock.Clock
	wait    time.Duration
	read    bool                 // answers holds a first reading
	answers [len(watched)]Answer // latest answer per watched key
	seen    map[string]time.Time // when each announced event was first observed
}

var _ maintenance.Watcher = (*Source)(nil)

// NewSource watches through c, reading time from clk.
func NewSource(c *Client, clk clock.Clock) *Source {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Source{client: c, clock: clk, wait: DefaultWait, seen: map[string]time.Time{}}
}

// Next returns the VM's current events. The first call reads both keys at
// once, which also tells Compute Engine to give the 60-second maintenance
// warning (it gives none to a VM that never read the key). Later calls
// long-poll both keys and return when either changes, or when a poll times
// out with nothing changed.
//
// A deadline counts from when Next first saw the notice, so it stays put
// across calls. A failed read or a value Google does not document is an
// error: never an event, and never the end of one.
func (s *Source) Next(ctx context.Context) (maintenance.Observation, error) {
	answers, err := s.fetch(ctx)
	if err != nil {
		return maintenance.Observation{}, err
	}
	s.answers, s.read = answers, true
	events, err := s.events()
	if err != nil {
		return maintenance.Observation{}, err
	}
	return maintenance.Observation{Events: events}, nil
}

// fetch reads every watched key (first call) or long-polls them until one
// answers. Nothing is kept unless every request that was not stopped on
// purpose succeeded, so a change is never lost behind an error.
func (s *Source) fetch(ctx context.Context) ([len(watched)]Answer, error) {
	type result struct {
		i   int
		a   Answer
		err error
	}
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	results := make(chan result, len(watched))
	for i, path := range watched {
		go func() {
			r := result{i: i}
			if s.read {
				r.a, r.err = s.client.Watch(pollCtx, path, s.answers[i].ETag, s.wait)
			} else {
				r.a, r.err = s.client.Get(pollCtx, path)
			}
			results <- r
		}()
	}
	next := s.answers
	var errs []error
	for n := range len(watched) {
		r := <-results
		switch {
		case r.err == nil:
			next[r.i] = r.a
		case n > 0 && s.read && ctx.Err() == nil && errors.Is(r.err, context.Canceled):
			// The other long poll answered first and this one was stopped.
		default:
			errs = append(errs, r.err)
		}
		if s.read {
			stop() // one long poll has answered: stop the others
		}
	}
	if err := ctx.Err(); err != nil {
		return s.answers, err
	}
	if len(errs) > 0 {
		return s.answers, errors.Join(errs...)
	}
	return next, nil
}

// events maps the latest answers onto events, keeping each event's first
// sighting and forgetting the sightings of events no longer announced.
func (s *Source) events() ([]maintenance.Event, error) {
	preempted, err := parsePreempted(s.answers[0].Value)
	if err != nil {
		return nil, err
	}
	kind, err := parseMaintenance(s.answers[1].Value)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	announced := map[string]bool{}
	firstSeen := func(id string) time.Time {
		announced[id] = true
		if t, ok := s.seen[id]; ok {
			return t
		}
		s.seen[id] = now
		return now
	}
	var events []maintenance.Event
	if preempted {
		events = append(events, maintenance.Event{
			ID: IDPreempted, Source: maintenance.SourceGCP, Type: maintenance.TypePreempt,
			Status:      maintenance.StatusStarted,
			Deadline:    firstSeen(IDPreempted).Add(PreemptNotice),
			Description: "Compute Engine is preempting this VM; it is powered off 30 seconds after the notice",
		})
	}
	switch kind {
	case MaintenanceMigrate:
		events = append(events, hostMaintenance(IDMigrate, maintenance.TypeFreeze, firstSeen(IDMigrate), now,
			"Compute Engine live-migrates this VM for host maintenance; it is paused briefly"))
	case MaintenanceTerminate:
		events = append(events, hostMaintenance(IDTerminate, maintenance.TypeTerminate, firstSeen(IDTerminate), now,
			"Compute Engine stops this VM for host maintenance (60 seconds after the notice; an hour for VMs with GPUs)"))
	}
	for id := range s.seen {
		if !announced[id] {
			delete(s.seen, id)
		}
	}
	return events, nil
}

// hostMaintenance is a maintenance-event notice first seen at first: it
// starts MaintenanceNotice later, and has started once now reaches that.
func hostMaintenance(id string, t maintenance.Type, first, now time.Time, description string) maintenance.Event {
	start := first.Add(MaintenanceNotice)
	e := maintenance.Event{
		ID: id, Source: maintenance.SourceGCP, Type: t, Status: maintenance.StatusScheduled,
		NotBefore: start, Deadline: start, Description: description,
	}
	if !now.Before(start) {
		e.Status, e.NotBefore = maintenance.StatusStarted, time.Time{}
	}
	return e
}

func parsePreempted(v string) (bool, error) {
	switch strings.TrimSpace(v) {
	case PreemptedFalse:
		return false, nil
	case PreemptedTrue:
		return true, nil
	}
	return false, fmt.Errorf("%s is %s, not %s or %s", PathPreempted, quote(v), PreemptedFalse, PreemptedTrue)
}

func parseMaintenance(v string) (string, error) {
	switch s := strings.TrimSpace(v); s {
	case MaintenanceNone, MaintenanceMigrate, MaintenanceTerminate:
		return s, nil
	}
	return "", fmt.Errorf("%s is %s, which Google does not document", PathMaintenanceEvent, quote(v))
}

// quote shows the start of an answer that may be long or binary.
func quote(v string) string {
	const most = 100
	if len(v) > most {
		return strconv.Quote(v[:most]) + "…"
	}
	return strconv.Quote(v)
}
