// Package deletion makes `kubectl delete node` graceful on the nodes of a
// pool whose machines sluice manages: such nodes carry the finalizer
// sluice.dev/termination, and a deleted one is cordoned, drained through the
// termination queue under its pool's budgets and its pods' PDBs, its machine
// deleted, and only then let go. After the pool's terminationGracePeriod the
// pods still there are deleted so the node finishes. A node whose pool has
// no provider (or no pool) never keeps the finalizer: sluice cannot strand a
// Node.
package deletion

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/kube"
	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/termination"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// Machines deletes the machine behind a pool's node.
type Machines interface {
	// Serves says whether this controller runs the named provider.
	Serves(name v1alpha1.ProviderName) bool
	DeleteMachine(ctx context.Context, pool *v1alpha1.NodePool, machine string) error
	// MachineOf is the name of the machine the pool's Node is.
	MachineOf(pool *v1alpha1.NodePool, n *corev1.Node) string
}

// Queue is the part of the termination queue the controller uses.
type Queue interface {
	Submit(termination.Request) (termination.Admission, error)
	Holds(node, key string) bool
	// Running says whether the queue runs or queues any request for node.
	Running(node string) bool
}

// terminatingRecheck is how often a node being terminated is looked at
// beside the wake-ups its drain gives: a drain canceled by someone else
// gives none.
const terminatingRecheck = 30 * time.Second

// Options configure the controller.
type Options struct {
	// DryRun decides and reports, and changes nothing.
	DryRun   bool
	Recorder record.EventRecorder
	Log      *slog.Logger
	// Retry is how long a drain that ended with pods left waits before it
	// is tried again; default 15 s.
	Retry time.Duration
	// Live reads a node from the API server when a write found the cache's
	// copy stale; nil leaves the retry to the workqueue.
	Live client.Reader
}

// Controller reconciles nodes of provider-backed pools.
type Controller struct {
	kube     client.Client
	clock    clock.Clock
	queue    Queue
	machines Machines
	opts     Options

	mu sync.Mutex
	// ended holds, per node, how its last drain ended: every pod gone (the
	// machine may go), or pods left (try again at retryAt).
	ended map[string]ending
	wake  chan event.GenericEvent

	// admitting serializes the budget check and the record's write of
	// deleted nodes, and admitted remembers the nodes admitted until the
	// cache shows their record, so two workers never both spend the last
	// disruption the budget allows.
	admitting sync.Mutex
	admitted  map[string]time.Time
}

// NewController returns the controller; SetupWithManager registers it.
func NewController(kube client.Client, clk clock.Clock, queue Queue, machines Machines, opts Options) *Controller {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Retry <= 0 {
		opts.Retry = 15 * time.Second
	}
	return &Controller{kube: kube, clock: clk, queue: queue, machines: machines, opts: opts,
		ended: map[string]ending{}, wake: make(chan event.GenericEvent, 256), admitted: map[string]time.Time{}}
}

