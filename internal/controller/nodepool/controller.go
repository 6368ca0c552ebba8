// Package nodepool is the NodePool controller. For each pool it keeps the
// status true (nodes, resources, how many are disrupting, drifted and expired,
// the disruptions each reason may still make now, Ready and ProviderReady
// conditions) and, for a pool whose provider sluice runs, replaces expired
// and drifted nodes replace-first, as many at once as the pool's budgets
// allow. A broken pool affects only itself: it gets Ready=False with the
// reason, an Event and a metric, and is left alone while other pools carry
// on. docs/design/pools.md has the state machine.
package nodepool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
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

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/consolidation"
	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Machines makes and removes a pool's machines (internal/provider.Set).
type Machines interface {
	// Serves says whether this controller runs the named provider.
	Serves(name v1alpha1.ProviderName) bool
	CreateMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error)
	GetMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error)
	DeleteMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) error
	// ListMachines lists the machines the pool's provider made for it.
	ListMachines(ctx context.Context, pool *v1alpha1.NodePool) ([]*provider.Machine, error)
	// MachineOf is the name of the machine the pool's Node is; NamesOf
	// every name a Node is known by as a machine (provider.Machines).
	MachineOf(pool *v1alpha1.NodePool, n *corev1.Node) string
	NamesOf(n *corev1.Node) []string
	// CanReboot says whether the pool's provider reboots machines in
	// place; RebootMachine asks it to (provider.Rebooter).
	CanReboot(pool *v1alpha1.NodePool) bool
	RebootMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) error
	// CheckRegistration says why the pool's new machines will join without
	// the unregistered taint ("" when they will not; errors wrapping
	// provider.ErrCannotTell when the cloud does not show it).
	CheckRegistration(ctx context.Context, pool *v1alpha1.NodePool) (string, error)
	// CheckTemplate says how the labels and taints the cloud gives the
	// pool's new machines differ from its template ("" when they agree).
	CheckTemplate(ctx context.Context, pool *v1alpha1.NodePool) (string, error)
}

// Options configure the controller.
type Options struct {
	// DryRun decides and reports (Events, logs, status), and changes no node
	// and no machine.
	DryRun bool
	// RegistrationTimeout is how long a replacement machine may take to
	// become a Ready node before it is given up (deleted, and the old node
	// left in service); default 10 m.
	RegistrationTimeout time.Duration
	// PodsOn lists the pods on a node (the shared cache's index).
	PodsOn func(node string) ([]*corev1.Pod, error)
	// HoldsPodTerms says whether a node holds a pod with required
	// inter-pod terms (the shared cache's index); nil reads its pods.
	HoldsPodTerms func(node string) (bool, error)
	// LastChurn is when a pod last left a node (Churn.Last); nil counts
	// only arrivals.
	LastChurn func(node string) time.Time
	// Changes counts the changes a consolidation pass would see
	// (Changes.Seq); nil runs every pass that is due.
	Changes func() uint64
	// ValidationDelay is how long a consolidation decision waits before a
	// second pass must make it again for it to be carried out; default 15 s.
	ValidationDelay time.Duration
	// PassInterval is the least time between two consolidation passes of a
	// pool; default 10 s.
	PassInterval time.Duration
	// Queue drains the nodes an upgrade takes away (the termination
	// queue); nil leaves upgrades waiting at their drains.
	Queue    Queue
	Recorder record.EventRecorder
	Metrics  *Metrics
	Log      *slog.Logger
}

