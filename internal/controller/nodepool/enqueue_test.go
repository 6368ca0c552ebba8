package nodepool

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A node's change queues the pool that owns it (and the one that owned it,
// when its labels moved it), not every pool; a node no pool selects queues
// every pool, as it may be a replacement not labelled yet.
func TestANodeQueuesItsOwnPools(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	var objs []runtime.Object
	for _, name := range []string{"a", "b", "c"} {
		objs = append(objs, &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.NodePoolSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}}}})
	}
	c := &Controller{kube: fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).Build()}
	node := func(pool string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{}}}
		if pool != "" {
			n.Labels["pool"] = pool
		}
		return n
	}
	queued := func(fire func(workqueue.TypedRateLimitingInterface[reconcile.Request])) []string {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		defer q.ShutDown()
		fire(q)
		var out []string
		for q.Len() > 0 {
			r, _ := q.Get()
			out = append(out, r.Name)
			q.Done(r)
		}
		slices.Sort(out)
		return out
	}
	h := c.nodeOwners()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		fire func(workqueue.TypedRateLimitingInterface[reconcile.Request])
		want []string
	}{
		{"created in a", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: node("a")}, q)
		}, []string{"a"}},
		{"changed in b", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: node("b"), ObjectNew: node("b")}, q)
		}, []string{"b"}},
		{"moved from a to c", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: node("a"), ObjectNew: node("c")}, q)
		}, []string{"a", "c"}},
		{"deleted from c", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, event.DeleteEvent{Object: node("c")}, q)
		}, []string{"c"}},
		{"in no pool", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: node("")}, q)
		}, []string{"a", "b", "c"}},
	} {
		if got := queued(tc.fire); !slices.Equal(got, tc.want) {
			t.Errorf("%s: queued %v, want %v", tc.name, got, tc.want)
		}
	}
}