// SetupWithManager watches nodes as they are created, deleted, relabelled or
// their finalizers change, and pools as their provider changes.
func (c *Controller) SetupWithManager(mgr ctrl.Manager, workers int) error {
	nodeChanged := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return !o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
				!slices.Equal(o.GetFinalizers(), n.GetFinalizers()) ||
				fmt.Sprint(o.GetLabels()) != fmt.Sprint(n.GetLabels())
		},
		GenericFunc: func(event.GenericEvent) bool { return true },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("deletion").
		For(&corev1.Node{}, builder.WithPredicates(nodeChanged)).
		// A pool's provider says whether its nodes keep the finalizer, and
		// its disruption settings how a deleted node's drain goes.
		Watches(&v1alpha1.NodePool{}, c.poolNodes(), builder.WithPredicates(pools.Changed(func(p *v1alpha1.NodePool) any {
			return []any{p.Spec.Provider, p.Spec.Disruption}
		}))).
		WatchesRawSource(source.Channel(c.wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		Complete(c)
}

// Reconcile keeps the finalizer where it belongs and takes deleted nodes
// through drain and machine deletion.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			c.forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	all, err := c.pools(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	pool, _ := pools.For(node, all) // a selector error leaves the node poolless: released below
	// A pool whose provider this controller does not run keeps no
	// finalizer: nothing here could delete its machines.
	managed := pool != nil && pool.Spec.Provider.Manages() && c.machines.Serves(pool.Spec.Provider.Name)
	has := controllerutil.ContainsFinalizer(node, contract.FinalizerTermination)
	switch {
	case node.DeletionTimestamp.IsZero() && managed && !has:
		return reconcile.Result{}, c.setFinalizer(ctx, node, true)
	case !managed && has:
		if !node.DeletionTimestamp.IsZero() {
			c.event(node, corev1.EventTypeNormal, "TerminationReleased",
				"sluice: the node's pool has no provider this controller runs (any more); Kubernetes deletes the node as usual")
		}
		return reconcile.Result{}, c.setFinalizer(ctx, node, false)
	case node.DeletionTimestamp.IsZero() || !has:
		return reconcile.Result{}, nil
	}
	return c.terminate(ctx, node, pool, all)
}

