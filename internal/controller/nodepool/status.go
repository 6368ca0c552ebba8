package nodepool

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Condition types and reasons on a NodePool.
const (
	ConditionReady         = "Ready"
	ConditionProviderReady = "ProviderReady"

	ReasonValid               = "Valid"
	ReasonInvalidNodeSelector = pools.ReasonInvalidNodeSelector
	ReasonNoProvider          = "NoProvider"
	ReasonProviderWorks       = "MachinesCreated"
)

// writeStatus writes the pool's status when it changed (an idle pool costs
// no write), and makes a newly broken pool visible with an Event and a log.
func (c *Controller) writeStatus(ctx context.Context, pool *v1alpha1.NodePool, v *view, problem *pools.Problem, now time.Time) error {
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonValid,
		Message: "the pool applies to the nodes it selects", ObservedGeneration: pool.Generation}
	if problem != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, problem.Reason, problem.Message
	}
	status := pool.Status.DeepCopy()
	status.ObservedGeneration = pool.Generation
	status.Nodes = clamp32(len(v.Nodes))
	status.Resources = v.Resources
	status.Disrupting = clamp32(v.Disrupting)
	status.Drifted, status.Expired = clamp32(v.Drifted), clamp32(v.Expired)
	status.Allowed = v.AllowedByReason(now)
	status.NextBudgetChange = nil
	if t, ok := nextBudgetChange(pool, now); ok {
		mt := metav1.NewTime(t)
		status.NextBudgetChange = &mt
	}
	status.Upgrade = upgradeStatus(pool, v, now)
	c.upgradeEvents(pool, pool.Status.Upgrade, status.Upgrade)
	before := meta.FindStatusCondition(pool.Status.Conditions, ConditionReady)
	meta.SetStatusCondition(&status.Conditions, ready)
	meta.SetStatusCondition(&status.Conditions, c.providerCondition(pool))
	c.setRepairCondition(status, pool, v)
	registration := meta.FindStatusCondition(pool.Status.Conditions, pools.ConditionRegistration)
	if cond, ok := c.registrationCondition(ctx, pool, now); ok {
		meta.SetStatusCondition(&status.Conditions, cond)
		if cond.Status == metav1.ConditionFalse && (registration == nil || registration.Status != metav1.ConditionFalse || registration.Message != cond.Message) {
			c.event(pool, corev1.EventTypeWarning, cond.Reason, cond.Message)
		}
	} else {
		meta.RemoveStatusCondition(&status.Conditions, pools.ConditionRegistration)
	}
	c.opts.Metrics.observe(pool, status)
	if equality.Semantic.DeepEqual(*status, pool.Status) {
		return nil
	}
	orig := pool.DeepCopy()
	pool.Status = *status
	if err := c.kube.Status().Patch(ctx, pool, client.MergeFrom(orig), client.FieldOwner("sluice")); err != nil {
		return fmt.Errorf("writing the status of node pool %s: %w", pool.Name, err)
	}
	if ready.Status == metav1.ConditionFalse && (before == nil || before.Status != metav1.ConditionFalse || before.Message != ready.Message) {
		c.event(pool, corev1.EventTypeWarning, ready.Reason, ready.Message)
		c.opts.Log.Error("node pool cannot be applied", "nodepool", pool.Name, "reason", ready.Reason, "message", ready.Message)
	}
	return nil
}

// providerCondition says whether the pool's provider makes machines.
func (c *Controller) providerCondition(pool *v1alpha1.NodePool) metav1.Condition {
	cond := metav1.Condition{Type: ConditionProviderReady, Status: metav1.ConditionTrue, ObservedGeneration: pool.Generation}
	if !pool.Spec.Provider.Manages() {
		cond.Reason, cond.Message = ReasonNoProvider, "sluice creates and deletes no machine in this pool (provider none): it reports the nodes it would replace"
		return cond
	}
	if !c.machines.Serves(pool.Spec.Provider.Name) {
		cond.Status, cond.Reason = metav1.ConditionFalse, "ProviderNotEnabled"
		cond.Message = fmt.Sprintf("this controller does not run provider %s: start it with --providers %s (sluice reports the nodes it would replace meanwhile)",
			pool.Spec.Provider.Name, pool.Spec.Provider.Name)
		return cond
	}
	c.mu.Lock()
	f, failing := c.failing[pool.Name]
	c.mu.Unlock()
	if failing {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, f.reason, f.message
		return cond
	}
	cond.Reason, cond.Message = ReasonProviderWorks, fmt.Sprintf("provider %s makes the pool's machines", pool.Spec.Provider.Name)
	return cond
}

// clamp32 is n as a status count; counts of nodes never come near the limit.
func clamp32(n int) int32 {
	return int32(min(max(n, 0), math.MaxInt32)) //nolint:gosec // clamped on the line
}

// upgradeEvents tells, on the pool, that its upgrade started, ended or
// changed phase.
func (c *Controller) upgradeEvents(pool *v1alpha1.NodePool, before, after *v1alpha1.UpgradeStatus) {
	if after == nil || before != nil && before.Image == after.Image && before.Phase == after.Phase {
		return
	}
	typ := corev1.EventTypeNormal
	msg := fmt.Sprintf("sluice: upgrade to image %s: %s, %d of %d nodes upgraded", after.Image, after.Phase, after.Upgraded, after.Nodes)
	if after.Message != "" {
		msg += ": " + after.Message
	}
	if after.Phase == v1alpha1.UpgradeFailed {
		typ = corev1.EventTypeWarning
	}
	c.event(pool, typ, "Upgrade"+string(after.Phase), msg)
	c.opts.Log.Info("upgrade phase", "nodepool", pool.Name, "image", after.Image, "phase", after.Phase, "upgraded", after.Upgraded, "nodes", after.Nodes)
}
