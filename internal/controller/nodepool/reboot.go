package nodepool

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/termination"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// OwnerReboot is the cordon owner of a node drained to be rebooted in place:
// only that cordon is lifted once the node is back.
const OwnerReboot = "reboot"

// repairDrainBound is how long a repair drains a broken node whose kubelet
// still answers before it reboots it anyway (its pods restart with it).
const repairDrainBound = 5 * time.Minute

// rebootStep says whether the record is at one of the in-place reboot's own
// steps (a repair's first rung, or a reboot the OS asked for).
func rebootStep(rec *disruption.Record) bool {
	return rec != nil && (rec.Reason == v1alpha1.ReasonUnhealthy || rec.Reason == v1alpha1.ReasonRebootRequired) &&
		(rec.Phase == disruption.PhaseDraining || rec.Phase == disruption.PhaseRebooting)
}

// startReboot marks the node to be rebooted in place for reason: drained
// first while its kubelet answers, straight to the reboot when it does not
// (nothing could confirm an eviction).
func (c *Controller) startReboot(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, reason v1alpha1.DisruptionReason, why string, now time.Time) error {
	if c.opts.DryRun {
		c.wouldAct(n, reason, "drain the node and reboot it in place: "+why)
		return nil
	}
	at := now
	rec := disruption.Record{Reason: reason, Phase: disruption.PhaseDraining, Since: now, DrainStarted: &at, Message: why}
	if kubeletGone(n) {
		// Nothing could be drained: recorded as rebooting before the
		// provider is asked, as every step is.
		rec.Phase, rec.DrainStarted, rec.RebootedAt, rec.BootID = disruption.PhaseRebooting, nil, &at, n.Status.NodeInfo.BootID
	}
	if err := c.markChosen(ctx, pool, n, rec, now); err != nil {
		return err
	}
	c.opts.Log.Info("rebooting node in place", "node", n.Name, "nodepool", pool.Name, "reason", reason, "why", why)
	if rec.Phase == disruption.PhaseRebooting {
		c.event(n, corev1.EventTypeNormal, "RebootStarted", "sluice: "+string(reason)+": "+why+"; its kubelet is unreachable, so nothing can be drained: rebooting it in place")
		return c.askReboot(ctx, pool, n, &rec, now)
	}
	c.event(n, corev1.EventTypeNormal, "RebootStarted", "sluice: "+string(reason)+": "+why+"; draining the node, then rebooting it in place")
	return nil
}

// kubeletGone says whether the node's kubelet stopped reporting (Ready
// Unknown: the node lifecycle controller's mark of a lost kubelet).
func kubeletGone(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionUnknown
		}
	}
	return false
}

// advanceReboot moves a node being rebooted in place along: drained (or, for
// a repair, past the drain's bound), rebooted through the provider, back in
// service once Ready on a new boot with nothing wrong left; past its timeout
// it is handed to repair's replacement.
func (c *Controller) advanceReboot(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) (time.Duration, error) {
	if c.opts.DryRun || !n.DeletionTimestamp.IsZero() {
		return 0, nil
	}
	if c.rebootMovedOn(n.Name, rec, now) {
		// The cache still shows a step this controller has left: acting
		// on it again would drain a node back in service, or reboot it
		// twice.
		return launchingRecheck, nil
	}
	if rec.Phase == disruption.PhaseDraining {
		return launchingRecheck, c.rebootDrainStep(ctx, pool, n, rec, now)
	}
	rebootedAt := rec.Since // a record from before RebootedAt was kept
	if rec.RebootedAt != nil {
		rebootedAt = *rec.RebootedAt
	}
	if back, why := c.backFromReboot(pool, n, rec); back {
		return 0, c.rebooted(ctx, pool, n, rec, now)
	} else if !now.Before(rebootedAt.Add(rebootTimeout(pool, rec))) {
		return 0, c.escalate(ctx, pool, n, rec, fmt.Sprintf("it did not come back from its reboot within %s (%s)", rebootTimeout(pool, rec), why), now)
	}
	return launchingRecheck, nil
}

// rebootTimeout is how long a rebooted node has to come back.
func rebootTimeout(pool *v1alpha1.NodePool, rec *disruption.Record) time.Duration {
	if rec.Reason == v1alpha1.ReasonRebootRequired {
		return pool.Spec.Reboot.TimeoutOrDefault()
	}
	return pool.Spec.Repair.RebootTimeoutOrDefault()
}

