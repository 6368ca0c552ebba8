package maintenance

import (
	"errors"
	"slices"
	"strings"
)

// RejectedError is one part of a metadata answer that could not be read: an
// entry of a list, or one key's value (a bad timestamp, an unknown type,
// garbage). It is reported and skipped; it never hides the parts that could
// be read, and never ends an event that was known (see Holder).
type RejectedError struct {
	// Part names what was rejected, in the source's own terms, such as
	// `event "A1"` or `instance/maintenance-event`; empty when Err already
	// says.
	Part string
	// Err says why.
	Err error
	// covers reports whether the part may have been the event with the
	// given ID; nil means it may have been any.
	covers func(id string) bool
}

// Reject reports part as unreadable. ids are the events the part may have
// announced; with none, it may have been any.
func Reject(part string, err error, ids ...string) error {
	r := &RejectedError{Part: part, Err: err}
	if len(ids) > 0 {
		ids = slices.Clone(ids)
		r.covers = func(id string) bool { return slices.Contains(ids, id) }
	}
	return r
}

// RejectPrefix reports part as unreadable; it may have announced any event
// whose ID begins with prefix.
func RejectPrefix(part string, err error, prefix string) error {
	return &RejectedError{Part: part, Err: err, covers: func(id string) bool { return strings.HasPrefix(id, prefix) }}
}

func (r *RejectedError) Error() string {
	if r.Part == "" {
		return r.Err.Error()
	}
	return r.Part + ": " + r.Err.Error()
}

func (r *RejectedError) Unwrap() error { return r.Err }

// Covers reports whether the part may have been the event with this ID.
func (r *RejectedError) Covers(id string) bool { return r.covers == nil || r.covers(id) }

// mayHide reports whether a rejected part, of any kind, may be the event id.
// An error that is no RejectedError may have been anything.
func mayHide(err error, id string) bool {
	var r *RejectedError
	if errors.As(err, &r) {
		return r.Covers(id)
	}
	return true
}

// Holder keeps a watcher's known events alive through answers it cannot
// fully read: an event it reported before and is missing now stays, as it
// was last read, while a rejected part of the answer may be that event. So a
// transient garbage answer never ends an event (and never puts a node back
// into service mid-event); the event ends once the answer is readable again
// and does not list it. The zero Holder is ready; it is not safe for
// concurrent use.
type Holder struct {
	known []Event
}

// Hold returns obs with the known events its rejected parts may hide added
// back, and remembers the result for the next call.
func (h *Holder) Hold(obs Observation) Observation {
	for _, e := range h.known {
		if slices.ContainsFunc(obs.Events, func(o Event) bool { return o.ID == e.ID }) {
			continue
		}
		if slices.ContainsFunc(obs.Rejected, func(err error) bool { return mayHide(err, e.ID) }) {
			obs.Events = append(obs.Events, e)
		}
	}
	h.known = slices.Clone(obs.Events)
	return obs
}
