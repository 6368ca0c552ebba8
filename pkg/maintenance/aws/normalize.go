package aws

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Spot interruption actions.
const (
	SpotHibernate = "hibernate"
	SpotStop      = "stop"
	SpotTerminate = "terminate"
)

// Scheduled event codes.
const (
	CodeInstanceReboot     = "instance-reboot"
	CodeSystemReboot       = "system-reboot"
	CodeSystemMaintenance  = "system-maintenance"
	CodeInstanceRetirement = "instance-retirement"
	CodeInstanceStop       = "instance-stop"
)

// Scheduled event states.
const (
	StateActive    = "active"
	StateCanceled  = "canceled"
	StateCompleted = "completed"
)

// Auto Scaling target lifecycle states.
const (
	LifecycleInService        = "InService"
	LifecycleTerminated       = "Terminated"
	LifecycleDetached         = "Detached"
	LifecycleStandby          = "Standby"
	LifecycleWarmedHibernated = "Warmed:Hibernated"
	LifecycleWarmedRunning    = "Warmed:Running"
	LifecycleWarmedStopped    = "Warmed:Stopped"
	LifecycleWarmedTerminated = "Warmed:Terminated"
)

// Prefixes of the IDs sluice gives the notices that carry none.
const (
	spotPrefix      = "spot-"
	rebalancePrefix = "rebalance-"
	lifecyclePrefix = "asg-"
)

// compactTime names a moment inside an event ID.
const compactTime = "20060102T150405Z"

// Event maps the Spot notice: the machine is taken away at Time, whatever the
// action, so it is a Preempt whose deadline is Time. The ID is derived from
// the action and the time, so repeated polls name the same event.
func (a *SpotAction) Event() (maintenance.Event, error) {
	e := maintenance.Event{Source: maintenance.SourceAWS, Type: maintenance.TypePreempt, Status: maintenance.StatusScheduled}
	switch a.Action {
	case SpotHibernate, SpotStop, SpotTerminate:
	default:
		return e, fmt.Errorf("spot instance-action: unknown action %q", a.Action)
	}
	t, err := time.Parse(time.RFC3339, a.Time)
	if err != nil {
		return e, fmt.Errorf("spot instance-action: time %q is not RFC 3339", a.Time)
	}
	t = t.UTC()
	e.ID = spotPrefix + a.Action + "-" + t.Format(compactTime)
	e.NotBefore, e.Deadline = t, t
	e.Description = "Spot interruption: " + a.Action
	return e, nil
}

// Event maps one scheduled event. NotBefore is both the earliest start and the
// deadline; NotAfter, when given, bounds the impact.
func (s ScheduledEvent) Event() (maintenance.Event, error) {
	e := maintenance.Event{ID: s.EventID, Source: maintenance.SourceAWS, Description: s.Description}
	if s.EventID == "" {
		return e, errors.New("scheduled event: no EventId")
	}
	fail := func(format string, args ...any) (maintenance.Event, error) {
		return e, fmt.Errorf("scheduled event %q: "+format, append([]any{s.EventID}, args...)...)
	}
	switch s.Code {
	case CodeInstanceReboot, CodeSystemReboot:
		e.Type = maintenance.TypeReboot
	case CodeInstanceRetirement:
		// Stopped when EBS-backed, terminated when instance-store backed: the
		// node is gone either way.
		e.Type = maintenance.TypeTerminate
	case CodeInstanceStop:
		// The instance is stopped and does not come back on its own: only a
		// start (onto a new host) revives it, and nothing here issues one.
		e.Type = maintenance.TypeTerminate
	case CodeSystemMaintenance:
		e.Type = maintenance.TypeMaintenance
	default:
		return fail("unknown Code %q", s.Code)
	}
	switch s.State {
	case StateActive:
		e.Status = maintenance.StatusScheduled
	case StateCanceled:
		e.Status = maintenance.StatusCanceled
	case StateCompleted:
		e.Status = maintenance.StatusCompleted
	default:
		return fail("unknown State %q", s.State)
	}
	var notAfter time.Time
	if s.NotBefore != "" {
		t, err := time.Parse(EventTimeLayout, s.NotBefore)
		if err != nil {
			return fail("NotBefore %q is not like %q", clip(s.NotBefore), EventTimeLayout)
		}
		e.NotBefore, e.Deadline = t.UTC(), t.UTC()
	}
	if s.NotAfter != "" {
		t, err := time.Parse(EventTimeLayout, s.NotAfter)
		if err != nil {
			return fail("NotAfter %q is not like %q", clip(s.NotAfter), EventTimeLayout)
		}
		notAfter = t.UTC()
	}
	if !e.NotBefore.IsZero() && !notAfter.IsZero() {
		if notAfter.Before(e.NotBefore) {
			return fail("NotAfter %s is before NotBefore %s", s.NotAfter, s.NotBefore)
		}
		e.Duration = maintenance.DurationOf(notAfter.Sub(e.NotBefore))
	}
	return e, nil
}

// Event maps the rebalance recommendation: a Spot instance at raised risk of
// interruption, with no deadline. The notice time, when the signal was
// emitted, names the event.
func (r *RebalanceRecommendation) Event() (maintenance.Event, error) {
	e := maintenance.Event{Source: maintenance.SourceAWS, Type: maintenance.TypeRebalance, Status: maintenance.StatusScheduled}
	t, err := time.Parse(time.RFC3339, r.NoticeTime)
	if err != nil {
		return e, fmt.Errorf("rebalance recommendation: noticeTime %q is not RFC 3339", clip(r.NoticeTime))
	}
	e.ID = rebalancePrefix + t.UTC().Format(compactTime)
	e.Description = "Spot rebalance recommendation emitted at " + t.UTC().Format(time.RFC3339)
	return e, nil
}

// LifecycleEvent maps the Auto Scaling target lifecycle state. ok is true when
// the state means the machine is leaving (Terminated, Warmed:Terminated);
// other documented states and "" (no state) mean nothing. A state AWS does
// not document is an error, so it is reported rather than ignored.
func LifecycleEvent(state string) (e maintenance.Event, ok bool, err error) {
	e = maintenance.Event{Source: maintenance.SourceAWS, Type: maintenance.TypeTerminate, Status: maintenance.StatusScheduled}
	switch state {
	case LifecycleTerminated, LifecycleWarmedTerminated:
		e.ID = lifecyclePrefix + strings.ToLower(strings.ReplaceAll(state, ":", "-"))
		e.Description = "Auto Scaling target lifecycle state is " + state
		return e, true, nil
	case "", LifecycleInService, LifecycleDetached, LifecycleStandby,
		LifecycleWarmedHibernated, LifecycleWarmedRunning, LifecycleWarmedStopped:
		return maintenance.Event{}, false, nil
	default:
		return maintenance.Event{}, false, fmt.Errorf("target lifecycle state: unknown state %q", clip(state))
	}
}

// add puts e into obs, or rejected into obs.Rejected when the mapping
// failed (rejected wraps the mapping's error, or is nil).
func add(obs *maintenance.Observation, e maintenance.Event, rejected error) {
	var r *maintenance.RejectedError
	if errors.As(rejected, &r) && r.Err != nil {
		obs.Rejected = append(obs.Rejected, rejected)
		return
	}
	obs.Events = append(obs.Events, e)
}
