package nodepool

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Churn remembers when a pod last left each node, which a node's pods alone
// cannot tell (a pod that arrived says so by its creation time). It starts
// with every node stamped at its own start: a restarted controller waits a
// pool's consolidateAfter before consolidating anything.
type Churn struct {
	clock clock.PassiveClock
	start time.Time
	mu    sync.Mutex
	at    map[string]time.Time
}

// NewChurn starts the record now.
func NewChurn(clk clock.PassiveClock) *Churn {
	return &Churn{clock: clk, start: clk.Now(), at: map[string]time.Time{}}
}

// Last is when a pod last left the node, or the record's start.
func (c *Churn) Last(node string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.at[node]; ok {
		return t
	}
	return c.start
}

// Handler stamps a node when one of its pods is deleted or finishes.
func (c *Churn) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, okO := oldObj.(*corev1.Pod)
			n, okN := newObj.(*corev1.Pod)
			if okO && okN && o.Spec.NodeName != "" && !finished(o) && (finished(n) || n.DeletionTimestamp != nil && o.DeletionTimestamp == nil) {
				c.stamp(o.Spec.NodeName)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				c.stamp(p.Spec.NodeName)
			}
		},
	}
}

func (c *Churn) stamp(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at[node] = c.clock.Now()
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
