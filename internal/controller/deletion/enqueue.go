package deletion

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// poolNodes queues, for a pool's change, the nodes its selector picks before
// and after the change: a changed provider or selector moves the finalizer
// on those nodes and no others. Not every node: at 1,000 nodes in 20 pools
// each pool's event was 1,000 reconciles, 20,000 at every start, and they
// slowed the NodePool controller's passes beside them sevenfold
// (BenchmarkPoolsIdle). A selector that cannot be read queues every node.
func (c *Controller) poolNodes() handler.Funcs {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		seen := map[string]bool{}
		for _, o := range objs {
			pool, ok := o.(*v1alpha1.NodePool)
			if !ok {
				continue
			}
			selector, err := metav1.LabelSelectorAsSelector(&pool.Spec.NodeSelector)
			if err != nil {
				selector = labels.Everything()
			}
			// Only the names are read: the cache's own objects, not copies.
			var nodes corev1.NodeList
			if err := c.kube.List(ctx, &nodes, client.MatchingLabelsSelector{Selector: selector}, client.UnsafeDisableDeepCopy); err != nil {
				c.opts.Log.Error("listing a changed pool's nodes; they are looked at on their next change", "nodepool", pool.Name, "err", err)
				continue
			}
			for i := range nodes.Items {
				if name := nodes.Items[i].Name; !seen[name] {
					seen[name] = true
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
				}
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
	}
}
