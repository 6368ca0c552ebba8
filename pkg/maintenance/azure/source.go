package azure

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Source polls Scheduled Events for one VM and approves its events.
type Source struct {
	client   *Client
	vm       string
	clock    clock.Clock
	interval time.Duration
	last     time.Time
	held     maintenance.Holder
}

var (
	_ maintenance.Watcher  = (*Source)(nil)
	_ maintenance.Approver = (*Source)(nil)
)

// NewSource watches the events that name vm (see VMName), polling every
// interval (maintenance.DefaultPollInterval when zero).
func NewSource(c *Client, vm string, clk clock.Clock, interval time.Duration) *Source {
	if interval <= 0 {
		interval = maintenance.DefaultPollInterval
	}
	return &Source{client: c, vm: vm, clock: clk, interval: interval}
}

// Next waits out the rest of the poll interval, then reads the document. An
// entry it cannot read is rejected; a known event that entry may be stays
// in the observation as last read.
func (s *Source) Next(ctx context.Context) (maintenance.Observation, error) {
	if !s.last.IsZero() {
		if wait := s.interval - s.clock.Since(s.last); wait > 0 {
			t := s.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return maintenance.Observation{}, ctx.Err()
			case <-t.C():
			}
		}
	}
	s.last = s.clock.Now()
	doc, err := s.client.Document(ctx)
	if err != nil {
		return maintenance.Observation{}, err
	}
	events, rejected := doc.EventsFor(s.vm)
	return s.held.Hold(maintenance.Observation{Events: events, Rejected: rejected}), nil
}

// Approve tells the platform it may start the event now.
func (s *Source) Approve(ctx context.Context, eventID string) error {
	return s.client.Approve(ctx, eventID)
}
