package nodepool

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"

	pools "github.com/sluice-dev/sluice/internal/nodepool"
)

// readNodesFrom makes c.nodes read the manager's node informer: the
// cache's own objects, as pointers, none copied. A pass reads them only.
func (c *Controller) readNodesFrom(mgr ctrl.Manager) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Node{})
	if err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return fmt.Errorf("watching nodes: the cache's informer is a %T, not a SharedIndexInformer", inf)
	}
	store := sii.GetStore()
	c.nodes = func() []*corev1.Node {
		objs := store.List()
		out := make([]*corev1.Node, 0, len(objs))
		for _, o := range objs {
			if n, ok := o.(*corev1.Node); ok {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}

// membershipChanged passes the pool changes that can move a node from one
// pool to another.
var membershipChanged = pools.Changed(nil)
