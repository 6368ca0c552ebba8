package nodepool

import (
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	toolscache "k8s.io/client-go/tools/cache"
)

// Changes counts the changes to what a consolidation pass reads: nodes,
// pods and PodDisruptionBudgets, each only where the pass could see the
// difference (a node's heartbeat, which every kubelet sends, is not one).
// A pool's pass that found nothing to do is not run again while the count,
// the pool and its budgets stay as they were (consolidate): at 5,000 nodes
// and 100 pools, passes that could only repeat themselves were most of the
// controller's work.
type Changes struct{ n atomic.Uint64 }

// Seq is the number of changes seen so far.
func (c *Changes) Seq() uint64 { return c.n.Load() }

// Handler counts the changes of one informer's objects.
func (c *Changes) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.n.Add(1) },
		DeleteFunc: func(any) { c.n.Add(1) },
		UpdateFunc: func(oldObj, newObj any) {
			if consolidationSees(oldObj, newObj) {
				c.n.Add(1)
			}
		},
	}
}

// consolidationSees says whether an update changes what a pass reads.
func consolidationSees(oldObj, newObj any) bool {
	switch o := oldObj.(type) {
	case *corev1.Node:
		n, ok := newObj.(*corev1.Node)
		return !ok || !equality.Semantic.DeepEqual(nodeSeen(o), nodeSeen(n))
	case *corev1.Pod:
		n, ok := newObj.(*corev1.Pod)
		return !ok || !equality.Semantic.DeepEqual(podSeen(o), podSeen(n))
	case *policyv1.PodDisruptionBudget:
		n, ok := newObj.(*policyv1.PodDisruptionBudget)
		return !ok || o.Generation != n.Generation || o.Status.DisruptionsAllowed != n.Status.DisruptionsAllowed
	}
	return true
}

// nodeSeen is what a pass reads of a node: its metadata, spec, what it can
// hold, and whether it is Ready (not when it last said so).
func nodeSeen(n *corev1.Node) []any {
	ready := corev1.ConditionUnknown
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status
		}
	}
	return []any{n.Labels, n.Annotations, n.DeletionTimestamp, n.Finalizers, n.Spec, n.Status.Allocatable, ready}
}

// podSeen is what a pass reads of a pod: its metadata, its spec, its phase
// and whether it is Ready.
func podSeen(p *corev1.Pod) []any {
	ready := corev1.ConditionUnknown
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status
		}
	}
	return []any{p.Labels, p.Annotations, p.OwnerReferences, p.DeletionTimestamp, p.Spec, p.Status.Phase, ready}
}
