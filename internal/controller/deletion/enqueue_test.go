package deletion

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

// A pool's change queues the nodes its selector picks before and after the
// change, not every node of the cluster.
func TestAPoolQueuesItsOwnNodes(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	var objs []runtime.Object
	for name, pool := range map[string]string{"a1": "a", "a2": "a", "b1": "b", "c1": "c", "none": ""} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if pool != "" {
			n.Labels["pool"] = pool
		}
		objs = append(objs, n)
	}
	c := NewController(fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).Build(), nil, nil, nil, Options{})
	pool := func(selector metav1.LabelSelector) *v1alpha1.NodePool {
		return &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.NodePoolSpec{NodeSelector: selector}}
	}
	of := func(p string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{"pool": p}}
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
	h := c.poolNodes()
	ctx := context.Background()
	bad := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}
	for _, tc := range []struct {
		name string
		fire func(workqueue.TypedRateLimitingInterface[reconcile.Request])
		want []string
	}{
		{"created for a", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: pool(of("a"))}, q)
		}, []string{"a1", "a2"}},
		{"moved from a to b", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: pool(of("a")), ObjectNew: pool(of("b"))}, q)
		}, []string{"a1", "a2", "b1"}},
		{"deleted from c", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, event.DeleteEvent{Object: pool(of("c"))}, q)
		}, []string{"c1"}},
		{"a selector that cannot be read: every node", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: pool(bad)}, q)
		}, []string{"a1", "a2", "b1", "c1", "none"}},
	} {
		if got := queued(tc.fire); !slices.Equal(got, tc.want) {
			t.Errorf("%s: queued %v, want %v", tc.name, got, tc.want)
		}
	}
}
