package nodepool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// ConditionRepairHalted is the NodePool condition that says whether the
// pool's circuit breaker holds its repairs (True, with the counts) or a
// paused pool does.
const ConditionRepairHalted = "RepairHalted"

// Reasons of ConditionRepairHalted.
const (
	ReasonBreakerOpen   = "TooManyUnhealthy"
	ReasonRepairPaused  = "PoolPaused"
	ReasonRepairRunning = "WithinLimits"
)

// health is a pass's reading of the pool's members' health: each member's
// (replacements still booting left out), and why repairs are held.
type health struct {
	nodes []disruption.Health
	halt  *disruption.Halt
	// due counts the members whose repair is due now.
	due int
}

// observeHealth judges every member of a pool with spec.repair, writes the
// debounced health records that changed (the clock survives a restart and a
// flap), and weighs the circuit breaker. It runs before the pause is
// looked at: a paused pool's clocks keep running.
func (c *Controller) observeHealth(ctx context.Context, pool *v1alpha1.NodePool, v *view, now time.Time) (time.Duration, error) {
	spec := pool.Spec.Repair
	if spec == nil {
		v.health = nil
		c.setHalt(pool.Name, "")
		c.opts.Metrics.observeHealth(pool.Name, 0, "")
		return 0, c.forgetHealth(ctx, v)
	}
	h, wait, errs := c.judgeHealth(ctx, spec, v, now)
	notReady, total := v.clusterReadiness()
	halt, err := disruption.Breaker(spec, h.nodes, notReady, total)
	if err != nil {
		return wait, errors.Join(append(errs, err)...)
	}
	h.halt = halt
	v.health = h
	why := ""
	if halt != nil {
		why = halt.String()
	}
	if c.setHalt(pool.Name, why) && why != "" {
		c.event(pool, corev1.EventTypeWarning, "RepairHalted", "sluice: no node of the pool is repaired: "+why)
		c.opts.Log.Info("repairs halted by the circuit breaker", "nodepool", pool.Name, "why", why)
	}
	unhealthy := 0
	for _, nh := range h.nodes {
		if nh.Unhealthy() {
			unhealthy++
		}
	}
	held := ""
	switch {
	case halt != nil:
		held = ReasonBreakerOpen
	case pausedBy(pool) != "" && h.due > 0:
		held = ReasonRepairPaused
	}
	c.opts.Metrics.observeHealth(pool.Name, unhealthy, held)
	return wait, errors.Join(errs...)
}

// judgeHealth judges the members the repair counts (disruption.PoolHealth)
// and writes the health records that changed; it
// returns how long until a clock comes due or a grace ends.
func (c *Controller) judgeHealth(ctx context.Context, spec *v1alpha1.RepairSpec, v *view, now time.Time) (*health, time.Duration, []error) {
	h := &health{}
	var (
		wait time.Duration
		errs []error
	)
	for _, nh := range disruption.PoolHealth(spec, v.Nodes, v.Replacements, now) {
		if nh.Changed && !c.opts.DryRun {
			errs = appendErr(errs, c.writeHealth(ctx, nh.Node, nh.Record))
		}
		switch {
		case nh.DueAt(now):
			h.due++
		case nh.Unhealthy():
			wait = sooner(wait, nh.Due.Sub(now)+time.Second)
		case nh.Record != nil && nh.Record.HealthySince != nil:
			wait = sooner(wait, nh.Record.HealthySince.Add(spec.FlapGraceOrDefault()).Sub(now)+time.Second)
		}
		h.nodes = append(h.nodes, nh)
	}
	return h, wait, errs
}

// forgetHealth removes the health records of a pool that no longer repairs:
// turned on again later, its clocks start afresh.
func (c *Controller) forgetHealth(ctx context.Context, v *view) error {
	if c.opts.DryRun {
		return nil
	}
	var errs []error
	for _, n := range v.Nodes {
		_, noted := n.Annotations[contract.AnnotationUnhealthy]
		_, rebooted := n.Annotations[contract.AnnotationRepairRebooted]
		if noted || rebooted {
			errs = appendErr(errs, c.writeHealth(ctx, n, nil))
		}
	}
	return errors.Join(errs...)
}

// writeHealth writes (or, with nil, removes) the node's health record: a
// merge patch of the one annotation, which only this controller writes. A
// record's removal takes the repair's reboot note with it.
func (c *Controller) writeHealth(ctx context.Context, cached *corev1.Node, rec *disruption.HealthRecord) error {
	annotations := map[string]any{contract.AnnotationUnhealthy: nil, contract.AnnotationRepairRebooted: nil}
	if rec != nil {
		annotations = map[string]any{contract.AnnotationUnhealthy: rec.String()}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	n := cached.DeepCopy()
	if err := c.kube.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("sluice")); err != nil {
		return fmt.Errorf("noting the health of node %s: %w", n.Name, err)
	}
	return nil
}