// terminate advances a deleted node of a managed pool: admitted under the
// budget, drained by the queue, machine deleted, finalizer removed.
func (c *Controller) terminate(ctx context.Context, node *corev1.Node, pool *v1alpha1.NodePool, all []v1alpha1.NodePool) (reconcile.Result, error) {
	end := c.ending(node.Name)
	if end.drained {
		return reconcile.Result{}, c.finish(ctx, node, pool)
	}
	rec, err := disruption.RecordOf(node)
	if grace, ok := terminationGrace(pool, node, rec); ok && !c.clock.Now().Before(node.DeletionTimestamp.Add(grace+graceSlack)) {
		// The grace period is over and the node is still not empty: its
		// kubelet may be gone and never confirm its pods' end. The machine
		// goes, as terminationGracePeriod promises.
		c.event(node, corev1.EventTypeWarning, "TerminationGracePeriodElapsed", fmt.Sprintf(
			"sluice: terminationGracePeriod %s has passed since the node was deleted; deleting its machine with pods still on it", grace))
		return reconcile.Result{}, c.finish(ctx, node, pool)
	}
	if wait := end.retryAt.Sub(c.clock.Now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if disruption.IsNewerRecord(err) {
		// A newer sluice was draining it (a rollback happened since): its
		// record is not ours to rewrite.
		c.event(node, corev1.EventTypeWarning, disruption.EventRecordFromNewerVersion, "sluice: "+err.Error()+
			"; or remove the annotation (kubectl annotate node "+node.Name+" "+contract.AnnotationDisruption+"-) to let this one drain the node")
		return reconcile.Result{RequeueAfter: newerRecordRecheck}, nil
	}
	if err != nil {
		c.opts.Log.Error("unreadable disruption record; treating the node as deleted by a person", "node", node.Name, "err", err)
	}
	if rec == nil || rec.Phase != disruption.PhaseTerminating {
		wait, err := c.admit(ctx, node, pool, all, rec)
		if err != nil || wait > 0 || c.opts.DryRun {
			return reconcile.Result{RequeueAfter: wait}, err
		}
		if rec, err = disruption.RecordOf(node); err != nil { // as admit wrote it
			return reconcile.Result{}, err
		}
	}
	key := "delete/" + string(node.UID)
	if c.queue.Holds(node.Name, key) {
		return reconcile.Result{RequeueAfter: terminatingRecheck}, nil
	}
	if c.opts.DryRun {
		return reconcile.Result{}, nil
	}
	if c.queue.Running(node.Name) {
		// Another drain (a maintenance event's) empties the node now: let
		// it finish rather than replace a deadline drain with ours.
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	opts := c.drainOptions(node, pool, rec)
	name := node.Name
	admission, err := c.queue.Submit(termination.Request{Node: name, Pool: pool.Name, Reason: termination.Reason(rec.Reason), Key: key,
		Options: opts, Done: func(r *drain.Report, err error) { c.drainEnded(name, r, err) }, Released: func() { c.wakeNode(name) }})
	if err != nil {
		return reconcile.Result{}, err
	}
	if admission == termination.Started {
		msg := "sluice: draining the deleted node, then deleting its machine"
		if !opts.Deadline.IsZero() {
			msg += fmt.Sprintf("; pods still here at %s (terminationGracePeriod) are deleted", opts.Deadline.UTC().Format(time.RFC3339))
		}
		c.event(node, corev1.EventTypeNormal, "Terminating", msg)
	}
	return reconcile.Result{RequeueAfter: terminatingRecheck}, nil
}

// drainOptions are the deleted node's drain's: pods still there at the
// end of its grace (terminationGrace) are deleted. A repaired node whose
// kubelet is gone is said to be so: its pods are deleted, not evicted.
func (c *Controller) drainOptions(node *corev1.Node, pool *v1alpha1.NodePool, rec *disruption.Record) drain.Options {
	opts := drain.Options{IgnoreDaemonSets: true, DeleteEmptyDirData: true, Force: true, CordonOwner: "termination"}
	if grace, ok := terminationGrace(pool, node, rec); ok {
		opts.Deadline = node.DeletionTimestamp.Add(grace)
		opts.OnDeadline = drain.OnDeadlineDelete
	}
	if rec != nil && rec.Reason == v1alpha1.ReasonUnhealthy && kubeletGone(node) {
		c.event(node, corev1.EventTypeWarning, "KubeletUnreachable", fmt.Sprintf(
			"sluice: repairing a node whose kubelet stopped reporting: nothing can confirm its pods' eviction, so those still here at %s are deleted (not evicted) and the machine with them",
			opts.Deadline.UTC().Format(time.RFC3339)))
	}
	return opts
}

// unreachableGrace is how long a repair's deletion of a node whose kubelet
// is gone waits for its pods when the pool sets no terminationGracePeriod:
// no kubelet will ever confirm their end (docs/health.md).
const unreachableGrace = 10 * time.Minute

// terminationGrace is how long the node's drain may take before the pods
// left are deleted: the pool's terminationGracePeriod, or, for a repair of a
// node whose kubelet is gone, unreachableGrace when the pool sets none.
func terminationGrace(pool *v1alpha1.NodePool, node *corev1.Node, rec *disruption.Record) (time.Duration, bool) {
	if grace, ok := pool.DisruptionSpec().TerminationGracePeriodOrNone(); ok {
		return grace, true
	}
	if rec != nil && rec.Reason == v1alpha1.ReasonUnhealthy && kubeletGone(node) {
		return unreachableGrace, true
	}
	return 0, false
}

// kubeletGone says whether the node's kubelet stopped reporting (Ready
// Unknown).
func kubeletGone(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionUnknown
		}
	}
	return false
}

// newerRecordRecheck is how often a deleted node whose record a newer
// sluice wrote is looked at again: the record's removal shows only then
// (an annotation change alone does not queue the node).
const newerRecordRecheck = 15 * time.Second

// graceSlack lets the drain's own deadline action (deleting what is left)
// run before the machine is deleted regardless.
const graceSlack = 10 * time.Second

