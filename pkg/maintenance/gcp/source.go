package gcp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// Pacing of the long polls. A long poll that answers within fastAnswer is
// fast. A fast answer with a new value is what a change looks like; a fast
// answer with the value unchanged, or more than fastChanges fast answers in
// a row, means the server is not holding the request (an old metadata
// server, an emulator without wait_for_change, a value that never settles).
// Then the key's next poll waits a backoff that starts at backoffMin,
// doubles with every such answer up to backoffMax, and is jittered; a poll
// the server holds resets it. backoffMax keeps a preemption (30 seconds of
// notice) seen in time even so.
const (
	fastAnswer  = time.Second
	fastChanges = 3
	backoffMin  = 500 * time.Millisecond
	backoffMax  = 5 * time.Second
)

// watched are the keys a Source long-polls, each on its own: both are
// documented keys with their own ETags, which Google's samples long-poll
// one at a time. The recursive instance/ directory would also take
// wait_for_change, but it wakes on every unrelated change (attributes,
// network) and carries all of them, custom metadata included, towards the
// answer cap.
var watched = [...]string{PathPreempted, PathMaintenanceEvent}

// eventsOf are the events each watched key announces.
var eventsOf = [len(watched)][]string{{IDPreempted}, {IDMigrate, IDTerminate}}

// Source watches one VM's preemption and host-maintenance notices. Compute
// Engine has no call to start an event early, so Source is no
// maintenance.Approver. Next must not be called concurrently.
type Source struct {
	client *Client
	clock  clock.Clock
	wait   time.Duration
	jitter func(time.Duration) time.Duration

	keys    [len(watched)]key
	updates chan update         // answers of the polls in flight, one at most per key
	seen    map[string]sighting // when each announced event was first observed
	held    maintenance.Holder
}

// key is what a Source knows of one watched key.
type key struct {
	answer  Answer // the latest answer; zero before the first
	read    bool   // answer holds a reading
	polling bool   // a poll of the key is in flight
	fast    int    // answers in a row that came within fastAnswer
	strikes int    // answers in a row that came faster than they should
	delay   time.Duration
	failure error // the latest poll failed so
}

// sighting is when an event was first observed, and whether it has been
// missing since.
type sighting struct {
	first  time.Time
	absent bool
}

// update is one poll's outcome.
type update struct {
	i       int
	sent    string // the last_etag the poll sent ("" for a plain read)
	a       Answer
	err     error
	elapsed time.Duration
	stopped bool // the ctx the poll ran under ended
}

var _ maintenance.Watcher = (*Source)(nil)

// NewSource watches through c, reading time from clk; each long poll is
// held for DefaultWait.
func NewSource(c *Client, clk clock.Clock) *Source {
	return NewSourceWaiting(c, clk, DefaultWait)
}

// NewSourceWaiting is NewSource with each long poll held for wait (whole
// seconds, at least one), which bounds how long a poll the server never
// answers goes unnoticed.
func NewSourceWaiting(c *Client, clk clock.Clock, wait time.Duration) *Source {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Source{client: c, clock: clk, wait: max(wait, time.Second), jitter: jitter,
		updates: make(chan update, len(watched)), seen: map[string]sighting{}}
}

// Next returns the VM's current events. The first call reads both keys at
// once, which also tells Compute Engine to give the 60-second maintenance
// warning (it gives none to a VM that never read the key). Later calls
// return when a long poll answers: each key is long-polled on its own, with
// its own ETag and timeout_sec, and a poll still held when Next returns
// stays in flight (bound to the ctx it started under) for the next call, so
// one key's answer never cuts short the other's poll.
//
// A deadline counts from when Next first saw the notice, so it stays put
// across calls, and across a notice that goes and comes back before its
// deadline. A value Google does not document is rejected (a
// maintenance.RejectedError) and ignored: it never hides the other key, and
// never ends an event that key announced before. A read that fails is an
// error only when no key could be read; otherwise the failed key keeps its
// last reading.
func (s *Source) Next(ctx context.Context) (maintenance.Observation, error) {
	first := !s.keys[0].read && !s.keys[1].read
	for i := range s.keys {
		if !s.keys[i].polling {
			s.start(ctx, i)
		}
	}
	got := map[int]bool{}
	var failed []error
	for {
		select {
		case <-ctx.Done():
			return maintenance.Observation{}, ctx.Err()
		case u := <-s.updates:
			if s.apply(ctx, u) {
				got[u.i] = true
				if u.err != nil {
					failed = append(failed, u.err)
				}
			}
		}
		// The first call waits for every key; later ones for any answer,
		// taking along what else has arrived.
		if len(got) > 0 && (!first || len(got) == len(watched)) {
			s.drain(ctx, got, &failed)
			break
		}
	}
	if len(failed) == len(got) {
		return maintenance.Observation{}, errors.Join(failed...)
	}
	return s.held.Hold(s.observe()), nil
}