// rebootDrainStep keeps the node's drain running; once it ended (or a
// repair's drain reached its bound) the node is rebooted.
func (c *Controller) rebootDrainStep(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) error {
	key := "reboot/" + string(n.UID)
	end := c.drainOutcome(n.Name)
	started := now
	if rec.DrainStarted != nil {
		started = *rec.DrainStarted
	}
	bounded := rec.Reason == v1alpha1.ReasonUnhealthy
	switch {
	case end.drained:
		c.forgetDrain(n.Name)
		return c.reboot(ctx, pool, n, rec, "drained", now)
	case bounded && !now.Before(started.Add(repairDrainBound)):
		if c.opts.Queue != nil && c.opts.Queue.Holds(n.Name, key) {
			c.opts.Queue.Cancel(n.Name)
		}
		c.forgetDrain(n.Name)
		return c.reboot(ctx, pool, n, rec, fmt.Sprintf("the node is broken and did not drain within %s%s; the pods still on it restart with it", repairDrainBound, end.why), now)
	}
	if c.opts.Queue == nil || c.opts.Queue.Holds(n.Name, key) || now.Before(end.retryAt) {
		return nil
	}
	name, poolName := n.Name, pool.Name
	opts := drain.Options{IgnoreDaemonSets: true, DeleteEmptyDirData: true, Force: true, CordonOwner: OwnerReboot}
	if bounded {
		opts.Deadline, opts.OnDeadline = started.Add(repairDrainBound), drain.OnDeadlineStop
	} else if grace, ok := pool.DisruptionSpec().TerminationGracePeriodOrNone(); ok {
		opts.Deadline, opts.OnDeadline = started.Add(grace), drain.OnDeadlineDelete
	}
	_, err := c.opts.Queue.Submit(termination.Request{Node: name, Pool: pool.Name, Reason: termination.Reason(rec.Reason), Key: key,
		Involuntary: bounded, Options: opts,
		Done: func(r *drain.Report, err error) { c.drainEnded(name, r, err) }, Released: func() { c.wakePool(poolName) }})
	return err
}

// reboot records the node as rebooting, with the boot it is on now (its
// return is told by a new one), then asks the provider: a controller killed
// in between finds the record and, past the timeout, replaces the node; it
// never reboots it twice.
func (c *Controller) reboot(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, why string, now time.Time) error {
	next := *rec
	at := now
	next.Phase, next.RebootedAt, next.BootID = disruption.PhaseRebooting, &at, n.Status.NodeInfo.BootID
	if err := c.setRecord(ctx, n, &next); err != nil {
		return err
	}
	c.movedOn(n.Name, rec, disruption.PhaseRebooting, now)
	c.event(n, corev1.EventTypeNormal, "Rebooting", "sluice: "+why+"; the provider is rebooting the node in place")
	return c.askReboot(ctx, pool, n, &next, now)
}

// askReboot asks the provider to reboot the node its record says is
// rebooting; a refusal hands the node to the repair's replacement.
func (c *Controller) askReboot(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) error {
	if err := c.machines.RebootMachine(ctx, pool, c.machines.MachineOf(pool, n)); err != nil {
		c.event(n, corev1.EventTypeWarning, "RebootFailed", "sluice: the provider did not reboot the node: "+err.Error())
		return c.escalate(ctx, pool, n, rec, "the provider did not reboot it: "+err.Error(), now)
	}
	c.opts.Metrics.rebooted(pool.Name, rec.Reason)
	return nil
}

// backFromReboot says whether the rebooted node serves again: on a new boot,
// Ready, with none of the pool's repair conditions and no reboot-required
// sentinel left; else what it waits for.
func (c *Controller) backFromReboot(pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record) (bool, string) {
	switch {
	case n.Status.NodeInfo.BootID == rec.BootID:
		return false, "still on its boot " + rec.BootID
	case !budget.NodeReady(n):
		return false, "not Ready"
	}
	if pool.Spec.Repair != nil {
		if h := disruption.HealthOf(pool.Spec.Repair, n, c.clock.Now()); h.Unhealthy() {
			return false, h.Describe()
		}
	}
	if _, ok := n.Annotations[contract.AnnotationRebootRequired]; ok && rec.Reason == v1alpha1.ReasonRebootRequired {
		return false, "its OS still asks for a reboot"
	}
	return true, ""
}