// Controller reconciles NodePools.
type Controller struct {
	kube client.Client
	// live reads from the API server, for the one question the cache may
	// answer stale: was the node marked already?
	live     client.Reader
	clock    clock.Clock
	machines Machines
	opts     Options

	mu sync.Mutex
	// failing holds, per pool, the provider's last refusal and when the
	// pool may ask again: a refused replacement is not retried at once.
	failing map[string]providerFailure
	// marked holds the nodes this controller marked for replacement until
	// its cache shows the mark: a pass that read the cache before the write
	// arrived would otherwise count them as in service and choose more.
	marked map[string]time.Time
	// pending holds each pool's consolidation decision until its second
	// look; lastPass when each pool was last looked at.
	pending  map[string]*decision
	lastPass map[string]time.Time
	// quiet holds, per pool, what its last pass that found nothing saw.
	quiet map[string]quietPass
	// drains holds how each upgrade drain last ended.
	drains map[string]drainEnd
	// given holds the replacements of records this controller took away
	// (a node given back), until the cache stops showing them: a stale
	// record is never acted on again (asking for its machine once more
	// would make one that no record names).
	given map[string]time.Time
	// registration holds each pool's last reading of whether its new
	// machines join tainted (registration.go).
	registration map[string]registrationCheck
	// halts holds, per pool, why its circuit breaker holds its repairs.
	halts map[string]string
	// alerts holds each pool's last reading of its Prometheus alerts.
	alerts map[string]alertReading
	// rebootHeld holds, per node, the last reason its reboot waited for.
	rebootHeld map[string]string
	// reboots holds the reboot records this controller moved on, until
	// its cache shows them (movedOn).
	reboots map[string]rebootProgress
	// wake queues a pool when one of its drains ends.
	wake chan event.GenericEvent
	// orphans paces the passes that find machines nothing accounts for.
	orphans orphanPasses
	// checks paces the provider reads of replacements on their way.
	checks machineChecks
	// nodes lists the cache's nodes, its own objects, read only
	// (SetupWithManager): a pass over a pool reads every node, and copying
	// 5,000 of them for each of 100 pools is most of a pass's cost.
	nodes func() []*corev1.Node
	// labelled lists the cache's nodes carrying one label, when the
	// informer has the index (readNodesFrom); nil otherwise.
	labelled func(key, value string) ([]*corev1.Node, bool)
	// planned, when set, collects what the methods would do instead of
	// reporting it, and planConsolidate decides consolidation's (Plan).
	planned         *[]Would
	planConsolidate func() *consolidation.Command
}

// markWait bounds how long a mark the cache does not show yet is trusted.
const markWait = 30 * time.Second

type providerFailure struct {
	reason, message string
	retryAt         time.Time
	backoff         time.Duration
}

// NewController returns the controller; SetupWithManager registers it.
func NewController(kube client.Client, live client.Reader, clk clock.Clock, machines Machines, opts Options) *Controller {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.RegistrationTimeout <= 0 {
		opts.RegistrationTimeout = 10 * time.Minute
	}
	if opts.ValidationDelay <= 0 {
		opts.ValidationDelay = DefaultValidationDelay
	}
	if opts.PassInterval <= 0 {
		opts.PassInterval = DefaultPassInterval
	}
	if opts.PodsOn == nil {
		opts.PodsOn = func(string) ([]*corev1.Pod, error) { return nil, nil }
	}
	return &Controller{kube: kube, live: live, clock: clk, machines: machines, opts: opts, failing: map[string]providerFailure{}, marked: map[string]time.Time{},
		pending: map[string]*decision{}, lastPass: map[string]time.Time{}, quiet: map[string]quietPass{}, drains: map[string]drainEnd{}, given: map[string]time.Time{}, registration: map[string]registrationCheck{}, halts: map[string]string{}, alerts: map[string]alertReading{}, rebootHeld: map[string]string{}, reboots: map[string]rebootProgress{}, wake: make(chan event.GenericEvent, 64)}
}