// repair is the Unhealthy method's pass: every member whose repair is due,
// longest broken first, takes its next rung (a reboot in place, or a
// replacement). Voluntary budgets never hold it: a repair spends the budget
// (a broken node already counts as disrupting) but is held only by the
// circuit breaker, and by a paused pool (disrupt never gets here). A node
// marked do-not-disrupt is repaired too: it is broken.
func (c *Controller) repair(ctx context.Context, pool *v1alpha1.NodePool, v *view, l *ledger, now time.Time) (time.Duration, error) {
	h := v.health
	if h == nil || h.halt != nil || h.due == 0 {
		return 0, nil
	}
	due := make([]disruption.Health, 0, h.due)
	for _, nh := range h.nodes {
		if nh.DueAt(now) {
			due = append(due, nh)
		}
	}
	sort.SliceStable(due, func(i, j int) bool { return due[i].Due.Before(due[j].Due) })
	var errs []error
	for _, nh := range due {
		n := nh.Node
		if _, recorded := n.Annotations[contract.AnnotationDisruption]; recorded || v.unseen(n.Name) {
			continue // being repaired, or taken by another disruption already
		}
		why := fmt.Sprintf("unhealthy since %s: %s, past its toleration %s", nh.Record.Since.UTC().Format(time.RFC3339), nh.Describe(), nh.Bad.Toleration.Duration)
		counted := countsAlready(n, now)
		replaced := false
		var err error
		switch step := disruption.NextStep(pool.Spec.Repair, nh, c.machines.CanReboot(pool)); step {
		case v1alpha1.RepairReboot:
			err = c.startReboot(ctx, pool, n, v1alpha1.ReasonUnhealthy, why, now)
		case v1alpha1.RepairReplace:
			if nh.Rebooted != nil {
				why += "; broken again after its reboot at " + nh.Rebooted.UTC().Format(time.RFC3339)
			}
			// Replacement first needs room for one more machine, as for
			// every other method.
			if over := overPoolLimits(pool, v, n, l.pending); over != "" {
				c.event(pool, corev1.EventTypeNormal, "LimitReached", fmt.Sprintf("sluice: broken node %s waits to be replaced: %s", n.Name, over))
				continue
			}
			err = c.choose(ctx, pool, disruption.Candidate{Node: n, Reason: v1alpha1.ReasonUnhealthy, Why: why}, now)
			replaced = true
		default:
			c.event(n, corev1.EventTypeWarning, "RepairExhausted", "sluice: "+why+
				"; the pool's repair ladder has no step left for it (a reboot was tried, or the provider cannot reboot, and spec.repair.steps has no Replace): repair it by hand")
			continue
		}
		stop, next, err := chosenOutcome(err)
		errs = appendErr(errs, err)
		if stop {
			l.halted = true
			break
		}
		if next {
			continue
		}
		v.Unseen = append(v.Unseen, n.Name)
		if !counted {
			l.disrupting++
		}
		if replaced {
			l.pending++
		}
	}
	return launchingRecheck, errors.Join(errs...)
}

// launchFor turns a node already marked (a reboot that did not mend it)
// into a replacement: the record names the replacement before the provider
// is asked, as choose does.
func (c *Controller) launchFor(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec disruption.Record, now time.Time) error {
	at := now
	rec.Replacement, rec.LaunchedAt = provider.NewName(pool.Name), &at
	if err := c.setRecord(ctx, n, &rec); err != nil {
		return err
	}
	c.opts.Metrics.decided(pool.Name, rec.Reason)
	return c.launch(ctx, pool, n, rec, now)
}

// setHalt remembers why the pool's repairs are held ("" when they are not)
// and says whether that changed.
func (c *Controller) setHalt(pool, why string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.halts[pool] == why {
		return false
	}
	if why == "" {
		delete(c.halts, pool)
	} else {
		c.halts[pool] = why
	}
	return true
}

// halted is why the pool's repairs are held, "" when they are not.
func (c *Controller) halted(pool string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.halts[pool]
}

// repairCondition is the pool's RepairHalted condition; ok is false for a
// pool without spec.repair (the condition is removed).
func (c *Controller) repairCondition(pool *v1alpha1.NodePool, v *view) (metav1.Condition, bool) {
	if pool.Spec.Repair == nil {
		return metav1.Condition{}, false
	}
	cond := metav1.Condition{Type: ConditionRepairHalted, Status: metav1.ConditionFalse, Reason: ReasonRepairRunning,
		Message: "repairs go ahead as nodes break", ObservedGeneration: pool.Generation}
	switch {
	case v.health != nil && v.health.halt != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, ReasonBreakerOpen, v.health.halt.String()
	case v.health != nil && v.health.due > 0 && pausedBy(pool) != "":
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonRepairPaused
		cond.Message = fmt.Sprintf("%d broken nodes wait: the pool is paused by %s", v.health.due, pausedBy(pool))
	}
	return cond, true
}

// setRepairCondition sets or removes the pool's RepairHalted condition.
func (c *Controller) setRepairCondition(status *v1alpha1.NodePoolStatus, pool *v1alpha1.NodePool, v *view) {
	if cond, ok := c.repairCondition(pool, v); ok {
		meta.SetStatusCondition(&status.Conditions, cond)
		return
	}
	meta.RemoveStatusCondition(&status.Conditions, ConditionRepairHalted)
}

// countsAlready says whether the node counts against the budgets already (a
// broken node that is NotReady does).
func countsAlready(n *corev1.Node, now time.Time) bool {
	_, c := budget.Disrupting(n, now)
	return c
}
