package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/termination"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// FieldManager names sluice's writes to the API server.
const FieldManager = "sluice"

// Options configure the controller.
type Options struct {
	// Identity names this replica on drain claims (its pod name).
	Identity string
	// Self picks the controller's own pod, evicted after every other pod
	// when the controller runs on a node it drains.
	Self func(*corev1.Pod) bool
	// PodsOn lists the pods bound to a node (the drains' shared view).
	PodsOn func(node string) ([]*corev1.Pod, error)
	// Policies resolves a node's NodePool policy.
	Policies Policies
	// Recorder writes Kubernetes Events.
	Recorder record.EventRecorder
	// Webhook, when set, receives every Event too.
	Webhook *Webhook
	// Metrics, when set, are updated.
	Metrics *Metrics
	// BlockedRetry is how long to wait before draining a blocked node again.
	BlockedRetry time.Duration
	// DryRun decides and reports (a WouldAct Event and a log line per
	// decision) and writes nothing to the node.
	DryRun bool
	Log    *slog.Logger
}

// Controller acts on the maintenance events written onto nodes. It reads
// nodes and pods from the manager's shared cache, writes nodes with
// optimistic-locked merge patches as field manager sluice, and hands every
// drain to the termination queue.
type Controller struct {
	kube     client.Client // reads from the shared cache
	live     client.Reader // reads from the API server, after a write conflict only
	clock    clock.WithTicker
	queue    *termination.Queue
	opts     Options
	recorder record.EventRecorder
	// wake queues a node when its drain has left the termination queue, so
	// its outcome is acted on even if nothing else about the node changes.
	wake chan event.GenericEvent
	// rejected remembers the unreadable metadata parts already announced.
	rejected rejectedParts
	// stranded remembers the pods drains had to move and could not.
	stranded stranded
}

// NewController returns a controller; SetupWithManager registers it.
func NewController(kube client.Client, live client.Reader, clk clock.WithTicker, queue *termination.Queue, opts Options) *Controller {
	if opts.BlockedRetry <= 0 {
		opts.BlockedRetry = 15 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	if opts.Policies == nil {
		opts.Policies = Defaults{}
	}
	c := &Controller{kube: kube, live: live, clock: clk, queue: queue, opts: opts,
		recorder: WithWebhook(opts.Recorder, opts.Webhook), wake: make(chan event.GenericEvent, 1024)}
	if opts.Metrics != nil {
		opts.Metrics.pastDeadline = c.pastDeadline
	}
	return c
}

// SetupWithManager watches nodes, and NodePools when the cluster serves them,
// reconciling up to workers nodes at once, from a priority queue in which a
// node with a new event goes first. Only nodes that carry a
// maintenance report or the controller's record are queued, and only when
// something the controller reads of them changed: there is no periodic
// resync, so an idle cluster costs nothing and a new event never waits
// behind a round of unchanged nodes.
func (c *Controller) SetupWithManager(mgr ctrl.Manager, workers int, watchPools bool) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("maintenance").
		// A node with a new event goes ahead of the others (PriorityNewEvent).
		Watches(&corev1.Node{}, nodeEnqueuer{}, builder.WithPredicates(nodeChanges())).
		// A pod opting in to eviction before a Freeze wakes its node.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podsNode), builder.WithPredicates(optInChanges())).
		WatchesRawSource(source.Channel(c.wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1), UsePriorityQueue: ptr.To(true)})
	if watchPools {
		// Only what changes a node's policy (PolicyOf): not every status
		// write, nor a limit's edit.
		b = b.Watches(&v1alpha1.NodePool{}, handler.EnqueueRequestsFromMapFunc(c.nodesWithMaintenance),
			builder.WithPredicates(nodepool.Changed(func(p *v1alpha1.NodePool) any { return p.Spec.Maintenance })))
	}
	if c.opts.Webhook != nil {
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { c.opts.Webhook.Run(ctx); return nil })); err != nil {
			return fmt.Errorf("adding the webhook: %w", err)
		}
	}
	return b.Complete(c)
}