// SetupWithManager watches NodePools as their spec changes, and nodes as
// they come, go, or change in a way a pool's status or disruption reads
// (labels, taints, annotations, cordon, readiness, deletion): a node's
// change queues the pool that owns it, before and after the change.
func (c *Controller) SetupWithManager(mgr ctrl.Manager, workers int) error {
	nodeChanged := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		DeleteFunc: func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*corev1.Node)
			n, okN := e.ObjectNew.(*corev1.Node)
			return okO && okN && nodeMatters(o, n)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	// A replacement's Node is found by its machine's name, or by the
	// providerID its provider gives it (a cloud names Nodes itself).
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(context.Background(), &corev1.Node{}, indexMachine, func(o client.Object) []string {
		return c.machines.NamesOf(o.(*corev1.Node))
	}); err != nil {
		return fmt.Errorf("indexing nodes by machine: %w", err)
	}
	if err := indexer.IndexField(context.Background(), &corev1.Node{}, indexProviderID, func(o client.Object) []string {
		if id := o.(*corev1.Node).Spec.ProviderID; id != "" {
			return []string{provider.IDKey(id)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing nodes by providerID: %w", err)
	}
	if err := c.readNodesFrom(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodepool").
		// A pool's generation, or its upgrade's pause and abort.
		For(&v1alpha1.NodePool{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, upgradeControlChanged))).
		// A pool's nodes depend on the other pools (the oldest wins a node
		// two select): a pool that comes, goes or selects other nodes
		// changes every pool's members.
		Watches(&v1alpha1.NodePool{}, handler.EnqueueRequestsFromMapFunc(c.allPools), builder.WithPredicates(membershipChanged)).
		Watches(&corev1.Node{}, c.nodeOwners(), builder.WithPredicates(nodeChanged)).
		WatchesRawSource(source.Channel(c.wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		Complete(c)
}

// nodeMatters says whether a node's update changes anything a pool reads.
// A drain claim's renewal (every 10 s per draining node) does not: only its
// coming and going does.
func nodeMatters(o, n *corev1.Node) bool {
	return fmt.Sprint(o.Labels) != fmt.Sprint(n.Labels) ||
		fmt.Sprint(withoutClaim(o.Annotations)) != fmt.Sprint(withoutClaim(n.Annotations)) ||
		fmt.Sprint(o.Spec.Taints) != fmt.Sprint(n.Spec.Taints) ||
		o.Spec.Unschedulable != n.Spec.Unschedulable ||
		!o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
		budget.NodeReady(o) != budget.NodeReady(n) ||
		fmt.Sprint(o.Status.Capacity) != fmt.Sprint(n.Status.Capacity)
}

// nodeOwners queues, for a node's change, the pool that owns it and, when
// its labels moved it, the pool that owned it: not every pool (at 1,000
// nodes in 20 pools, a node's change was 20 reconciles). A node no pool
// selects still queues every pool: it may be a replacement whose machine a
// pool's record names (found by machine name or providerID), whose labels
// the cloud has not made the pool's yet.
func (c *Controller) nodeOwners() handler.Funcs {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], nodes ...client.Object) {
		var list v1alpha1.NodePoolList
		if err := c.kube.List(ctx, &list); err != nil {
			return
		}
		m := pools.NewMatcher(list.Items)
		for _, o := range nodes {
			n, ok := o.(*corev1.Node)
			if !ok {
				continue
			}
			owner, _ := m.For(n)
			if owner == nil {
				for _, p := range list.Items {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
				}
				return
			}
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: owner.Name}})
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

func (c *Controller) allPools(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.NodePoolList
	if err := c.kube.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, p := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}}
	}
	return out
}

