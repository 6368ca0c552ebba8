package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// TaintEffect is PreferNoSchedule: the cordon already keeps new pods off the
// node, and a NoSchedule taint would also keep off the DaemonSet pods a
// drain leaves in place (a CNI or log agent rolled out during the event),
// which tolerate the cordon but not a taint they have never heard of.
const TaintEffect = corev1.TaintEffectPreferNoSchedule

// Labels by which pods opt in to eviction before a Freeze: sluice's own, and
// AKS's, so workloads labelled for AKS node auto-drain keep working.
const (
	labelAKSEvictOnFreeze = "remediator.kubernetes.azure.com/onFreeze"
)

// reconcileNode brings one node in line with its maintenance events. It
// returns how soon to look again, when a timer rather than a change should
// wake it.
func (c *Controller) reconcileNode(ctx context.Context, name string) (time.Duration, error) {
	node, err := c.load(ctx, name)
	if err != nil || node == nil {
		return 0, err
	}
	report, _, err := maintenance.ReportOf(node)
	if err != nil {
		return 0, err // unreadable: act on nothing
	}
	c.announceRejected(node, report)
	policy := c.opts.Policies.PolicyFor(ctx, node)
	st, has := stateOf(node)
	// fresh: this reconcile wrote the record, with an optimistic lock, so
	// it is the API server's current one and needs no second look.
	fresh := false
	next := strongest(report.Events, policy)
	if has {
		// The recorded event goes on while it lasts; another one takes over
		// only if its action is stronger.
		if cur, ok := report.Find(st.Event); ok && cur.Active() && (next == nil || rank(policy.ActionOf(*next)) <= rank(st.Action)) {
			next = &cur
		}
	}
	if c.opts.DryRun {
		c.wouldAct(node, next, policy)
		return 0, nil
	}
	switch {
	case next == nil && !has:
		_, requeue, err := c.settleAgentCordonNow(ctx, node, st, false)
		return requeue, err
	case next == nil:
		return c.finish(ctx, node, st)
	case !has || st.Event != next.ID:
		if node, st, err = c.adopt(ctx, node, st, has, *next, policy); err != nil {
			return 0, err
		}
		fresh = true
	case deadlineOf(*next, policy) != nil && !sameTime(st.Deadline, deadlineOf(*next, policy)):
		// The cloud gave the event a new time. (A started event has none:
		// it is happening now, and the recorded deadline stands.)
		if node, st, err = c.moveDeadline(ctx, node, st, *next, policy); err != nil {
			return 0, err
		}
		fresh = true
	}
	return c.settleAndAct(ctx, node, st, *next, report, policy, fresh)
}

// settleAndAct settles an agent's cordon the record's own write did not
// (the recorded event stays, and the agent cordoned for another), then
// carries the event's action forward.
func (c *Controller) settleAndAct(ctx context.Context, node *corev1.Node, st state, e maintenance.Event, report maintenance.Report, policy Policy, fresh bool) (time.Duration, error) {
	var requeue time.Duration
	if !fresh {
		var err error
		if node, requeue, err = c.settleAgentCordonNow(ctx, node, st, true); err != nil {
			return 0, err
		}
	}
	after, err := c.act(ctx, node, st, e, report, policy, fresh)
	return sooner(after, requeue), err
}

// sooner is the earlier of two "look again after" durations, 0 meaning never.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}

// load reads the node from the cache, or returns nil when there is nothing
// to do about it: it is gone (its drain is canceled) or being deleted.
func (c *Controller) load(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	err := c.kube.Get(ctx, types.NamespacedName{Name: name}, node)
	if apierrors.IsNotFound(err) {
		c.queue.Cancel(name)
		c.rejected.forget(name)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", name, err)
	}
	return c.forgetStaleOwner(ctx, node)
}