// nodeChanges lets through the node changes the controller acts on: its
// maintenance annotations, labels (which pick the NodePool), the cordon and
// readiness. A node's other status updates (heartbeats, images) do not
// queue it.
func nodeChanges() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return hasMaintenance(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.Node)
			cur, okNew := e.ObjectNew.(*corev1.Node)
			if !okOld || !okNew || !hasMaintenance(cur) && !hasMaintenance(old) {
				return false
			}
			for _, key := range watchedAnnotations {
				if old.Annotations[key] != cur.Annotations[key] {
					return true
				}
			}
			return !equalLabels(old.Labels, cur.Labels) || old.Spec.Unschedulable != cur.Spec.Unschedulable || budget.NodeReady(old) != budget.NodeReady(cur)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(e event.GenericEvent) bool { return hasMaintenance(e.Object) },
	}
}

// optInChanges lets through pods that opt in to eviction before a Freeze as
// they appear on a node or change.
func optInChanges() predicate.Predicate {
	optedInOnNode := func(obj client.Object) bool {
		p, ok := obj.(*corev1.Pod)
		return ok && p.Spec.NodeName != "" && optedIn(p)
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return optedInOnNode(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return optedInOnNode(e.ObjectNew) && !optedInOnNode(e.ObjectOld) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func podsNode(_ context.Context, obj client.Object) []reconcile.Request {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: p.Spec.NodeName}}}
}

// wakeNode queues the node for a reconcile.
func (c *Controller) wakeNode(name string) {
	select {
	case c.wake <- event.GenericEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
	default:
		// The buffer is full of wake-ups already: hand this one over without
		// holding up the drain's goroutine.
		go func() { c.wake <- event.GenericEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}} }()
	}
}

var watchedAnnotations = []string{contract.AnnotationMaintenanceEvents, contract.AnnotationMaintenanceState, contract.AnnotationMaintenanceApproved, contract.AnnotationMaintenanceApprove}

func hasMaintenance(obj client.Object) bool {
	a := obj.GetAnnotations()
	_, report := a[contract.AnnotationMaintenanceEvents]
	_, st := a[contract.AnnotationMaintenanceState]
	return report || st
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// nodesWithMaintenance maps a NodePool change to the nodes whose policy it
// may change: those with maintenance in progress.
func (c *Controller) nodesWithMaintenance(ctx context.Context, _ client.Object) []reconcile.Request {
	// Read only: the cache's own objects, not 1,000 copies a pool event;
	// and only those a maintenance event's annotation is on.
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		c.opts.Log.Error("listing nodes from the cache", "err", err)
		return nil
	}
	var out []reconcile.Request
	for i := range nodes.Items {
		if hasMaintenance(&nodes.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nodes.Items[i].Name}})
		}
	}
	return out
}

// Reconcile brings one node in line with its maintenance events.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	after, err := c.reconcileNode(ctx, req.Name)
	switch {
	case errors.Is(err, termination.ErrNotStarted):
		return reconcile.Result{RequeueAfter: time.Second}, nil
	case errors.Is(err, errStale):
		return reconcile.Result{}, nil // a newer write to the record is on its way here
	}
	return reconcile.Result{RequeueAfter: after}, err
}

// update applies change to the node and writes the difference back as a
// merge patch conditional on the node's resourceVersion, retrying on
// conflicts. The first read is the cache's; after a conflict, or when the
// cached copy does not carry the record change expects (errStale: the cache
// has not caught up with our own last write), it reads the API server.
func (c *Controller) update(ctx context.Context, name string, change func(*corev1.Node) error) (*corev1.Node, error) {
	var reader client.Reader = c.kube
	var node *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur := &corev1.Node{}
		if err := reader.Get(ctx, types.NamespacedName{Name: name}, cur); err != nil {
			return fmt.Errorf("reading node %s: %w", name, err)
		}
		cached := reader == client.Reader(c.kube)
		reader = c.live
		orig := cur.DeepCopy()
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		if err := change(cur); err != nil {
			if cached && errors.Is(err, errStale) {
				return apierrors.NewConflict(corev1.Resource("nodes"), name, err) // look again, live
			}
			return err
		}
		if err := c.kube.Patch(ctx, cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager)); err != nil {
			return err
		}
		node = cur
		return nil
	})
	if err != nil && !errors.Is(err, errStale) && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("updating node %s: %w", name, err)
	}
	return node, err
}

// errStale ends an update whose record was replaced meanwhile.
var errStale = errors.New("the node's maintenance record changed meanwhile")
