package aws

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

var _ maintenance.Watcher = (*Source)(nil)

// Source polls one instance's metadata service; it is a
// maintenance.Watcher. AWS has no call to start an event early, so it is no
// maintenance.Approver. Next must not be called concurrently.
type Source struct {
	client   *Client
	clk      clock.Clock
	interval time.Duration
	last     time.Time // when the previous poll began; zero before the first
	held     maintenance.Holder
}

// NewSource returns a source that polls through c every interval
// (DefaultPollInterval when not positive), measured on clk (the real clock
// when nil).
func NewSource(c *Client, clk clock.Clock, interval time.Duration) *Source {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Source{client: c, clk: clk, interval: interval}
}

// Next reads the four documents once and returns what they announce. The
// first call answers at once; a later one first waits until interval has
// passed since the previous poll began, failed or not. A known event that a
// rejected entry may be stays in the observation as last read.
func (s *Source) Next(ctx context.Context) (maintenance.Observation, error) {
	if !s.last.IsZero() {
		if wait := s.last.Add(s.interval).Sub(s.clk.Now()); wait > 0 {
			t := s.clk.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return maintenance.Observation{}, ctx.Err()
			case <-t.C():
			}
		}
	}
	s.last = s.clk.Now()
	obs, err := s.client.Observe(ctx)
	if err != nil {
		return maintenance.Observation{}, err
	}
	return s.held.Hold(obs), nil
}
