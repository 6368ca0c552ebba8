package maintenance

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/termination"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// drainKey tells one drain request for a node from another: a new event, or
// the same event with a moved deadline, is new work.
func drainKey(st state) string {
	if st.Deadline == nil {
		return st.Event
	}
	return st.Event + "@" + st.Deadline.UTC().Format(time.RFC3339)
}

// startDrain hands the node to the termination queue, to be drained for the
// recorded event by its deadline; the outcome is written back onto the record.
func (c *Controller) startDrain(node *corev1.Node, st state, policy Policy) error {
	name := node.Name
	// Pods a person opted in to eviction before a Freeze go whatever they are.
	force := policy.ForceEvict(st.Type) || st.OptIn
	opts := drain.Options{
		IgnoreDaemonSets:   true,
		DeleteEmptyDirData: force,
		Force:              force,
		OnDeadline:         policy.OnDeadline(),
		Last:               c.opts.Self,
		CordonOwner:        ownership.MaintenanceOwner(st.Event),
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
	req := termination.Request{Node: name, Pool: policy.Pool, Reason: termination.ReasonMaintenance, Key: drainKey(st), Involuntary: true, Options: opts,
		Done:     func(report *drain.Report, err error) { c.drainEnded(name, st, report, err) },
		Released: func() { c.wakeNode(name) }}
	admission, err := c.queue.Submit(req)
	if err != nil {
		return err
	}
	if admission == termination.Started {
		forcing := "pods without a controller and pods with emptyDir data are left in place and reported (NodePool spec.maintenance.forceEvict)"
		if force {
			forcing = "pods without a controller and pods with emptyDir data are evicted too, as the machine takes them anyway (NodePool spec.maintenance.forceEvict)"
		}
		c.recorder.Eventf(node, corev1.EventTypeNormal, "MaintenanceDrain",
			"sluice: draining for %s event %s; %s", st.Type, st.Event, forcing)
		c.opts.Log.Info("draining for maintenance", "node", name, "id", st.Event, "type", st.Type, "deadline", opts.Deadline, "optIn", st.OptIn, "force", force)
	}
	return nil
}

// minDrainWindow is the least time a drain is given.
const minDrainWindow = 2 * time.Second

// drainEnded records a drain's outcome on the node's record. Every pod that
// did not leave is named with its reason in the log (the node's Event from
// the drain engine names them too).
func (c *Controller) drainEnded(name string, st state, report *drain.Report, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	outcome := drain.NodeFailed
	msg := ""
	var left []drain.PodReport
	if err != nil {
		msg = err.Error()
	} else if len(report.Nodes) == 1 {
		outcome, msg, left = report.Nodes[0].Outcome, report.Nodes[0].Message, report.Nodes[0].Left()
	}
	c.count(st, string(outcome))
	if st.Deadline != nil && err == nil {
		// A drain that could not run says nothing of the pods: what an
		// earlier one left stays counted.
		c.stranded.record(name, st.Event, *st.Deadline, left)
	}
	now := c.clock.Now()
	var timeLeft float64
	if st.Deadline != nil {
		timeLeft = st.Deadline.Sub(now).Seconds()
	}
	if c.opts.Metrics != nil && report != nil {
		c.opts.Metrics.DrainDuration.Observe(report.FinishedAt.Sub(report.StartedAt).Seconds())
		if st.Deadline != nil {
			c.opts.Metrics.TimeLeft.Observe(timeLeft)
		}
	}
	phase := PhaseDrained
	var blocked *time.Time
	if outcome != drain.NodeDrained {
		phase = PhaseBlocked
		t := now
		blocked = &t
		c.opts.Log.Error("maintenance drain did not finish", "node", name, "id", st.Event, "outcome", outcome, "message", msg,
			"blockers", drain.Summary(left, 20))
	} else {
		c.opts.Log.Info("maintenance drain finished", "node", name, "id", st.Event, "secondsBeforeDeadline", timeLeft)
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