// drain applies the updates that have arrived already.
func (s *Source) drain(ctx context.Context, got map[int]bool, failed *[]error) {
	for {
		select {
		case u := <-s.updates:
			if s.apply(ctx, u) {
				got[u.i] = true
				if u.err != nil {
					*failed = append(*failed, u.err)
				}
			}
		default:
			return
		}
	}
}

// start sends key i's next poll: a plain read until it has one, then a long
// poll from its ETag, after the key's backoff.
func (s *Source) start(ctx context.Context, i int) {
	k := &s.keys[i]
	k.polling = true
	sent, read, delay := k.answer.ETag, k.read, k.delay
	go func() {
		u := update{i: i, sent: sent}
		if delay > 0 {
			t := s.clock.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				u.err, u.stopped = ctx.Err(), true
				s.updates <- u
				return
			case <-t.C():
			}
		}
		began := s.clock.Now()
		if read {
			u.a, u.err = s.client.Watch(ctx, watched[i], sent, s.wait)
		} else {
			u.sent = ""
			u.a, u.err = s.client.Get(ctx, watched[i])
		}
		u.elapsed = s.clock.Since(began)
		u.stopped = u.err != nil && ctx.Err() != nil
		s.updates <- u // buffered: one slot per key, one poll per key
	}()
}

// apply takes in one poll's outcome and paces the key's next poll. It
// reports false for a poll that only stopped because the ctx it ran under
// ended while this call's ctx goes on: that poll is simply sent again.
func (s *Source) apply(ctx context.Context, u update) bool {
	k := &s.keys[u.i]
	k.polling = false
	if u.stopped && ctx.Err() == nil {
		s.start(ctx, u.i)
		return false
	}
	defer func() {
		if ctx.Err() == nil {
			s.start(ctx, u.i)
		}
	}()
	if u.err != nil {
		k.failure = u.err
		k.strikes++
		k.delay = s.backoff(k.strikes)
		return true
	}
	fast := u.sent != "" && u.elapsed < fastAnswer
	unchanged := u.a.ETag == u.sent || u.a.Value == k.answer.Value
	switch {
	case !fast:
		k.strikes, k.fast = 0, 0 // a plain read, or a poll the server held
	case unchanged || k.fast >= fastChanges:
		k.strikes++
	default:
		k.strikes = 0 // a change, answered at once as it should be
	}
	if fast {
		k.fast++
	}
	k.delay = s.backoff(k.strikes)
	k.answer, k.read, k.failure = u.a, true, nil
	return true
}

func (s *Source) backoff(strikes int) time.Duration {
	if strikes == 0 {
		return 0
	}
	d := backoffMin
	for n := 1; n < strikes && d < backoffMax; n++ {
		d *= 2
	}
	return s.jitter(min(d, backoffMax))
}

// jitter spreads d over [d/2, d], so the agents of many VMs behind one
// misbehaving server do not poll in step.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1) //nolint:gosec // spreading retries needs no secure randomness
}

