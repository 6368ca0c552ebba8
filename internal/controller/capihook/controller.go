// Package capihook makes sluice the drainer of the Machines Cluster API
// deletes in cluster-api pools (docs/design/cluster-api.md). Every Machine of
// such a pool carries sluice's pre-drain deletion hook, so Cluster API waits
// before its own cordon and drain; sluice drains the Node through the
// termination queue under the pool's budgets (a rollout or scale-down is
// voluntary; a MachineHealthCheck remediation is a repair and is not held),
// reports the blocker on the Machine as well as on the Node, and then lets
// Cluster API go on without draining again. A Machine whose pool is gone, or
// whose provider this controller no longer runs, loses the hook: Cluster API
// drains as it did before sluice.
package capihook

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/termination"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// Queue is the part of the termination queue the controller uses.
type Queue interface {
	Submit(termination.Request) (termination.Admission, error)
	Holds(node, key string) bool
	Running(node string) bool
}

// Options configure the controller.
type Options struct {
	DryRun   bool
	Recorder record.EventRecorder
	Log      *slog.Logger
	// Retry is how long a drain that ended with pods left waits before it
	// is tried again; default 15 s.
	Retry time.Duration
}

// Controller holds and drains the deleting Machines of cluster-api pools.
type Controller struct {
	kube  client.Client
	clock clock.Clock
	queue Queue
	opts  Options
	wake  chan event.GenericEvent

	mu     sync.Mutex
	drains map[types.UID]*progress

	// admitting serializes the budget check and the record's write, so two
	// workers never both spend the last disruption a budget allows, and
	// admitted remembers the Nodes admitted until the cache shows their
	// record.
	admitting sync.Mutex
	admitted  map[string]time.Time
}

// progress is what sluice knows of one Machine's drain.
type progress struct {
	drained bool
	retryAt time.Time
	// blocked is the latest blocker per pod, from the drain's progress.
	blocked map[string]string
	// left says why the last drain ended with pods on the Node.
	left string
}

// NewController returns the controller; SetupWithManager registers it.
func NewController(kube client.Client, clk clock.Clock, queue Queue, opts Options) *Controller {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Retry <= 0 {
		opts.Retry = 15 * time.Second
	}
	return &Controller{kube: kube, clock: clk, queue: queue, opts: opts,
		wake: make(chan event.GenericEvent, 256), drains: map[types.UID]*progress{}, admitted: map[string]time.Time{}}
}

// machine is an empty Machine at the version sluice speaks.
func machine() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(clusterapi.Group + "/" + clusterapi.Version)
	u.SetKind("Machine")
	return u
}

// SetupWithManager watches Machines, and pools as their settings change.
func (c *Controller) SetupWithManager(mgr ctrl.Manager, workers int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterapi-hook").
		For(machine()).
		Watches(&v1alpha1.NodePool{}, handler.EnqueueRequestsFromMapFunc(c.poolMachines), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(c.wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		Complete(c)
}

// poolMachines are the Machines of a cluster-api pool, whose hooks follow
// the pool.
func (c *Controller) poolMachines(ctx context.Context, o client.Object) []reconcile.Request {
	pool, ok := o.(*v1alpha1.NodePool)
	if !ok || pool.Spec.Provider.ClusterAPI == nil {
		return nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(clusterapi.Group + "/" + clusterapi.Version)
	list.SetKind("MachineList")
	if err := c.kube.List(ctx, list, client.InNamespace(pool.Spec.Provider.ClusterAPI.Namespace)); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, m := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
	}
	return reqs
}

// Reconcile keeps the hook on the Machines of cluster-api pools, and drains
// and releases those Cluster API deletes.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := machine()
	if err := c.kube.Get(ctx, req.NamespacedName, m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var list v1alpha1.NodePoolList
	if err := c.kube.List(ctx, &list); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing node pools: %w", err)
	}
	pool := PoolOf(m, list.Items)
	hooked := m.GetAnnotations()[clusterapi.AnnotationPreDrainHook] != ""
	deleting := m.GetDeletionTimestamp() != nil
	switch {
	case pool == nil:
		if hooked {
			// No pool of this controller's takes the Machine any more:
			// Cluster API drains it, as it did before sluice.
			return reconcile.Result{}, c.release(ctx, m, false, "")
		}
		return reconcile.Result{}, nil
	case !deleting && !hooked:
		return reconcile.Result{}, c.hook(ctx, m)
	case !deleting || !hooked:
		// Deleted before sluice hooked it: Cluster API drains it.
		return reconcile.Result{}, nil
	}
	return c.take(ctx, m, pool, list.Items)
}

// PoolOf is the cluster-api pool whose MachineDeployment (or MachineSet) the
// Machine belongs to; nil for none.
func PoolOf(m *unstructured.Unstructured, all []v1alpha1.NodePool) *v1alpha1.NodePool {
	for i := range all {
		p := &all[i]
		spec := p.Spec.Provider.ClusterAPI
		if p.Spec.Provider.Name != v1alpha1.ProviderClusterAPI || spec == nil || spec.Namespace != m.GetNamespace() {
			continue
		}
		if spec.MachineDeployment != "" && m.GetLabels()[clusterapi.LabelDeploymentName] == spec.MachineDeployment {
			return p
		}
		if spec.MachineSet != "" && slices.ContainsFunc(m.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
			return r.Kind == "MachineSet" && r.Name == spec.MachineSet
		}) {
			return p
		}
	}
	return nil
}