// rebooted puts the node back in service: lifts the reboot's cordon (never a
// person's), notes the reboot on the node's health record (broken again
// soon after, the repair replaces it), and removes the record.
func (c *Controller) rebooted(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) error {
	if err := c.patchNode(ctx, n, func(m *corev1.Node) {
		liftRebootCordon(m)
		noteRepairReboot(m, rec)
	}); err != nil {
		return err
	}
	c.movedOn(n.Name, rec, phaseDone, now)
	took := now.Sub(rec.Since).Round(time.Second)
	if rec.Reason == v1alpha1.ReasonUnhealthy {
		c.event(n, corev1.EventTypeNormal, "Repaired", fmt.Sprintf("sluice: the node is healthy again after its reboot (%s after the repair started)", took))
		c.opts.Metrics.repaired(pool.Name, v1alpha1.RepairReboot)
	} else {
		c.event(n, corev1.EventTypeNormal, "Rebooted", fmt.Sprintf("sluice: the node is back in service after its reboot (%s)", took))
	}
	c.opts.Log.Info("node back from its reboot", "node", n.Name, "nodepool", pool.Name, "reason", rec.Reason, "took", took)
	return c.setRecord(ctx, n, nil)
}

// escalate hands a node the reboot did not mend to repair's next rung: its
// replacement, replacement first, counted as Unhealthy (a reboot the OS
// asked for that did not come back is replaced whatever the pool's repair
// says). A pool whose breaker holds waits. A repair whose ladder has no
// Replace ends here: the reboot's cordon lifted, the reboot noted (the
// ladder does not start again), the node left as it is, and said so.
func (c *Controller) escalate(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, why string, now time.Time) error {
	if halt := c.halted(pool.Name); halt != "" {
		return nil
	}
	if rec.Reason == v1alpha1.ReasonUnhealthy && pool.Spec.Repair != nil && !slices.Contains(pool.Spec.Repair.StepsOrDefault(), v1alpha1.RepairReplace) {
		if err := c.patchNode(ctx, n, func(m *corev1.Node) {
			liftRebootCordon(m)
			noteRepairReboot(m, rec)
		}); err != nil {
			return err
		}
		c.movedOn(n.Name, rec, phaseDone, now)
		c.event(n, corev1.EventTypeWarning, "RepairExhausted", "sluice: "+why+"; the pool's repair ladder has no Replace step, so the node is left as it is: repair it by hand")
		return c.setRecord(ctx, n, nil)
	}
	c.movedOn(n.Name, rec, phaseDone, now)
	c.event(n, corev1.EventTypeWarning, "RepairEscalated", "sluice: "+why+"; replacing the node")
	next := disruption.Record{Reason: v1alpha1.ReasonUnhealthy, Phase: disruption.PhaseLaunching, Since: now, Message: why}
	return c.launchFor(ctx, pool, n, next, now)
}

// liftRebootCordon uncordons a node the reboot's drain cordoned (never a
// person's or another owner's cordon).
func liftRebootCordon(m *corev1.Node) {
	if ownership.CordonedBy(m) == OwnerReboot {
		m.Spec.Unschedulable = false
		delete(m.Annotations, contract.AnnotationCordonedBy)
	}
}

// noteRepairReboot notes a repair's reboot beside the node's health record
// (contract.AnnotationRepairRebooted), which the record's own writes never
// touch: broken again while that record lasts, the next step is not a
// reboot.
func noteRepairReboot(m *corev1.Node, rec *disruption.Record) {
	if rec.Reason != v1alpha1.ReasonUnhealthy {
		return
	}
	at := rec.Since
	if rec.RebootedAt != nil {
		at = *rec.RebootedAt
	}
	setAnnotation(m, contract.AnnotationRepairRebooted, at.UTC().Format(time.RFC3339))
}

// phaseDone is a reboot record this controller has finished with (back in
// service, or handed to a replacement).
const phaseDone disruption.Phase = "Done"

// rebootProgress is how far this controller moved a node's reboot record
// (known by its Since), and when.
type rebootProgress struct {
	since time.Time
	phase disruption.Phase
	at    time.Time
}

// rebootRank orders a reboot record's steps.
func rebootRank(p disruption.Phase) int {
	switch p {
	case disruption.PhaseDraining:
		return 1
	case disruption.PhaseRebooting:
		return 2
	case phaseDone:
		return 3
	}
	return 0
}

// movedOn notes that this controller moved the node's reboot record to
// phase, until the cache shows it (markWait at most).
func (c *Controller) movedOn(node string, rec *disruption.Record, phase disruption.Phase, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reboots[node] = rebootProgress{since: rec.Since, phase: phase, at: now}
	for name, p := range c.reboots {
		if now.Sub(p.at) > markWait {
			delete(c.reboots, name)
		}
	}
}

// rebootMovedOn says whether this controller already moved the node's
// reboot record past the step the cache shows.
func (c *Controller) rebootMovedOn(node string, rec *disruption.Record, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.reboots[node]
	return ok && p.since.Equal(rec.Since) && rebootRank(p.phase) > rebootRank(rec.Phase) && now.Sub(p.at) <= markWait
}