// admit decides whether a deleted node may start draining now: a node the
// disruption controller replaced was counted when it was chosen; a node a
// person deleted waits for its pool's budgets (those that name no reason),
// oldest deletion first. It writes the Terminating record when admitted and
// returns how long to wait otherwise.
func (c *Controller) admit(ctx context.Context, node *corev1.Node, pool *v1alpha1.NodePool, all []v1alpha1.NodePool, rec *disruption.Record) (time.Duration, error) {
	now := c.clock.Now()
	next := disruption.Record{Reason: disruption.ReasonDeleted, Phase: disruption.PhaseTerminating, Since: now}
	if rec != nil {
		// Chosen by the disruption controller: its budget was spent then.
		next.Reason, next.Replacement, next.LaunchedAt = rec.Reason, rec.Replacement, rec.LaunchedAt
	} else {
		c.admitting.Lock()
		defer c.admitting.Unlock()
		allowed, waiting, err := c.room(ctx, node, pool, all, now)
		if err != nil {
			return 0, err
		}
		if allowed < 1 || waiting {
			c.event(node, corev1.EventTypeNormal, "TerminationWaits",
				"sluice: the node was deleted; it is drained once its pool's disruption budget allows (NodePool "+pool.Name+")")
			return 10 * time.Second, nil
		}
	}
	if c.opts.DryRun {
		c.opts.Log.Info("dry run: would drain the deleted node", "node", node.Name, "pool", pool.Name)
		return 0, nil
	}
	orig := node.DeepCopy()
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[contract.AnnotationDisruption] = next.String()
	// Admissions are serialized here and only this controller writes the
	// Terminating record, so the patch needs no lock (a lock would fail on
	// every status heartbeat of the node).
	if err := c.kube.Patch(ctx, node, client.MergeFrom(orig), client.FieldOwner("sluice")); err != nil {
		if rec == nil && kube.MayHaveApplied(err) {
			// The record may be written though its answer was lost: the
			// node counts as admitted until the cache shows which.
			c.admitted[node.Name] = now
		}
		return 0, fmt.Errorf("recording the termination of node %s: %w", node.Name, err)
	}
	if rec == nil {
		c.admitted[node.Name] = now
	}
	return 0, nil
}

// room says how many more of the pool's nodes the budgets let a person's
// deletion disrupt now, not counting deleted nodes still waiting their turn,
// and whether an older waiting deletion goes first.
func (c *Controller) room(ctx context.Context, node *corev1.Node, pool *v1alpha1.NodePool, all []v1alpha1.NodePool, now time.Time) (int, bool, error) {
	var list corev1.NodeList // the cache's own objects: read only
	if err := c.kube.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, false, fmt.Errorf("listing nodes: %w", err)
	}
	var members, counted []*corev1.Node
	olderWaiting := false
	for i := range list.Items {
		n := &list.Items[i]
		if owner, _ := pools.For(n, all); owner == nil || owner.Name != pool.Name {
			continue
		}
		members = append(members, n)
		if at, ok := c.admitted[n.Name]; ok && now.Sub(at) < 30*time.Second && waitingDeletion(n) {
			// Admitted by this controller; the cache does not show it yet.
			counted = append(counted, n)
			continue
		}
		delete(c.admitted, n.Name)
		if waitingDeletion(n) {
			if n.Name != node.Name && (n.DeletionTimestamp.Before(node.DeletionTimestamp) ||
				n.DeletionTimestamp.Equal(node.DeletionTimestamp) && n.Name < node.Name) {
				olderWaiting = true
			}
			continue
		}
		counted = append(counted, n)
	}
	// The pool as the NodePool controller sizes it; deleted nodes waiting
	// their turn count once admitted.
	v := disruption.Observe(pool, members, now)
	v.CountOnly(counted, now)
	a, err := v.Allowed("", now) // a person's deletion: only the budgets that name no reason limit it
	if err != nil {
		return 0, false, err
	}
	return a.Nodes, olderWaiting, nil
}

// waitingDeletion: deleted, and not yet admitted to drain.
func waitingDeletion(n *corev1.Node) bool {
	if n.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(n, contract.FinalizerTermination) {
		return false
	}
	// A node the disruption controller chose and deleted was counted when
	// it was chosen, and is admitted without waiting: it counts.
	_, recorded := n.Annotations[contract.AnnotationDisruption]
	return !recorded
}

// ending is how a node's last drain ended.
type ending struct {
	drained bool
	retryAt time.Time
}