// forgetStaleOwner deletes the cordon owner recorded on a node that is not
// cordoned (someone ran kubectl uncordon), so a later cordon by someone else
// is never credited to the old owner.
//
// It returns nil for a node being deleted, which the controller leaves
// alone: the deletion controller drains it and deletes its machine, and
// uncordoning it, or replacing that drain with one of ours, would only fight
// it (a drain of ours already running goes on).
func (c *Controller) forgetStaleOwner(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	if !node.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	if node.Spec.Unschedulable || node.Annotations[contract.AnnotationCordonedBy] == "" {
		return node, nil
	}
	return c.update(ctx, node.Name, func(n *corev1.Node) error {
		if !n.Spec.Unschedulable {
			delete(n.Annotations, contract.AnnotationCordonedBy)
		}
		return nil
	})
}

// deadlineOf is when the drain for e must be done: the event's deadline less
// the pool's margin; nil when the event has none.
func deadlineOf(e maintenance.Event, policy Policy) *time.Time {
	if e.Deadline.IsZero() {
		return nil
	}
	// The record holds RFC 3339 times, years 0 to 9999 (in UTC, as
	// recorded): a deadline the margin pushes past either end would make
	// it unwritable, and the event adopted again on every pass. At the
	// edge it is as passed, or as far off.
	dl := e.Deadline.Add(-policy.DeadlineMargin()).UTC()
	switch {
	case dl.Before(firstRecordable):
		dl = firstRecordable
	case dl.After(lastRecordable):
		dl = lastRecordable
	}
	return &dl
}

// The first and last instants a record can hold.
var (
	firstRecordable = time.Date(0, time.January, 1, 0, 0, 0, 0, time.UTC)
	lastRecordable  = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)
)

