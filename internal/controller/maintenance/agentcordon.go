package maintenance

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// The agent cordons its node in the write that first reports an event that
// takes the machine away (internal/agent/cordon.go), naming that event as the
// cordon's owner. Such a cordon is the controller's to settle: it keeps it
// for the event it records when that event's action cordons, and lifts it
// when it does not (the pool says None for Preempt), so the agent's haste
// never decides more than the controller would have.

// cordonSettlement is what the controller does about a cordon its agent
// placed.
type cordonSettlement int

const (
	noAgentCordon   cordonSettlement = iota // none, or already the record's own
	keepAgentCordon                         // the recorded event cordons: the cordon passes to it
	liftAgentCordon                         // the recorded event does not: uncordon
)

// agentCordonOf says what to do about the cordon on n when its agent placed
// it: owned by an event of the report that takes the machine away, which
// is not already the recorded event's own cordon.
func agentCordonOf(n *corev1.Node, st state, report maintenance.Report) (cordonSettlement, string) {
	owner := drain.CordonedBy(n)
	id, ok := drain.MaintenanceEventOf(owner)
	if !ok {
		return noAgentCordon, ""
	}
	e, found := report.Find(id)
	if !found || !e.Type.NodeGoesAway() {
		return noAgentCordon, ""
	}
	if cordons(st) {
		if id == st.Event {
			return noAgentCordon, ""
		}
		return keepAgentCordon, id
	}
	return liftAgentCordon, id
}

// cordons reports whether the recorded event's action keeps the node
// cordoned.
func cordons(st state) bool {
	return !st.OptIn && (st.Action == ActionCordon || st.Action == ActionDrain)
}

// settleAgentCordon applies agentCordonOf to n in memory, for a caller that
// writes n back: the cordon passes to the recorded event, or is lifted. It
// returns what it did and for which event the agent had cordoned.
func settleAgentCordon(n *corev1.Node, st state, report maintenance.Report, now time.Time) (cordonSettlement, string) {
	what, id := agentCordonOf(n, st, report)
	switch what {
	case keepAgentCordon:
		n.Annotations[drain.AnnotationCordonedBy] = drain.MaintenanceOwner(st.Event)
	case liftAgentCordon:
		if lifted, err := drain.Uncordon(n, drain.MaintenanceOwner(id), now); err != nil || !lifted {
			return noAgentCordon, "" // a drain holds the node: the next pass looks again
		}
	}
	return what, id
}

// settleAgentCordonNow settles, in a write of its own, an agent's cordon that
// the event being recorded did not settle in its own write (the recorded
// event stays, and the agent cordoned for another).
func (c *Controller) settleAgentCordonNow(ctx context.Context, node *corev1.Node, st state, report maintenance.Report) (*corev1.Node, error) {
	switch what, id := agentCordonOf(node, st, report); what {
	case noAgentCordon:
		return node, nil
	case liftAgentCordon:
		if lifted, err := drain.Uncordon(node.DeepCopy(), drain.MaintenanceOwner(id), c.clock.Now()); err != nil || !lifted {
			return node, nil // a drain holds the node: looked at again when its claim changes
		}
	}
	var what cordonSettlement
	var id string
	updated, err := c.updateState(ctx, node.Name, st.Event, func(n *corev1.Node, _ *state) (bool, error) {
		what, id = settleAgentCordon(n, st, report, c.clock.Now())
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	c.announceAgentCordon(updated, st, what, id)
	return updated, nil
}

// announceAgentCordon says, in an Event and the log, what became of a cordon
// the agent placed.
func (c *Controller) announceAgentCordon(node *corev1.Node, st state, what cordonSettlement, id string) {
	switch what {
	case keepAgentCordon:
		c.recorder.Eventf(node, corev1.EventTypeNormal, "CordonStarted", "sluice: the node's agent cordoned it for event %s; the cordon now belongs to %s event %s", id, st.Type, st.Event)
		c.opts.Log.Info("agent's cordon kept", "node", node.Name, "cordonedFor", id, "event", st.Event)
	case liftAgentCordon:
		c.recorder.Eventf(node, corev1.EventTypeNormal, "Uncordoned", "sluice: the node's agent cordoned it for event %s; %s event %s calls for no cordon (action %s), so sluice uncordoned it", id, st.Type, st.Event, st.Action)
		c.opts.Log.Info("agent's cordon lifted", "node", node.Name, "cordonedFor", id, "event", st.Event, "action", st.Action)
	}
}
