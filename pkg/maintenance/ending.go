package maintenance

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/clock"
)

// EndConfirmation says when an event the metadata service no longer announces
// is over. No cloud says so otherwise: Azure documents that no Completed
// status is ever provided and a finished event is simply no longer returned,
// AWS's spot/instance-action answers 404 once no action is pending, and GCP's
// maintenance-event goes back to NONE. One readable answer without the event
// cannot tell an end from a service that lost it for a moment (a backend
// failing over, a flapping document), and ending it would put the node back
// into service mid-event and take it out again when the event comes back. So
// an event is over only once Answers readable answers in a row, spanning For,
// have gone without it.
type EndConfirmation struct {
	// Answers is how many readable answers in a row must go without the
	// event.
	Answers int
	// For is how long those answers must span, from the first without the
	// event to the one that ends it.
	For time.Duration
}

// DefaultEndConfirmation is two answers and ten seconds. At Azure's one-second
// poll that is eleven answers; at AWS's five seconds, three.
var DefaultEndConfirmation = EndConfirmation{Answers: 2, For: 10 * time.Second}

// Validate says what is wrong with c, if anything.
func (c EndConfirmation) Validate() error {
	var errs []error
	if c.Answers < 1 {
		errs = append(errs, fmt.Errorf("end confirmation: %d answers; use 1 or more", c.Answers))
	}
	if c.For < 0 {
		errs = append(errs, fmt.Errorf("end confirmation: %s; use 0s or more", c.For))
	}
	return errors.Join(errs...)
}

// EndConfirmer keeps each known event in the observations, as it was last
// read, until its end is confirmed (see EndConfirmation). It only ever adds
// events back: an event an answer lists passes at once, so a new notice (a
// preemption, say) is never held back or hidden. It is not safe for
// concurrent use.
type EndConfirmer struct {
	clock clock.PassiveClock
	rule  EndConfirmation
	known map[string]*absence
}

// absence is what the confirmer knows of one event.
type absence struct {
	event   Event
	missing int       // readable answers in a row without the event
	since   time.Time // when the first of them came
}

// NewEndConfirmer confirms ends by rule, measured on clk.
func NewEndConfirmer(clk clock.PassiveClock, rule EndConfirmation) *EndConfirmer {
	return &EndConfirmer{clock: clk, rule: rule, known: map[string]*absence{}}
}

// Seed makes events known as if the last answer had listed them: the report
// a restarted agent finds on its node, so a restart in the middle of a flap
// does not end what the agent reported before.
func (c *EndConfirmer) Seed(events []Event) {
	for _, e := range events {
		if _, ok := c.known[e.ID]; !ok {
			c.known[e.ID] = &absence{event: e}
		}
	}
}

// Confirm returns obs with every known event it does not list added back, as
// last read, until that event's end is confirmed; kept names those. An event
// obs lists again starts over. An answer with a part that could not be read
// (obs.Rejected) confirms no end and starts the count over: the missing
// event may be in that part, and the answers that end an event come in a
// row.
func (c *EndConfirmer) Confirm(obs Observation) (confirmed Observation, kept []string) {
	now := c.clock.Now()
	listed := map[string]bool{}
	for _, e := range obs.Events {
		listed[e.ID] = true
		c.known[e.ID] = &absence{event: e}
	}
	obs.Events = slices.Clone(obs.Events)
	for id, a := range c.known {
		if listed[id] {
			continue
		}
		if len(obs.Rejected) > 0 {
			a.missing = 0 // the row of answers without it is broken
			obs.Events = append(obs.Events, a.event)
			kept = append(kept, id)
			continue
		}
		if a.missing == 0 {
			a.since = now
		}
		a.missing++
		if a.missing >= c.rule.Answers && now.Sub(a.since) >= c.rule.For {
			delete(c.known, id)
			continue
		}
		obs.Events = append(obs.Events, a.event)
		kept = append(kept, id)
	}
	slices.Sort(kept)
	return obs, kept
}

// Interrupt records an answer that could not be read at all: the answers
// that end an event come in a row, so every count starts over. A metadata
// service that keeps failing ends nothing.
func (c *EndConfirmer) Interrupt() {
	for _, a := range c.known {
		a.missing = 0
	}
}
