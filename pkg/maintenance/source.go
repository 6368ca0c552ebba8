package maintenance

import (
	"context"
	"time"
)

// DefaultPollInterval is how often a polling source asks its metadata
// service: once per second, as Azure recommends for Scheduled Events.
const DefaultPollInterval = time.Second

// Observation is what a source saw at one moment: every maintenance event
// currently announced for this machine. An event missing from a later
// observation may be over: the agent takes it as over once its end is
// confirmed (see EndConfirmation).
type Observation struct {
	Events []Event
	// Rejected lists parts of the answer that could not be read (a bad
	// timestamp, an unknown type). They cause no action and never hide the
	// events that could be read.
	Rejected []error
}

// A Watcher watches one machine's metadata service. (Each cloud's package
// calls its implementation Source; the type Source above names where an
// event came from.)
//
// Next returns the machine's current events. The first call answers at once;
// later calls return when the source may have seen a change: after its poll
// interval for a polling source, when a long poll answers for one that blocks.
// An error means nothing could be read this time: the caller keeps what it
// knew, because a failing metadata service is not the end of an event.
type Watcher interface {
	Next(ctx context.Context) (Observation, error)
}

// An Approver can tell the platform to start an event now, once the node has
// been drained (Azure's StartRequests). Sources without such a call do not
// implement it.
type Approver interface {
	Approve(ctx context.Context, eventID string) error
}
