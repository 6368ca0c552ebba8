package maintenance

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// PriorityNewEvent is the queue priority of a node whose report names an
// active event its record does not: its cordon is the one racing the cloud's
// notice, and under a mass preemption it goes ahead of every node already
// being looked after (a drain's outcome to record, a budget to retry).
// Everything else is queued at priority 0.
const PriorityNewEvent = 10

// nodeEnqueuer queues a node for a reconcile, ahead of the others when it
// has a new event. Without a priority queue it is controller-runtime's
// EnqueueRequestForObject.
type nodeEnqueuer struct{}

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (nodeEnqueuer) Create(_ context.Context, e event.CreateEvent, q requestQueue) {
	enqueueNode(q, e.Object)
}

func (nodeEnqueuer) Update(_ context.Context, e event.UpdateEvent, q requestQueue) {
	enqueueNode(q, e.ObjectNew)
}

func (nodeEnqueuer) Delete(_ context.Context, e event.DeleteEvent, q requestQueue) {
	enqueueNode(q, e.Object)
}

func (nodeEnqueuer) Generic(_ context.Context, e event.GenericEvent, q requestQueue) {
	enqueueNode(q, e.Object)
}

func enqueueNode(q requestQueue, obj client.Object) {
	if obj == nil {
		return
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: obj.GetName()}}
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	node, isNode := obj.(*corev1.Node)
	if !ok || !isNode || !hasNewEvent(node) {
		q.Add(req)
		return
	}
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(PriorityNewEvent)}, req)
}

// hasNewEvent reports whether the node's report names an active event that
// the controller's record on it does not. (A weaker event beside the recorded
// one counts too: that only moves the node up the queue, it changes nothing
// the reconcile decides.)
func hasNewEvent(node *corev1.Node) bool {
	report, ok, err := maintenance.ReportOf(node)
	if !ok || err != nil {
		return false
	}
	st, has := stateOf(node)
	for _, e := range report.Events {
		if e.Active() && (!has || e.ID != st.Event) {
			return true
		}
	}
	return false
}