// observe maps the keys' latest readings onto events, keeping each event's
// first sighting. The sighting of an event no longer announced is kept until
// its notice has run out: a notice that comes back before then is the same
// notice (a VM is powered off 30 seconds after it is preempted, and host
// maintenance starts 60 seconds after its notice), so a flapping value never
// moves a deadline later.
// A key never read, or whose value cannot be read, is reported as rejected;
// its events are neither announced nor ended.
func (s *Source) observe() maintenance.Observation {
	var obs maintenance.Observation
	now := s.clock.Now().UTC()
	announced := map[string]bool{}
	firstSeen := func(id string) time.Time {
		announced[id] = true
		if sg, ok := s.seen[id]; ok && (!sg.absent || now.Before(sg.first.Add(noticeOf(id)))) {
			s.seen[id] = sighting{first: sg.first}
			return sg.first
		}
		s.seen[id] = sighting{first: now}
		return now
	}
	for i := range s.keys {
		k := &s.keys[i]
		var err error
		switch {
		case !k.read && k.failure != nil:
			err = fmt.Errorf("not read yet: %w", k.failure)
		case !k.read:
			err = errors.New("not read yet")
		default:
			err = s.add(&obs, i, k.answer.Value, firstSeen)
		}
		if err != nil {
			obs.Rejected = append(obs.Rejected, maintenance.Reject(watched[i], err, eventsOf[i]...))
			for _, id := range eventsOf[i] {
				announced[id] = true // neither announced nor over: keep its first sighting
			}
		}
	}
	for id, sg := range s.seen {
		switch {
		case announced[id]:
		case !now.Before(sg.first.Add(noticeOf(id))):
			delete(s.seen, id)
		default:
			s.seen[id] = sighting{first: sg.first, absent: true}
		}
	}
	return obs
}

// noticeOf is how long after its first sighting the event id starts.
func noticeOf(id string) time.Duration {
	if id == IDPreempted {
		return PreemptNotice
	}
	return MaintenanceNotice
}

// add maps one key's value onto obs; an error says the value means nothing
// sluice can act on.
func (s *Source) add(obs *maintenance.Observation, i int, value string, firstSeen func(string) time.Time) error {
	now := s.clock.Now().UTC()
	if watched[i] == PathPreempted {
		preempted, err := parsePreempted(value)
		if err != nil || !preempted {
			return err
		}
		obs.Events = append(obs.Events, maintenance.Event{
			ID: IDPreempted, Source: maintenance.SourceGCP, Type: maintenance.TypePreempt,
			Status:      maintenance.StatusStarted,
			Deadline:    firstSeen(IDPreempted).Add(PreemptNotice),
			Description: "Compute Engine is preempting this VM; it is powered off 30 seconds after the notice",
		})
		return nil
	}
	kind, err := parseMaintenance(value)
	switch kind {
	case MaintenanceMigrate:
		obs.Events = append(obs.Events, hostMaintenance(IDMigrate, maintenance.TypeFreeze, firstSeen(IDMigrate), now,
			"Compute Engine live-migrates this VM for host maintenance; it is paused briefly"))
	case MaintenanceTerminate:
		obs.Events = append(obs.Events, hostMaintenance(IDTerminate, maintenance.TypeTerminate, firstSeen(IDTerminate), now,
			"Compute Engine stops this VM for host maintenance (60 seconds after the notice; an hour for VMs with GPUs)"))
	}
	return err
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
	return false, fmt.Errorf("%s is not %s or %s", quote(v), PreemptedFalse, PreemptedTrue)
}

// parseMaintenance reads maintenance-event. A value Google does not document
// (SHUTDOWN_ON_HOST_MAINTENANCE, anything added later, or garbage) is an
// error: sluice never acts on a notice it does not understand.
func parseMaintenance(v string) (string, error) {
	switch s := strings.TrimSpace(v); s {
	case MaintenanceNone, MaintenanceMigrate, MaintenanceTerminate:
		return s, nil
	}
	return "", fmt.Errorf("%s is not a value Google documents (%s, %s or %s); ignored", quote(v), MaintenanceNone, MaintenanceMigrate, MaintenanceTerminate)
}

// quote shows the start of an answer that may be long or binary.
func quote(v string) string {
	const most = 100
	if len(v) > most {
		return strconv.Quote(v[:most]) + "…"
	}
	return strconv.Quote(v)
}
