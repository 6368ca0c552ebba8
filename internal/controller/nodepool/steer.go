package nodepool

import (
	"context"
	"slices"

	"github.com/sluice-dev/sluice/pkg/contract"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SteerTaint marks the nodes a consolidation's later rounds are expected to
// take away (consolidation.Plan.Next). PreferNoSchedule only weighs in
// kube-scheduler's scoring: pods moved off this round's nodes go to the nodes
// that stay when those have room, and a pod is not moved twice; nothing is
// ever refused a place by it, and DaemonSet pods still land.
var SteerTaint = corev1.Taint{Key: contract.TaintConsolidation, Value: "next", Effect: corev1.TaintEffectPreferNoSchedule}

// steer puts SteerTaint on the pool's nodes in next and takes it off every
// other node of the pool. A write that fails (a conflict: the node changed
// under it) is left to the next pass, which steers again.
func (c *Controller) steer(ctx context.Context, nodes []*corev1.Node, next []string) {
	for _, n := range nodes {
		want := slices.Contains(next, n.Name) && n.DeletionTimestamp.IsZero()
		has := slices.ContainsFunc(n.Spec.Taints, isSteer)
		if want == has {
			continue
		}
		changed := n.DeepCopy()
		if want {
			changed.Spec.Taints = append(changed.Spec.Taints, SteerTaint)
		} else {
			changed.Spec.Taints = slices.DeleteFunc(changed.Spec.Taints, isSteer)
		}
		if err := c.kube.Patch(ctx, changed, client.MergeFromWithOptions(n, client.MergeFromWithOptimisticLock{})); err != nil {
			c.opts.Log.Info("steering pods away from the next consolidation rounds' nodes; the next pass tries again", "node", n.Name, "taint", want, "err", err)
			continue
		}
		c.opts.Log.Debug("consolidation steering", "node", n.Name, "nextRound", want)
	}
}

func isSteer(t corev1.Taint) bool { return SteerTaint.MatchTaint(&t) }

// unsteer lifts SteerTaint from the nodes a deleted pool made: no rounds of
// its are coming.
func (c *Controller) unsteer(ctx context.Context, pool string) {
	if c.opts.DryRun {
		return
	}
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes, client.MatchingLabels{contract.LabelNodePool: pool}); err != nil {
		c.opts.Log.Info("lifting the consolidation mark from a deleted pool's nodes; its next reconcile tries again", "nodepool", pool, "err", err)
		return
	}
	marked := make([]*corev1.Node, 0, len(nodes.Items))
	for i := range nodes.Items {
		marked = append(marked, &nodes.Items[i])
	}
	c.steer(ctx, marked, nil)
}