// drainEnded runs on the drain's goroutine when the node's drain ends; the
// queue wakes the node once it has let the request go.
func (c *Controller) drainEnded(name string, r *drain.Report, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && r != nil && len(r.Nodes) == 1 && r.Nodes[0].Outcome == drain.NodeDrained {
		c.ended[name] = ending{drained: true}
		return
	}
	c.ended[name] = ending{retryAt: c.clock.Now().Add(c.opts.Retry)}
	msg := ""
	switch {
	case err != nil:
		msg = err.Error()
	case r != nil && len(r.Nodes) == 1:
		msg = r.Nodes[0].Message + ": " + drain.Summary(r.Nodes[0].Left(), 5)
	}
	c.opts.Log.Info("the deleted node's drain ended with pods left; trying again", "node", name, "retry", c.opts.Retry, "why", msg)
}

// finish deletes the machine and lets the Node go.
func (c *Controller) finish(ctx context.Context, node *corev1.Node, pool *v1alpha1.NodePool) error {
	if c.opts.DryRun {
		return nil
	}
	start := c.clock.Now()
	if err := c.machines.DeleteMachine(ctx, pool, c.machines.MachineOf(pool, node)); err != nil {
		c.event(node, corev1.EventTypeWarning, "MachineDeleteFailed", "sluice: deleting the node's machine: "+err.Error())
		return fmt.Errorf("deleting the machine of node %s: %w", node.Name, err)
	}
	if err := c.setFinalizer(ctx, node, false); err != nil {
		return err
	}
	c.event(node, corev1.EventTypeNormal, "Terminated", "sluice: node drained and its machine deleted")
	c.opts.Log.Info("node terminated", "node", node.Name, "pool", pool.Name, "machineDelete", c.clock.Since(start))
	c.forget(node.Name)
	return nil
}

func (c *Controller) setFinalizer(ctx context.Context, node *corev1.Node, on bool) error {
	if c.opts.DryRun {
		return nil
	}
	attempts := retry.DefaultRetry
	if c.opts.Live == nil {
		attempts.Steps = 1 // the node below was changed in place: no second try from it
	}
	err := retry.RetryOnConflict(attempts, func() error {
		orig := node.DeepCopy()
		changed := false
		if on {
			changed = controllerutil.AddFinalizer(node, contract.FinalizerTermination)
		} else {
			changed = controllerutil.RemoveFinalizer(node, contract.FinalizerTermination)
		}
		if !changed {
			return nil
		}
		// The finalizer list is replaced whole by a merge patch: the lock
		// keeps another writer's finalizer from being lost.
		err := c.kube.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner("sluice"))
		if !apierrors.IsConflict(err) || c.opts.Live == nil {
			return err
		}
		// The cache lagged the node (its kubelet's heartbeats change it
		// every few seconds): read it live and try again, rather than wait
		// out the workqueue's backoff with a drained node.
		fresh := &corev1.Node{}
		if gerr := c.opts.Live.Get(ctx, client.ObjectKeyFromObject(node), fresh); gerr != nil {
			return gerr
		}
		*node = *fresh
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("setting the finalizer on node %s: %w", node.Name, err)
	}
	return nil
}

// pools lists the cache's pools without copying them: every node's
// reconcile reads them, and none writes to them (a copy of 100 pools per
// node was most of a reconcile's cost at 5,000 nodes).
func (c *Controller) pools(ctx context.Context) ([]v1alpha1.NodePool, error) {
	var list v1alpha1.NodePoolList
	if err := c.kube.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing node pools: %w", err)
	}
	return list.Items, nil
}

func (c *Controller) ending(name string) ending {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended[name]
}

func (c *Controller) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ended, name)
}

func (c *Controller) wakeNode(name string) {
	ev := event.GenericEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	select {
	case c.wake <- ev:
	default:
		go func() { c.wake <- ev }()
	}
}

func (c *Controller) event(node *corev1.Node, typ, reason, msg string) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(node, typ, reason, msg)
	}
}