func sameTime(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

// moveDeadline follows the cloud when it moves an event (Azure moves
// NotBefore): the record takes the new deadline, and a drain running against
// the old one is restarted against the new (the queue replaces it, since the
// deadline is part of the request's key).
func (c *Controller) moveDeadline(ctx context.Context, node *corev1.Node, st state, e maintenance.Event, policy Policy) (*corev1.Node, state, error) {
	dl := deadlineOf(e, policy)
	updated, err := c.updateState(ctx, node.Name, st.Event, func(_ *corev1.Node, cur *state) (bool, error) {
		cur.Deadline = dl
		return true, nil
	})
	if err != nil {
		return nil, st, err
	}
	old := "none"
	if st.Deadline != nil {
		old = st.Deadline.UTC().Format(time.RFC3339)
	}
	st.Deadline = dl
	when := "none"
	if dl != nil {
		when = dl.UTC().Format(time.RFC3339)
	}
	c.recorder.Eventf(updated, corev1.EventTypeNormal, "DeadlineMoved", "sluice: %s moved %s event %s: drain deadline %s (was %s)", e.Source, e.Type, e.ID, when, old)
	c.opts.Log.Info("maintenance deadline moved", "node", node.Name, "id", e.ID, "deadline", when, "was", old)
	return updated, st, nil
}

// strongest picks the active event with the strongest action, the earliest
// deadline breaking ties.
func strongest(events []maintenance.Event, policy Policy) *maintenance.Event {
	var best *maintenance.Event
	for i := range events {
		e := &events[i]
		// An event without an ID cannot be recorded or approved: one the
		// agent never writes, but a report is only as good as whoever last
		// patched the node.
		if !e.Active() || e.ID == "" {
			continue
		}
		if best == nil {
			best = e
			continue
		}
		a, b := rank(policy.ActionOf(*e)), rank(policy.ActionOf(*best))
		if a > b || a == b && earlier(e.Deadline, best.Deadline) {
			best = e
		}
	}
	return best
}

func earlier(a, b time.Time) bool {
	return !a.IsZero() && (b.IsZero() || a.Before(b))
}

// adopt records a new event on the node, replacing (and stopping the drain
// of) the event it superseded, and announces it. A cordon sluice placed for
// the superseded event passes to the new one, which will take it back; so
// does one the agent placed when it reported an event that takes the
// machine away, unless the new event calls for no cordon: then it is lifted
// (agentcordon.go).
func (c *Controller) adopt(ctx context.Context, node *corev1.Node, old state, hadOld bool, e maintenance.Event, policy Policy) (*corev1.Node, state, error) {
	if hadOld {
		c.queue.Cancel(node.Name)
	}
	st := state{Event: e.ID, Type: e.Type, Source: e.Source, Pool: policy.Pool, Action: policy.ActionOf(e), Phase: PhaseObserved, Seen: c.clock.Now(),
		Deadline: deadlineOf(e, policy), ApproveAtOnce: policy.ApproveAtOnce(e)}
	if hadOld {
		st.Tainted = old.Tainted
	}
	if e.Type == maintenance.TypeFreeze && st.Action == ActionNone && !st.ApproveAtOnce {
		st.OptIn = true
	}
	// A cordon or drain starts in the same write that records the event:
	// under a mass preemption one write per node, not two and a re-read,
	// is what keeps every cordon inside the cloud's notice.
	cordonNow := cordons(st) // a new record is Observed: a Freeze's opt-in waits for its pods
	cordoned := false
	var rec state // as written: the last attempt's
	var agent cordonSettlement
	var agentFor string
	updated, err := c.update(ctx, node.Name, func(n *corev1.Node) error {
		rec = st
		agent, agentFor = noAgentCordon, ""
		if hadOld && ownership.CordonedBy(n) == ownership.MaintenanceOwner(old.Event) {
			n.Annotations[contract.AnnotationCordonedBy] = ownership.MaintenanceOwner(st.Event)
		} else {
			agent, agentFor = settleAgentCordon(n, rec, true, c.clock.Now())
		}
		if cordonNow {
			cordoned = cordonAndTaint(n, &rec)
		}
		n.Annotations[contract.AnnotationMaintenanceState] = rec.encode()
		delete(n.Annotations, contract.AnnotationMaintenanceApprove)
		return nil
	})
	if err != nil {
		return nil, st, err
	}
	st = rec
	if c.opts.Metrics != nil {
		c.opts.Metrics.EventsSeen.WithLabelValues(string(e.Source), string(e.Type), string(st.Action)).Inc()
	}
	c.recorder.Eventf(updated, corev1.EventTypeWarning, "MaintenanceScheduled", "%s", describe(e, st, policy))
	c.opts.Log.Info("maintenance event", "node", node.Name, "id", e.ID, "type", e.Type, "source", e.Source, "action", st.Action, "pool", policy.Pool)
	if agent == liftAgentCordon || agent == liftOrphanedCordon && !cordonNow {
		c.announceAgentCordon(updated, st, agent, agentFor)
	}
	if cordonNow {
		c.cordoned(updated, st, cordoned)
	}
	return updated, st, nil
}

func describe(e maintenance.Event, st state, policy Policy) string {
	msg := fmt.Sprintf("%s %s event %s", e.Source, e.Type, e.ID)
	if e.UserInitiated() {
		msg += " (asked for by the VM's owner)"
	}
	if !e.NotBefore.IsZero() {
		msg += " not before " + e.NotBefore.UTC().Format(time.RFC3339)
	} else if e.Status == maintenance.StatusStarted {
		msg += " has started"
	}
	if e.Duration != nil {
		msg += ", impact " + e.Duration.String()
	} else if e.Source == maintenance.SourceAzure {
		msg += ", impact of unknown length"
	}
	switch {
	case st.ApproveAtOnce:
		msg += ": approving it at once and leaving the node alone (userInitiated: Approve)"
	case st.OptIn:
		msg += ": evicting the pods labelled " + contract.LabelEvictOnFreeze + " or " + labelAKSEvictOnFreeze + ", if any"
	case st.Action == ActionDrain:
		msg += ": cordon and drain"
	case st.Action == ActionCordon:
		msg += ": cordon"
	default:
		msg += ": no action"
	}
	if st.Deadline != nil && st.Action != ActionNone || st.OptIn && st.Deadline != nil {
		msg += fmt.Sprintf(", drain deadline %s (%s before the event)", st.Deadline.UTC().Format(time.RFC3339), policy.DeadlineMargin())
	}
	if policy.Pool != "" {
		msg += " (NodePool " + policy.Pool + ")"
	}
	return msg
}

// act carries the recorded event's action forward one step.
// fresh says the record was written by this reconcile.
func (c *Controller) act(ctx context.Context, node *corev1.Node, st state, e maintenance.Event, report maintenance.Report, policy Policy, fresh bool) (time.Duration, error) {
	switch {
	case st.ApproveAtOnce:
		return 0, c.approve(ctx, node, st, e, report, policy)
	case st.Action == ActionCordon:
		if st.Phase == PhaseObserved {
			return 0, c.cordon(ctx, node.Name, st, PhaseCordoned)
		}
		return 0, nil
	case st.Action == ActionDrain, st.OptIn:
		return c.drainStep(ctx, node, st, e, report, policy, fresh)
	}
	return 0, nil
}

func (c *Controller) drainStep(ctx context.Context, node *corev1.Node, st state, e maintenance.Event, report maintenance.Report, policy Policy, fresh bool) (time.Duration, error) {
	switch st.Phase {
	case PhaseObserved, PhaseDraining:
		if c.queue.Holds(node.Name, drainKey(st)) {
			return 0, nil
		}
		if st.OptIn {
			has, err := c.hasOptedInPods(node.Name)
			if err != nil || !has {
				return 0, err // a Freeze with nobody opted in changes nothing
			}
		}
		if st.Phase == PhaseObserved {
			if err := c.cordon(ctx, node.Name, st, PhaseDraining); err != nil {
				return 0, err
			}
			st.Phase = PhaseDraining
		} else if !fresh {
			if still, err := c.stillDraining(ctx, node.Name, st.Event); err != nil || !still {
				return 0, err
			}
		}
		return 0, c.startDrain(node, st, policy)
	case PhaseBlocked:
		return c.blockedStep(ctx, node, st, policy)
	case PhaseDrained:
		return 0, c.approve(ctx, node, st, e, report, policy)
	}
	return 0, nil
}

// blockedStep acts on a node whose last drain ended blocked: it waits for the
// outcome to be recorded, leaves a node past its deadline as it is, and
// otherwise drains again after BlockedRetry.
func (c *Controller) blockedStep(ctx context.Context, node *corev1.Node, st state, policy Policy) (time.Duration, error) {
	if c.queue.Holds(node.Name, drainKey(st)) {
		return time.Second, nil // its outcome is being recorded; look again then
	}
	if st.Blocked != nil && st.Deadline != nil && st.Blocked.After(*st.Deadline) {
		// The deadline has passed and a drain still could not finish: what
		// is left stays until the machine goes (or the cloud moves the
		// event, which changes the deadline and the key). A controller
		// started since counts it from the pods still there.
		if err := c.recoverStranded(ctx, node, st, policy.ForceEvict(st.Type) || st.OptIn); err != nil {
			c.opts.Log.Error("reading the pods left on a node past its deadline", "node", node.Name, "err", err)
		}
		return 0, nil
	}
	if st.Blocked != nil {
		if wait := c.opts.BlockedRetry - c.clock.Since(*st.Blocked); wait > 0 {
			return wait, nil
		}
	}
	return 0, c.setPhase(ctx, node.Name, st.Event, PhaseDraining, nil)
}

// stillDraining reads the node's record from the API server before a drain
// starts: the cache may not have the outcome of the node's last drain yet
// (written a moment ago), and this one read per drain keeps a finished step
// from being drained again.
func (c *Controller) stillDraining(ctx context.Context, name, event string) (bool, error) {
	live := &corev1.Node{}
	if err := c.live.Get(ctx, types.NamespacedName{Name: name}, live); err != nil {
		return false, fmt.Errorf("reading node %s: %w", name, err)
	}
	cur, ok := stateOf(live)
	return ok && cur.Event == event && cur.Phase == PhaseDraining, nil
}

// cordon cordons and taints the node (recording what sluice itself changed)
// and moves the record to phase, in one update.
func (c *Controller) cordon(ctx context.Context, name string, st state, phase Phase) error {
	cordoned := false
	updated, err := c.updateState(ctx, name, st.Event, func(n *corev1.Node, cur *state) (bool, error) {
		if cur.Phase != PhaseObserved && cur.Phase != PhaseCordoned && phase == PhaseDraining {
			return true, errStale // another reconcile moved the record on meanwhile
		}
		cordoned = cordonAndTaint(n, cur)
		cur.Phase = phase
		return true, nil
	})
	if err != nil {
		return err
	}
	c.cordoned(updated, st, cordoned)
	return nil
}

// cordonAndTaint cordons and taints the node in memory for the event st
// records, noting the taint on st, and moves st to the phase its action
// leads to. It reports whether sluice placed the cordon (false: someone
// else had, and it stays theirs).
func cordonAndTaint(n *corev1.Node, st *state) bool {
	// Already cordoned for this event (by its agent, or an earlier pass) is ours too.
	cordoned := ownership.Cordon(n, ownership.MaintenanceOwner(st.Event)) || ownership.CordonedBy(n) == ownership.MaintenanceOwner(st.Event)
	if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == contract.TaintMaintenance }) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: contract.TaintMaintenance, Value: string(st.Type), Effect: TaintEffect})
		st.Tainted = true
	}
	st.Phase = PhaseCordoned
	if st.Action == ActionDrain {
		st.Phase = PhaseDraining
	}
	return cordoned
}

