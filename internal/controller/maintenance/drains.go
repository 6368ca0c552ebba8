package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/drain"
)

// startDrain drains the node for the recorded event in the background, with
// the event's deadline; the outcome is written back onto the record.
func (c *Controller) startDrain(ctx context.Context, name string, st state, policy Policy) error {
	opts := drain.Options{
		IgnoreDaemonSets: true,
		// The machine is going (or its disks are): pods with local data or
		// no controller lose nothing more by leaving than by staying.
		DeleteEmptyDirData: true,
		Force:              true,
		OnDeadline:         policy.OnDeadline(),
		Holder:             c.opts.Identity,
		Last:               c.opts.Self,
	}
	if st.OptIn {
		opts.PodFilter = optedIn
	}
	now := c.clock.Now()
	if st.Deadline != nil {
		// A deadline already (nearly) past still gets a moment, so pods are
		// asked to leave rather than left to be killed with the machine.
		opts.Deadline = *st.Deadline
		if minimum := now.Add(minDrainWindow); opts.Deadline.Before(minimum) {
			opts.Deadline = minimum
		}
	}
	d, err := drain.New(c.client, c.clock, opts, drain.Hooks{Recorder: c.recorder})
	if err != nil {
		return fmt.Errorf("configuring the drain of %s: %w", name, err)
	}
	dctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.drains[name] = &running{event: st.Event, cancel: cancel}
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		report, err := d.Drain(dctx, []string{name})
		if dctx.Err() != nil {
			c.count(st, "Canceled")
			return // stopped (and forgotten) by stopDrain: the event ended or was superseded
		}
		// The outcome is on the node before the drain stops counting as
		// running, so no reconcile in between can mistake it for one that
		// died with a previous controller and start it again.
		c.drainEnded(ctx, name, st, report, err)
		c.mu.Lock()
		if r := c.drains[name]; r != nil && r.event == st.Event {
			delete(c.drains, name)
		}
		c.mu.Unlock()
		c.queue.Add(name)
	}()
	c.opts.Log.Info("draining for maintenance", "node", name, "id", st.Event, "type", st.Type, "deadline", opts.Deadline, "optIn", st.OptIn)
	return nil
}

// minDrainWindow is the least time a drain is given.
const minDrainWindow = 2 * time.Second

func (c *Controller) drainEnded(ctx context.Context, name string, st state, report *drain.Report, err error) {
	outcome := drain.NodeFailed
	msg := ""
	if err != nil {
		msg = err.Error()
	} else if len(report.Nodes) == 1 {
		outcome, msg = report.Nodes[0].Outcome, report.Nodes[0].Message
	}
	c.count(st, string(outcome))
	now := c.clock.Now()
	var left float64
	if st.Deadline != nil {
		left = st.Deadline.Sub(now).Seconds()
	}
	if c.opts.Metrics != nil && report != nil {
		c.opts.Metrics.DrainDuration.Observe(report.FinishedAt.Sub(report.StartedAt).Seconds())
		if st.Deadline != nil {
			c.opts.Metrics.TimeLeft.Observe(left)
		}
	}
	phase := PhaseDrained
	var blocked *time.Time
	if outcome != drain.NodeDrained {
		phase = PhaseBlocked
		t := now
		blocked = &t
		c.opts.Log.Error("maintenance drain did not finish", "node", name, "id", st.Event, "outcome", outcome, "message", msg, "blockers", blockers(report))
	} else {
		c.opts.Log.Info("maintenance drain finished", "node", name, "id", st.Event, "secondsBeforeDeadline", left)
	}
	if err := c.setPhase(ctx, name, st.Event, phase, blocked); err != nil && !errors.Is(err, errStale) {
		c.opts.Log.Error("recording the drain's outcome", "node", name, "err", err)
	}
}

func (c *Controller) count(st state, outcome string) {
	if c.opts.Metrics != nil {
		c.opts.Metrics.Drains.WithLabelValues(string(st.Type), outcome).Inc()
	}
}

// blockers summarizes the pods still on the node and why.
func blockers(report *drain.Report) string {
	if report == nil || len(report.Nodes) == 0 {
		return ""
	}
	var parts []string
	for _, p := range report.Nodes[0].Pods {
		if p.Outcome == drain.PodBlocked || p.Outcome == drain.PodFailed || p.Outcome == drain.PodNotEvicted {
			parts = append(parts, fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, p.Reason))
		}
	}
	return strings.Join(parts, "; ")
}

// draining reports whether a drain for the event runs on the node.
func (c *Controller) draining(name, event string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.drains[name]
	return r != nil && r.event == event
}

// stopDrain cancels the node's drain, if one runs.
func (c *Controller) stopDrain(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.drains[name]; r != nil {
		r.cancel()
		delete(c.drains, name)
	}
}