// Reconcile observes one pool, replaces what its budgets allow, and writes
// its status.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx = withPassWindow(ctx)
	pool := &v1alpha1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			c.opts.Metrics.forget(req.Name)
			c.orphans.forget(req.Name)
			c.unsteer(ctx, req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	// The cache's own objects, not copies (100 pools and 5,000 nodes a
	// reconcile): read only, and copied before any write (setRecord,
	// markNode).
	var all v1alpha1.NodePoolList
	if err := c.kube.List(ctx, &all, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing node pools: %w", err)
	}
	nodes := c.nodes()
	now := c.clock.Now()
	v := observe(pool, MembersOf(pool, c.candidates(pool, nodes), all.Items), c.opts.PodsOn, now)
	v.cluster = nodes
	c.settleMarks(v, now)
	problem := pools.Validate(pool, v.Size)
	next := v.NextChange
	if problem != nil && !c.opts.DryRun {
		c.steer(ctx, v.Nodes, nil) // a pool that cannot be applied plans no rounds
	}
	if problem != nil && pool.Spec.Provider.Manages() && c.machines.Serves(pool.Spec.Provider.Name) {
		// Nothing new is chosen in a pool that cannot be applied, but a
		// replacement already asked for is seen through or given up.
		wait, _, errs := c.advanceAll(ctx, pool, v, now)
		next = sooner(next, wait)
		if err := errors.Join(errs...); err != nil {
			c.opts.Log.Error("moving replacements along", "nodepool", pool.Name, "err", err)
		}
	}
	if problem == nil {
		wait, err := c.disrupt(ctx, pool, v, now)
		if err != nil {
			c.opts.Log.Error("disrupting", "nodepool", pool.Name, "err", err)
			next = sooner(next, 5*time.Second)
		}
		next = sooner(next, wait)
		// What the pass wrote changes the counts: the node events it
		// causes queue the pool again, and the status follows then.
	}
	if pool.Spec.Provider.Manages() && c.machines.Serves(pool.Spec.Provider.Name) {
		wait, err := c.collectOrphans(ctx, pool, nodes, now)
		if err != nil {
			c.opts.Log.Error("collecting orphaned machines", "nodepool", pool.Name, "err", err)
		}
		next = sooner(next, wait)
	}
	if err := c.writeStatus(ctx, pool, v, problem, now); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: next}, nil
}

// Members returns the nodes the pool selects (a node that several pools
// select follows the oldest).
func Members(pool *v1alpha1.NodePool, nodes []corev1.Node, all []v1alpha1.NodePool) []*corev1.Node {
	return MembersOf(pool, pointers(nodes), all)
}

// MembersOf is Members over pointers to the nodes.
func MembersOf(pool *v1alpha1.NodePool, nodes []*corev1.Node, all []v1alpha1.NodePool) []*corev1.Node {
	// A node the pool's own selector does not select is not its member
	// whatever the other pools say: only those it selects are resolved
	// against every pool (which owns a node two select).
	own, err := metav1.LabelSelectorAsSelector(&pool.Spec.NodeSelector)
	if err != nil {
		return nil
	}
	var out []*corev1.Node
	m := pools.NewMatcher(all)
	for _, n := range nodes {
		if !own.Matches(labels.Set(n.Labels)) {
			continue
		}
		if owner, _ := m.For(n); owner != nil && owner.Name == pool.Name {
			out = append(out, n)
		}
	}
	return out
}

func pointers(nodes []corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		out[i] = &nodes[i]
	}
	return out
}

// sooner returns the shorter positive wait; zero means none.
func sooner(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// wakePool queues the pool at once (a drain of its ended).
func (c *Controller) wakePool(name string) {
	ev := event.GenericEvent{Object: &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	select {
	case c.wake <- ev:
	default:
		go func() { c.wake <- ev }()
	}
}

// upgradeControlChanged passes a pool whose pause or abort annotation
// changed.
var upgradeControlChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[contract.AnnotationUpgrade] != e.ObjectNew.GetAnnotations()[contract.AnnotationUpgrade]
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func (c *Controller) event(obj client.Object, typ, reason, msg string) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(obj, typ, reason, msg)
	}
}

// settleMarks counts the nodes this controller marked whose mark the cache
// does not show yet, and forgets marks the cache shows or that are old.
func (c *Controller) settleMarks(v *view, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range v.Nodes {
		at, ok := c.marked[n.Name]
		if !ok {
			continue
		}
		_, shown := n.Annotations[contract.AnnotationDisruption]
		if shown || now.Sub(at) > markWait {
			delete(c.marked, n.Name)
			continue
		}
		v.MarkUnseen(n.Name)
	}
}

// mark remembers that the controller marked the node.
func (c *Controller) mark(node string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.marked[node] = now
}

// withoutClaim is a node's annotations with the drain claim's value blanked
// (its presence kept).
func withoutClaim(a map[string]string) map[string]string {
	if _, ok := a[contract.AnnotationDrain]; !ok {
		return a
	}
	out := maps.Clone(a)
	out[contract.AnnotationDrain] = ""
	return out
}