// cordoned announces a cordon (or that someone else's was found).
func (c *Controller) cordoned(node *corev1.Node, st state, byUs bool) {
	how := "already cordoned by someone else; sluice will leave the cordon to them"
	if byUs {
		how = "cordoned"
	}
	c.recorder.Eventf(node, corev1.EventTypeNormal, "CordonStarted", "sluice: %s for %s event %s; tainted %s=%s:%s", how, st.Type, st.Event, contract.TaintMaintenance, st.Type, TaintEffect)
}

// setPhase moves the record to phase if it is still about event.
func (c *Controller) setPhase(ctx context.Context, name, event string, phase Phase, blocked *time.Time) error {
	_, err := c.updateState(ctx, name, event, func(_ *corev1.Node, cur *state) (bool, error) {
		cur.Phase = phase
		cur.Blocked = blocked
		return true, nil
	})
	return err
}

// updateState applies change to the node and to the controller's record on
// it, but only while the record is still about event; change says whether
// the record stays (false removes it).
func (c *Controller) updateState(ctx context.Context, name, event string, change func(*corev1.Node, *state) (bool, error)) (*corev1.Node, error) {
	return c.update(ctx, name, func(n *corev1.Node) error {
		cur, ok := stateOf(n)
		if !ok || cur.Event != event {
			return errStale
		}
		keep, err := change(n, &cur)
		if err != nil {
			return err
		}
		if keep {
			n.Annotations[contract.AnnotationMaintenanceState] = cur.encode()
		} else {
			delete(n.Annotations, contract.AnnotationMaintenanceState)
		}
		return nil
	})
}