// hook adds sluice's pre-drain hook to a live Machine.
func (c *Controller) hook(ctx context.Context, m *unstructured.Unstructured) error {
	if c.opts.DryRun {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"sluice"}}}`, clusterapi.AnnotationPreDrainHook)
	err := c.kube.Patch(ctx, m, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("sluice"))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// release removes the hook, and with exclude also tells Cluster API to skip
// its own drain (sluice drained the Node), in one patch.
func (c *Controller) release(ctx context.Context, m *unstructured.Unstructured, exclude bool, why string) error {
	if c.opts.DryRun {
		return nil
	}
	orig := m.DeepCopy()
	a := m.GetAnnotations()
	delete(a, clusterapi.AnnotationPreDrainHook)
	if exclude {
		a[clusterapi.AnnotationExcludeDraining] = "sluice"
	}
	m.SetAnnotations(a)
	// A merge patch of the two annotation keys only: it needs no lock (the
	// condition just applied changed the resourceVersion), and it changes
	// nothing else of the Machine.
	err := c.kube.Patch(ctx, m, client.MergeFrom(orig), client.FieldOwner("sluice"))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("releasing Machine %s/%s: %w", m.GetNamespace(), m.GetName(), err)
	}
	if why != "" {
		c.opts.Log.Info("released the Machine to Cluster API", "machine", m.GetNamespace()+"/"+m.GetName(), "drainedBySluice", exclude, "why", why)
	}
	c.forget(m.GetUID())
	return nil
}

// take drains the Node of a Machine Cluster API is deleting, then releases
// the Machine. The Machine is released with exclude-node-draining only once
// a drain of sluice's emptied the Node; released for any other reason,
// Cluster API drains what is left itself.
func (c *Controller) take(ctx context.Context, m *unstructured.Unstructured, pool *v1alpha1.NodePool, all []v1alpha1.NodePool) (reconcile.Result, error) {
	node, err := c.nodeOf(ctx, m)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node == nil {
		// No Node: Cluster API has nothing to drain either.
		return reconcile.Result{}, c.release(ctx, m, false, "the Machine has no Node")
	}
	if unreachable(node) {
		msg := "sluice: the Node's kubelet does not answer (Ready Unknown): released to Cluster API, which deletes pods on an unreachable Node without waiting for them"
		c.event(node, corev1.EventTypeWarning, "ReleasedToClusterAPI", msg)
		c.condition(ctx, m, metav1.ConditionTrue, "NodeUnreachable", msg)
		return reconcile.Result{}, c.release(ctx, m, false, "its Node is unreachable")
	}
	rec, err := disruption.RecordOf(node)
	if disruption.IsNewerRecord(err) {
		// A newer sluice was draining it (a rollback happened since): its
		// record is not ours to rewrite.
		c.event(node, corev1.EventTypeWarning, disruption.EventRecordFromNewerVersion, "sluice: "+err.Error())
		return reconcile.Result{RequeueAfter: 15 * time.Second}, nil
	}
	if err != nil {
		c.opts.Log.Info("unreadable disruption record on the Machine's Node; draining it as Cluster API's deletion", "node", node.Name, "err", err)
		rec = nil
	}
	p := c.progress(m.GetUID())
	deadline, bound := c.bound(m, pool)
	now := c.clock.Now()
	if p.drained {
		if waiting := c.waitCompleted(ctx, m, node); waiting != "" && (deadline.IsZero() || now.Before(deadline)) {
			c.condition(ctx, m, metav1.ConditionFalse, "WaitingForCompletion", waiting)
			return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
		}
		c.condition(ctx, m, metav1.ConditionTrue, "Drained", "sluice drained the Node; Cluster API goes on without draining it again")
		c.event(node, corev1.EventTypeNormal, "DrainedForClusterAPI", fmt.Sprintf("sluice: drained for Cluster API's deletion of Machine %s/%s", m.GetNamespace(), m.GetName()))
		return reconcile.Result{}, c.release(ctx, m, true, "drained")
	}
	if !deadline.IsZero() && now.After(deadline.Add(graceSlack)) {
		// The bound passed and no drain of sluice's emptied the Node (held
		// for the budget, or pods left): Cluster API drains what is left.
		msg := fmt.Sprintf("sluice held Cluster API's deletion of Machine %s/%s for %s (nodeDrainTimeoutSeconds or the pool's terminationGracePeriod) without emptying the Node; released to Cluster API, which drains it",
			m.GetNamespace(), m.GetName(), bound)
		c.event(node, corev1.EventTypeWarning, "DrainBoundReached", "sluice: "+msg)
		c.condition(ctx, m, metav1.ConditionTrue, "BoundReached", msg)
		return reconcile.Result{}, c.release(ctx, m, false, "the bound passed")
	}
	if wait := p.retryAt.Sub(now); wait > 0 {
		c.condition(ctx, m, metav1.ConditionFalse, "DrainBlocked", p.left)
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	why := classify(m)
	if rec == nil {
		// A Node with a record counts against the budget already (sluice
		// is replacing or deleting it): it is drained without waiting.
		wait, err := c.admit(ctx, m, node, pool, all, why)
		if err != nil || wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, err
		}
	}
	if c.opts.DryRun {
		c.opts.Log.Info("dry run: would drain the Node for Cluster API", "node", node.Name, "machine", m.GetNamespace()+"/"+m.GetName(), "why", why.what)
		return reconcile.Result{}, nil
	}
	return c.drain(ctx, m, node, pool, why, deadline)
}

// nodeOf is the Machine's Node: status.nodeRef, or the Node whose
// providerID is the Machine's (as Cluster API itself looks it up when it
// deletes); nil when there is none.
func (c *Controller) nodeOf(ctx context.Context, m *unstructured.Unstructured) (*corev1.Node, error) {
	if name, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name"); name != "" {
		node := &corev1.Node{}
		err := c.kube.Get(ctx, types.NamespacedName{Name: name}, node)
		if err == nil {
			return node, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
	if id == "" {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes); err != nil {
		return nil, err
	}
	for i := range nodes.Items {
		if nodes.Items[i].Spec.ProviderID == id {
			return &nodes.Items[i], nil
		}
	}
	return nil, nil
}

// graceSlack lets the drain's own deadline action run before the Machine is
// released regardless.
const graceSlack = 10 * time.Second

func (c *Controller) drain(ctx context.Context, m *unstructured.Unstructured, node *corev1.Node, pool *v1alpha1.NodePool, why deletion, deadline time.Time) (reconcile.Result, error) {
	key := "capi/" + string(m.GetUID())
	if c.queue.Holds(node.Name, key) {
		c.condition(ctx, m, metav1.ConditionFalse, "Draining", c.blockers(m.GetUID(), node.Name))
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if c.queue.Running(node.Name) {
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	rules, err := c.rules(ctx, m)
	if err != nil {
		return reconcile.Result{}, err
	}
	opts := drain.Options{IgnoreDaemonSets: true, DeleteEmptyDirData: true, Force: true, CordonOwner: "termination",
		PodFilter: rules.evicts}
	if !deadline.IsZero() {
		opts.Deadline = deadline
		opts.OnDeadline = drain.OnDeadlineDelete
	}
	uid, name := m.GetUID(), types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}
	admission, err := c.queue.Submit(termination.Request{Node: node.Name, Pool: pool.Name, Reason: termination.Reason(why.reason), Key: key,
		Involuntary: why.involuntary, Options: opts, Observer: c.observer(uid),
		Done:     func(r *drain.Report, err error) { c.drainEnded(uid, node.Name, r, err) },
		Released: func() { c.wakeMachine(name) }})
	if err != nil {
		return reconcile.Result{}, err
	}
	if admission == termination.Started {
		msg := fmt.Sprintf("sluice: draining the Node for Cluster API's deletion of Machine %s/%s (%s)", m.GetNamespace(), m.GetName(), why.what)
		if !deadline.IsZero() {
			msg += fmt.Sprintf("; pods still here at %s are deleted", deadline.UTC().Format(time.RFC3339))
		}
		c.event(node, corev1.EventTypeNormal, "DrainingForClusterAPI", msg)
		c.condition(ctx, m, metav1.ConditionFalse, "Draining", msg)
	}
	return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
}

// admit decides whether the Node may start draining now: a repair at once
// (it counts against the budget but is not held by it), a rollout or a
// scale-down once the pool's budgets for its reason allow. It writes the
// Terminating record when admitted, so every controller counts the Node.
func (c *Controller) admit(ctx context.Context, m *unstructured.Unstructured, node *corev1.Node, pool *v1alpha1.NodePool, all []v1alpha1.NodePool, why deletion) (time.Duration, error) {
	c.admitting.Lock()
	defer c.admitting.Unlock()
	now := c.clock.Now()
	if !why.involuntary {
		var list corev1.NodeList
		if err := c.kube.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			return 0, fmt.Errorf("listing nodes: %w", err)
		}
		// The pool's members as the NodePool controller counts them.
		members := poolctrl.Members(pool, list.Items, all)
		unseen := 0 // admitted here, their record not in the cache yet
		for _, n := range members {
			if at, ok := c.admitted[n.Name]; ok {
				if _, recorded := n.Annotations[contract.AnnotationDisruption]; !recorded && now.Sub(at) < admittedMemory {
					unseen++
				} else {
					delete(c.admitted, n.Name)
				}
			}
		}
		a, err := disruption.Observe(pool, members, now).Allowed(why.budget, now)
		if err != nil {
			return 0, err
		}
		if a.Nodes-unseen < 1 {
			msg := fmt.Sprintf("sluice holds Cluster API's deletion (%s) until NodePool %s's disruption budget allows it", why.what, pool.Name)
			c.condition(ctx, m, metav1.ConditionFalse, "WaitingForBudget", msg)
			c.event(node, corev1.EventTypeNormal, "ClusterAPIDeletionWaits", "sluice: "+msg)
			return 10 * time.Second, nil
		}
	}
	if c.opts.DryRun {
		c.opts.Log.Info("dry run: would drain the Node for Cluster API", "node", node.Name, "machine", m.GetName())
		return 0, nil
	}
	rec := disruption.Record{Reason: why.reason, Phase: disruption.PhaseTerminating, Since: now,
		Message: recordPrefix + m.GetNamespace() + "/" + m.GetName()}
	orig := node.DeepCopy()
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[contract.AnnotationDisruption] = rec.String()
	if err := c.kube.Patch(ctx, node, client.MergeFrom(orig), client.FieldOwner("sluice")); err != nil {
		if kube.MayHaveApplied(err) {
			// The record may be written though its answer was lost: the
			// Node counts as admitted until the cache shows which.
			c.admitted[node.Name] = now
			return time.Second, nil
		}
		return 0, fmt.Errorf("recording the disruption of node %s: %w", node.Name, err)
	}
	c.admitted[node.Name] = now
	return 0, nil
}

// admittedMemory is how long an admission counts before the cache shows its
// record.
const admittedMemory = 30 * time.Second

// recordPrefix starts the message of the records this controller writes, so
// a person (and explain) tells them from the NodePool controller's.
const recordPrefix = "Cluster API deletes Machine "

// bound is when sluice stops holding the Machine: the shorter of its
// nodeDrainTimeoutSeconds and the pool's terminationGracePeriod, whichever
// are set, from when Cluster API began waiting for the hook; zero for none.
func (c *Controller) bound(m *unstructured.Unstructured, pool *v1alpha1.NodePool) (time.Time, time.Duration) {
	var limit time.Duration
	if s, ok, _ := unstructured.NestedInt64(m.Object, "spec", "deletion", "nodeDrainTimeoutSeconds"); ok && s > 0 {
		limit = time.Duration(s) * time.Second
	}
	if g, ok := pool.DisruptionSpec().TerminationGracePeriodOrNone(); ok && (limit == 0 || g < limit) {
		limit = g
	}
	if limit == 0 {
		return time.Time{}, 0
	}
	start := m.GetDeletionTimestamp().Time
	if s, ok, _ := unstructured.NestedString(m.Object, "status", "deletion", "waitForPreDrainHookStartTime"); ok {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			start = t
		}
	}
	return start.Add(limit), limit
}

// unreachable: the Node's kubelet stopped reporting (Ready Unknown), which
// Cluster API calls unreachable.
func unreachable(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionUnknown
		}
	}
	return false
}

func (c *Controller) progress(uid types.UID) progress {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.drains[uid]; p != nil {
		return *p
	}
	return progress{}
}

func (c *Controller) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.drains, uid)
}

func (c *Controller) drainEnded(uid types.UID, node string, r *drain.Report, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.drains[uid]
	if p == nil {
		p = &progress{}
		c.drains[uid] = p
	}
	if err == nil && r != nil && len(r.Nodes) == 1 && r.Nodes[0].Outcome == drain.NodeDrained {
		p.drained = true
		return
	}
	p.retryAt = c.clock.Now().Add(c.opts.Retry)
	switch {
	case err != nil:
		p.left = fmt.Sprintf("sluice's drain of Node %s failed (%v); trying again in %s", node, err, c.opts.Retry)
	case r != nil && len(r.Nodes) == 1:
		left := r.Nodes[0].Left()
		p.left = fmt.Sprintf("sluice's drain of Node %s left %d pod(s) (%s): %s; trying again in %s",
			node, len(left), r.Nodes[0].Message, drain.Summary(left, 3), c.opts.Retry)
	default:
		p.left = fmt.Sprintf("sluice's drain of Node %s ended with pods left; trying again in %s", node, c.opts.Retry)
	}
	c.opts.Log.Info("the drain for Cluster API ended with pods left; trying again", "node", node, "retry", c.opts.Retry, "why", p.left)
}

// observer follows the drain's blocked pods for the Machine's condition.
func (c *Controller) observer(uid types.UID) drain.Observer {
	return drain.ObserverFunc(func(p drain.Progress) {
		c.mu.Lock()
		defer c.mu.Unlock()
		s := c.drains[uid]
		if s == nil {
			s = &progress{}
			c.drains[uid] = s
		}
		if s.blocked == nil {
			s.blocked = map[string]string{}
		}
		switch p.Kind {
		case drain.ProgressBlocked:
			why := string(p.Reason)
			if p.PDB != "" {
				why += " (PodDisruptionBudget " + p.PDB + ")"
			}
			if p.Message != "" {
				why += ": " + p.Message
			}
			s.blocked[p.Pod] = why
		case drain.ProgressEvicting, drain.ProgressForced, drain.ProgressGone:
			delete(s.blocked, p.Pod)
		}
	})
}

// blockers says what keeps the Node from emptying, for the condition.
func (c *Controller) blockers(uid types.UID, node string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.drains[uid]
	if s == nil || len(s.blocked) == 0 {
		return "sluice is draining Node " + node
	}
	pods := make([]string, 0, len(s.blocked))
	for p := range s.blocked {
		pods = append(pods, p)
	}
	slices.Sort(pods)
	msg := fmt.Sprintf("sluice is draining Node %s; %d pod(s) cannot leave yet: ", node, len(pods))
	for i, p := range pods {
		if i == 3 {
			msg += fmt.Sprintf("; and %d more", len(pods)-3)
			break
		}
		if i > 0 {
			msg += "; "
		}
		msg += p + " " + s.blocked[p]
	}
	return msg
}

func (c *Controller) wakeMachine(name types.NamespacedName) {
	m := machine()
	m.SetNamespace(name.Namespace)
	m.SetName(name.Name)
	ev := event.GenericEvent{Object: m}
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
