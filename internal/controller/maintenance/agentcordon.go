package maintenance

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// The agent cordons its node in the write that first reports an event that
// takes the machine away (internal/agent/cordon.go), naming that event as the
// cordon's owner. Such a cordon is the controller's to settle: it keeps it
// for the event it records when that event's action cordons, lifts it when
// it does not (the pool says None for Preempt), and lifts it once the event
// is over if no record ever took it (the controller was down for the whole
// event, or the event ended before it looked), so the agent's haste never
// decides more than the controller would have.

// cordonSettlement is what the controller does about a cordon its agent
// placed.
type cordonSettlement int

const (
	noAgentCordon      cordonSettlement = iota // none, or already the record's own
	keepAgentCordon                            // the recorded event cordons: the cordon passes to it
	liftAgentCordon                            // the recorded event does not: uncordon
	liftOrphanedCordon                         // its event is over and no record owns it: uncordon once Ready
)

// claimRetry is how soon a lift a drain's claim held back is tried again:
// a claim is renewed every 10 s and lapses 30 s after its last renewal.
const claimRetry = 10 * time.Second

// errNothingToSettle ends a write that found nothing left to settle.
var errNothingToSettle = errors.New("no agent's cordon to settle")

// agentCordonOf says what to do about a cordon on n owned by a maintenance
// event (maintenance/<id>) that is not already the record's own: recorded
// says whether st is the node's record (being written, or on the node).
// The report is read from n itself, so a retried write judges the node it
// is about to change.
func agentCordonOf(n *corev1.Node, st state, recorded bool) (cordonSettlement, string) {
	id, ok := ownership.MaintenanceEventOf(ownership.CordonedBy(n))
	if !ok {
		return noAgentCordon, ""
	}
	report, _, err := maintenance.ReportOf(n)
	if err != nil {
		return noAgentCordon, "" // unreadable: act on nothing
	}
	e, found := report.Find(id)
	switch {
	case recorded && id == st.Event:
		if found && e.Active() && e.Type.NodeGoesAway() && !cordons(st) {
			return liftAgentCordon, id // the agent's, for an event the pool leaves alone
		}
		return noAgentCordon, "" // the record's own: finish takes it back
	case found && e.Active():
		switch {
		case !recorded || !e.Type.NodeGoesAway():
			return noAgentCordon, "" // the write that records an event settles it
		case cordons(st):
			return keepAgentCordon, id
		default:
			return liftAgentCordon, id
		}
	case recorded && cordons(st):
		return keepAgentCordon, id // over, but the recorded event wants the node cordoned
	default:
		// Over, and no record owns it: the controller's own cordons go with
		// their record (finish removes both in one write), so this one is
		// the agent's, left by an event the controller never recorded.
		return liftOrphanedCordon, id
	}
}

// cordons reports whether the recorded event keeps the node cordoned: its
// action cordons, or it is a Freeze whose opted-in pods are being moved.
func cordons(st state) bool {
	if st.OptIn {
		return st.Phase != PhaseObserved
	}
	return st.Action == ActionCordon || st.Action == ActionDrain
}

// settleAgentCordon applies agentCordonOf to n in memory, for a caller that
// writes n back: the cordon passes to the recorded event, or is lifted. It
// returns what it did and for which event the agent had cordoned
// (noAgentCordon when a drain's claim keeps the node cordoned for now).
func settleAgentCordon(n *corev1.Node, st state, recorded bool, now time.Time) (cordonSettlement, string) {
	what, id := agentCordonOf(n, st, recorded)
	switch what {
	case keepAgentCordon:
		n.Annotations[contract.AnnotationCordonedBy] = ownership.MaintenanceOwner(st.Event)
	case liftOrphanedCordon:
		if !budget.NodeReady(n) {
			return noAgentCordon, "" // as finish: back in service once Ready
		}
		fallthrough
	case liftAgentCordon:
		if lifted, err := ownership.Uncordon(n, ownership.MaintenanceOwner(id), now); err != nil || !lifted {
			return noAgentCordon, ""
		}
	}
	return what, id
}

// settleAgentCordonNow settles, in a write of its own, an agent's cordon that
// no record's write settles: the recorded event stays and the agent cordoned
// for another, or the agent's event is over. It returns how soon to look
// again when a drain's claim holds the lift back.
func (c *Controller) settleAgentCordonNow(ctx context.Context, node *corev1.Node, st state, recorded bool) (*corev1.Node, time.Duration, error) {
	what, id := agentCordonOf(node, st, recorded)
	switch what {
	case noAgentCordon:
		return node, 0, nil
	case liftOrphanedCordon:
		if !budget.NodeReady(node) {
			return node, 0, nil // as finish: back in service once Ready; the node's own update wakes us
		}
	}
	if what != keepAgentCordon {
		if lifted, err := ownership.Uncordon(node.DeepCopy(), ownership.MaintenanceOwner(id), c.clock.Now()); err != nil || !lifted {
			return node, claimRetry, nil // a drain holds the node
		}
	}
	var did cordonSettlement
	var didFor string
	change := func(n *corev1.Node) error {
		if did, didFor = settleAgentCordon(n, st, recorded, c.clock.Now()); did == noAgentCordon {
			return errNothingToSettle
		}
		return nil
	}
	var updated *corev1.Node
	var err error
	if recorded {
		updated, err = c.updateState(ctx, node.Name, st.Event, func(n *corev1.Node, _ *state) (bool, error) { return true, change(n) })
	} else {
		updated, err = c.update(ctx, node.Name, change)
	}
	switch {
	case errors.Is(err, errNothingToSettle), errors.Is(err, errStale):
		return node, 0, nil // the node moved on meanwhile; its update brings us back
	case err != nil:
		return nil, 0, err
	}
	c.announceAgentCordon(updated, st, did, didFor)
	return updated, 0, nil
}

// announceAgentCordon says, in an Event and the log, what became of a cordon
// the agent placed.
func (c *Controller) announceAgentCordon(node *corev1.Node, st state, what cordonSettlement, id string) {
	if what == liftAgentCordon || what == liftOrphanedCordon {
		if c.opts.Metrics != nil {
			c.opts.Metrics.Uncordons.Inc()
		}
	}
	switch what {
	case keepAgentCordon:
		c.recorder.Eventf(node, corev1.EventTypeNormal, "CordonStarted", "sluice: the node's agent cordoned it for event %s; the cordon now belongs to %s event %s", id, st.Type, st.Event)
		c.opts.Log.Info("agent's cordon kept", "node", node.Name, "cordonedFor", id, "event", st.Event)
	case liftAgentCordon:
		c.recorder.Eventf(node, corev1.EventTypeNormal, "Uncordoned", "sluice: the node's agent cordoned it for event %s; %s event %s calls for no cordon (action %s), so sluice uncordoned it", id, st.Type, st.Event, st.Action)
		c.opts.Log.Info("agent's cordon lifted", "node", node.Name, "cordonedFor", id, "event", st.Event, "action", st.Action)
	case liftOrphanedCordon:
		c.recorder.Eventf(node, corev1.EventTypeNormal, "Uncordoned", "sluice: the node's agent cordoned it for event %s, which is over without sluice having acted on it; the node is Ready: back in service", id)
		c.opts.Log.Info("agent's cordon lifted: its event is over", "node", node.Name, "cordonedFor", id)
	}
}