// approve asks the agent to start the drained node's event early, and
// announces when it has.
func (c *Controller) approve(ctx context.Context, node *corev1.Node, st state, e maintenance.Event, report maintenance.Report, policy Policy) error {
	if st.Approved {
		return nil
	}
	if maintenance.Approved(node, st.Event) {
		_, err := c.updateState(ctx, node.Name, st.Event, func(_ *corev1.Node, cur *state) (bool, error) {
			cur.Approved = true
			return true, nil
		})
		if err != nil {
			return err
		}
		if c.opts.Metrics != nil {
			c.opts.Metrics.Approvals.Inc()
		}
		why := "the node is drained"
		if st.ApproveAtOnce {
			why = "the VM's owner asked for the event"
		}
		c.recorder.Eventf(node, corev1.EventTypeNormal, "EventApproved", "sluice: %s; the platform was told it may start %s event %s now", why, st.Type, st.Event)
		return nil
	}
	if !policy.ApproveEarly() && !st.ApproveAtOnce || !report.Approvable || e.Status != maintenance.StatusScheduled || node.Annotations[contract.AnnotationMaintenanceApprove] == st.Event {
		return nil
	}
	_, err := c.update(ctx, node.Name, func(n *corev1.Node) error {
		n.Annotations[contract.AnnotationMaintenanceApprove] = st.Event
		return nil
	})
	return err
}

