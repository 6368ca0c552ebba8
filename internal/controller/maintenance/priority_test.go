package maintenance

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// nodeWith builds a node carrying a report of events and, when recorded is
// not empty, the controller's record of that event.
func nodeWith(t *testing.T, name, recorded string, events ...maintenance.Event) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	if len(events) > 0 {
		n.Annotations[contract.AnnotationMaintenanceEvents] = maintenance.Report{Events: events}.Encode()
	}
	if recorded != "" {
		n.Annotations[contract.AnnotationMaintenanceState] = state{Event: recorded, Phase: PhaseDraining}.encode()
	}
	return n
}

func TestANodeWithANewEventJumpsTheQueue(t *testing.T) {
	preempt := maintenance.Event{ID: "preempt-1", Source: maintenance.SourceAzure, Type: maintenance.TypePreempt, Status: maintenance.StatusScheduled}
	over := preempt
	over.ID, over.Status = "reboot-0", maintenance.StatusCompleted
	q := priorityqueue.New[reconcile.Request]("test")
	t.Cleanup(q.ShutDown)

	// Queued first, in this order: a node whose event the controller has
	// already recorded (its drain's outcome to write down), a node whose
	// only event is over, and a node with no report at all (its record to
	// clean up). Then the node with a new Preempt.
	h := nodeEnqueuer{}
	h.Update(t.Context(), event.UpdateEvent{ObjectNew: nodeWith(t, "draining", "preempt-0", maintenance.Event{ID: "preempt-0", Source: maintenance.SourceAzure, Type: maintenance.TypePreempt, Status: maintenance.StatusScheduled})}, q)
	h.Update(t.Context(), event.UpdateEvent{ObjectNew: nodeWith(t, "finished", "reboot-0", over)}, q)
	h.Generic(t.Context(), event.GenericEvent{Object: nodeWith(t, "forgotten", "reboot-0")}, q)
	h.Create(t.Context(), event.CreateEvent{Object: nodeWith(t, "preempted", "", preempt)}, q)
	if got := q.Len(); got != 4 {
		t.Fatalf("queue holds %d nodes, want 4", got)
	}

	want := []struct {
		name     string
		priority int
	}{{"preempted", PriorityNewEvent}, {"draining", 0}, {"finished", 0}, {"forgotten", 0}}
	for _, w := range want {
		req, prio, _ := q.GetWithPriority()
		if req.Name != w.name || prio != w.priority {
			t.Errorf("next: %s at priority %d, want %s at %d", req.Name, prio, w.name, w.priority)
		}
		q.Done(req)
	}
}

func TestANewEventBesideTheRecordedOneAlsoJumpsTheQueue(t *testing.T) {
	recorded := maintenance.Event{ID: "freeze-1", Source: maintenance.SourceAzure, Type: maintenance.TypeFreeze, Status: maintenance.StatusScheduled}
	preempt := maintenance.Event{ID: "preempt-2", Source: maintenance.SourceAzure, Type: maintenance.TypePreempt, Status: maintenance.StatusScheduled}
	if !hasNewEvent(nodeWith(t, "n", "freeze-1", recorded, preempt)) {
		t.Error("a Preempt beside a recorded Freeze is not new")
	}
	if hasNewEvent(nodeWith(t, "n", "freeze-1", recorded)) {
		t.Error("the recorded Freeze alone counts as new")
	}
	bad := nodeWith(t, "n", "")
	bad.Annotations[contract.AnnotationMaintenanceEvents] = "{not json"
	if hasNewEvent(bad) {
		t.Error("an unreadable report counts as a new event")
	}
}

func TestWithoutAPriorityQueueEveryNodeIsQueued(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	preempt := maintenance.Event{ID: "p", Source: maintenance.SourceAzure, Type: maintenance.TypePreempt, Status: maintenance.StatusScheduled, NotBefore: time.Now()}
	nodeEnqueuer{}.Update(t.Context(), event.UpdateEvent{ObjectNew: nodeWith(t, "a", "", preempt)}, q)
	nodeEnqueuer{}.Delete(t.Context(), event.DeleteEvent{Object: nodeWith(t, "b", "p")}, q)
	if got := q.Len(); got != 2 {
		t.Fatalf("queue holds %d nodes, want 2", got)
	}
}
