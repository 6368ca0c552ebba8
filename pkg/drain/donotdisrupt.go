package drain

import (
	"fmt"
	"time"
)

// Hold is what a sluice.dev/do-not-disrupt value says, read once for every
// reader: the drain, the NodePool controller, status, explain and doctor.
type Hold struct {
	// Holds: the pod (or node) may not be disrupted now.
	Holds bool
	// Until is when a duration's hold ends; zero while it holds for good
	// (true, an unreadable value, or a duration whose start is not known
	// yet).
	Until time.Time
	// Unreadable: the value is neither true, false nor a duration. An
	// opt-out sluice cannot read still holds: overriding it could lose what
	// it protects, and the message says how to correct it.
	Unreadable bool
	// Unstarted: a duration whose start (a pod's start time, a node's
	// creation) is not known yet; it holds until it is.
	Unstarted bool
}

// DoNotDisrupt reads a do-not-disrupt value: "" and "false" do not hold;
// "true" holds; a duration such as 2h holds until it has passed since since
// (a pod's start, a node's creation; zero when not known); anything else
// holds, as unreadable.
func DoNotDisrupt(value string, since, now time.Time) Hold {
	switch value {
	case "", "false":
		return Hold{}
	case "true":
		return Hold{Holds: true}
	}
	d, err := time.ParseDuration(value)
	switch {
	case err != nil || d < 0:
		return Hold{Holds: true, Unreadable: true}
	case since.IsZero():
		return Hold{Holds: true, Unstarted: true}
	}
	until := since.Add(d)
	if !now.Before(until) {
		return Hold{}
	}
	return Hold{Holds: true, Until: until}
}

// describe is the hold as a drain reports it, for the annotation key.
func (h Hold) describe(key, value string) string {
	switch {
	case h.Unreadable:
		return fmt.Sprintf("annotated %s=%q, which is neither true nor a duration such as 2h, so it holds the pod until the value is corrected", key, value)
	case h.Unstarted:
		return fmt.Sprintf("annotated %s=%s and has not started yet, so it holds the pod until it has run that long", key, value)
	case !h.Until.IsZero():
		return fmt.Sprintf("annotated %s=%s: held until %s", key, value, h.Until.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("annotated %s=%s", key, value)
}