// finish ends the record of an event that is over: once the node is Ready
// again it removes the taint and the cordon sluice placed, and nothing else.
func (c *Controller) finish(ctx context.Context, node *corev1.Node, st state) (time.Duration, error) {
	c.queue.Cancel(node.Name)
	if !budget.NodeReady(node) {
		c.opts.Log.Info("event over; waiting for the node to be Ready before uncordoning", "node", node.Name, "id", st.Event)
		return 0, nil // the node's own update wakes us
	}
	uncordoned := false
	updated, err := c.updateState(ctx, node.Name, st.Event, func(n *corev1.Node, cur *state) (bool, error) {
		var err error
		if uncordoned, err = ownership.Uncordon(n, ownership.MaintenanceOwner(st.Event), c.clock.Now()); err != nil {
			return true, err
		}
		if cur.Tainted {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == contract.TaintMaintenance })
		}
		delete(n.Annotations, contract.AnnotationMaintenanceApprove)
		return false, nil
	})
	if err != nil {
		return 0, err
	}
	switch {
	case uncordoned:
		if c.opts.Metrics != nil {
			c.opts.Metrics.Uncordons.Inc()
		}
		c.recorder.Eventf(updated, corev1.EventTypeNormal, "Uncordoned", "sluice: %s event %s is over and the node is Ready: back in service", st.Type, st.Event)
	case updated.Spec.Unschedulable:
		by := "someone else (a person, or another tool)"
		if owner := ownership.CordonedBy(updated); owner != "" {
			by = owner
		}
		c.recorder.Eventf(updated, corev1.EventTypeNormal, "MaintenanceEnded", "sluice: %s event %s is over; the node stays cordoned: it was cordoned by %s, not for this event", st.Type, st.Event, by)
	default:
		c.recorder.Eventf(updated, corev1.EventTypeNormal, "MaintenanceEnded", "sluice: %s event %s is over", st.Type, st.Event)
	}
	c.opts.Log.Info("maintenance over", "node", node.Name, "id", st.Event, "uncordoned", uncordoned)
	return 0, nil
}

// optedIn reports whether a pod asked to be evicted before a Freeze.
func optedIn(p *corev1.Pod) bool {
	if p.Labels[contract.LabelEvictOnFreeze] == "true" {
		return true
	}
	v, ok := p.Labels[labelAKSEvictOnFreeze]
	return ok && v != "false"
}

func (c *Controller) hasOptedInPods(node string) (bool, error) {
	if c.opts.PodsOn == nil {
		return false, errors.New("the controller was built without a view of pods")
	}
	pods, err := c.opts.PodsOn(node)
	if err != nil {
		return false, fmt.Errorf("listing pods on %s: %w", node, err)
	}
	return slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return optedIn(p) && p.DeletionTimestamp == nil }), nil
}

// wouldAct reports, under --dry-run, what the controller would do about the
// node's strongest event; the recorder's correlator keeps repeats to a
// handful of Events.
func (c *Controller) wouldAct(node *corev1.Node, next *maintenance.Event, policy Policy) {
	if next == nil {
		return
	}
	action := policy.ActionOf(*next)
	when := "no deadline"
	if d := deadlineOf(*next, policy); d != nil {
		when = "drain deadline " + d.UTC().Format(time.RFC3339)
	}
	msg := fmt.Sprintf("sluice (dry run): %s %s event %s: would take action %s (%s); nothing was changed", next.Source, next.Type, next.ID, action, when)
	c.recorder.Event(node, corev1.EventTypeNormal, "WouldAct", msg)
	c.opts.Log.Info("dry run: would act on maintenance event", "node", node.Name, "id", next.ID, "type", next.Type, "action", action, "pool", policy.Pool)
}
