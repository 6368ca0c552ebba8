package registration

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Machines is what registration asks of the providers (provider.Machines
// has it): the machine a Node is, and what the cloud says of it.
type Machines interface {
	GetMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error)
	MachineOf(pool *v1alpha1.NodePool, n *corev1.Node) string
}

// Options configure the controller.
type Options struct {
	// DryRun reports what registration would apply and changes nothing.
	DryRun   bool
	Recorder record.EventRecorder
	Registry prometheus.Registerer
	Log      *slog.Logger
	// Live reads a node from the API server when a write found the cache's
	// copy stale; nil leaves the retry to the workqueue.
	Live client.Reader
}

// Reconciler registers new Nodes. Build it with New.
type Reconciler struct {
	kube     client.Client // reads from the shared cache
	clock    clock.PassiveClock
	machines Machines
	opts     Options
}

// indexReplacement maps a Node with a disruption record to its
// replacement's names ("machine/<name>", "id/<providerID key>"), so that a
// Node that joined without the taint is known as a replacement.
const indexReplacement = "registration.replacement"

// unclaimedRetry is how often a tainted Node no pool claims is looked at
// again (a pool may be created for it).
const unclaimedRetry = time.Minute

// registered counts the Nodes registered, by pool and how they joined.
var registered = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_registration_nodes_total",
	Help: "New nodes given their pool's template, by pool and how they joined (tainted: with " + contract.TaintUnregistered + "; late: without it, so pods may have landed first)."},
	[]string{"pool", "joined"})

// New returns the controller; SetupWithManager registers it.
func New(kube client.Client, clk clock.PassiveClock, machines Machines, opts Options) *Reconciler {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	if opts.Registry != nil {
		// One counter for every registry (a test runs several controllers).
		_ = opts.Registry.Register(registered)
	}
	return &Reconciler{kube: kube, clock: clk, machines: machines, opts: opts}
}

// SetupWithManager watches Nodes that arrive, or change their taints, their
// noted machine or their providerID while not registered.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Node{}, indexReplacement, replacementKeys); err != nil {
		return fmt.Errorf("indexing nodes by their replacement: %w", err)
	}
	waiting := func(o client.Object) bool {
		n, ok := o.(*corev1.Node)
		if !ok || !n.DeletionTimestamp.IsZero() {
			return false
		}
		_, done := n.Annotations[contract.AnnotationRegistered]
		return provider.Tainted(n) || !done
	}
	changed := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return waiting(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*corev1.Node)
			n, okN := e.ObjectNew.(*corev1.Node)
			if !okO || !okN || !waiting(n) {
				return false
			}
			return provider.Tainted(o) != provider.Tainted(n) || o.Spec.ProviderID != n.Spec.ProviderID ||
				o.Annotations[contract.AnnotationMachine] != n.Annotations[contract.AnnotationMachine] ||
				o.Labels[contract.LabelNodePool] != n.Labels[contract.LabelNodePool]
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("registration").
		For(&corev1.Node{}, builder.WithPredicates(changed)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// Reconcile registers the node if it waits for it: tainted, or a
// replacement sluice asked for that joined without the taint.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	n := &corev1.Node{}
	if err := r.kube.Get(ctx, types.NamespacedName{Name: req.Name}, n); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !n.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	_, registered := provider.Registered(n)
	tainted := provider.Tainted(n)
	if !tainted && registered {
		return reconcile.Result{}, nil
	}
	pools, err := r.pools(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	replaced, err := r.replaced(ctx, n)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !tainted && replaced == nil {
		return reconcile.Result{}, nil // not one sluice asked for: someone else's node
	}
	pool := poolOf(n, replaced, pools)
	if pool == nil {
		if tainted {
			r.opts.Recorder.Eventf(n, corev1.EventTypeWarning, "NotRegistered",
				"no NodePool claims this node (no %s label, no replacement record names it, no pool's nodeSelector matches it): it keeps the %s taint until one does",
				contract.LabelNodePool, contract.TaintUnregistered)
			return reconcile.Result{RequeueAfter: unclaimedRetry}, nil
		}
		return reconcile.Result{}, nil
	}
	image, err := r.image(ctx, pool, n)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.register(ctx, n, pool, image)
}

// register patches the node with its pool's template and reports it.
func (r *Reconciler) register(ctx context.Context, cached *corev1.Node, pool *v1alpha1.NodePool, image string) error {
	n := cached.DeepCopy()
	a := provider.Apply(n, pool, image, r.clock.Now())
	what := describe(a)
	if r.opts.DryRun {
		r.opts.Recorder.Eventf(cached, corev1.EventTypeNormal, "WouldRegister", "dry run: would give this node pool %s's template (%s)", pool.Name, what)
		return nil
	}
	// The optimistic lock keeps a taint someone else added meanwhile: the
	// patch replaces the whole list.
	if err := r.patch(ctx, cached, n, pool, image); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("registering node %s: %w", n.Name, err)
	}
	joined := "tainted"
	if a.Late {
		joined = "late"
		r.opts.Recorder.Eventf(n, corev1.EventTypeWarning, "RegisteredLate",
			"joined without the %s:NoExecute taint, so pods may have landed before it had pool %s's template (%s applied now): register the pool's machines with --register-with-taints=%s=true:NoExecute (docs/providers.md#registration)",
			contract.TaintUnregistered, pool.Name, what, contract.TaintUnregistered)
	} else {
		r.opts.Recorder.Eventf(n, corev1.EventTypeNormal, "Registered", "given pool %s's template (%s)", pool.Name, what)
	}
	registered.WithLabelValues(pool.Name, joined).Inc()
	r.opts.Log.Info("node registered", "node", n.Name, "pool", pool.Name, "late", a.Late, "labels", len(a.Labels), "taints", len(a.Taints), "image", a.Image)
	return nil
}

// patch writes the template applied to n (read as cached). The optimistic
// lock keeps a taint someone else added meanwhile (the patch replaces the
// whole list); when the cache lagged the node, which a new node's kubelet
// changes every few seconds, it is read live and the template applied again,
// rather than wait out the workqueue's backoff with a node no pod may use.
func (r *Reconciler) patch(ctx context.Context, cached, n *corev1.Node, pool *v1alpha1.NodePool, image string) error {
	attempts := retry.DefaultRetry
	if r.opts.Live == nil {
		attempts.Steps = 1
	}
	return retry.RetryOnConflict(attempts, func() error {
		err := r.kube.Patch(ctx, n, client.MergeFromWithOptions(cached, client.MergeFromWithOptimisticLock{}), client.FieldOwner("sluice"))
		if !apierrors.IsConflict(err) || r.opts.Live == nil {
			return err
		}
		fresh := &corev1.Node{}
		if gerr := r.opts.Live.Get(ctx, client.ObjectKeyFromObject(n), fresh); gerr != nil {
			return gerr
		}
		if !fresh.DeletionTimestamp.IsZero() {
			return nil
		}
		cached = fresh
		n = fresh.DeepCopy()
		provider.Apply(n, pool, image, r.clock.Now())
		return err
	})
}

func describe(a provider.Applied) string {
	parts := []string{plural(len(a.Labels), "label")}
	if len(a.Taints) > 0 {
		parts = append(parts, "taints "+strings.Join(a.Taints, ", "))
	}
	if a.Image != "" {
		parts = append(parts, "image "+a.Image)
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// image is the image the cloud reports for the node's machine, "" when the
// node says its image already, the pool makes no machines, or the provider
// does not know the machine. A provider that cannot answer now is an error:
// the node waits, tainted, and is looked at again.
func (r *Reconciler) image(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node) (string, error) {
	if n.Annotations[contract.AnnotationImage] != "" || !pool.Spec.Provider.Manages() {
		return "", nil
	}
	m, err := r.machines.GetMachine(ctx, pool, r.machines.MachineOf(pool, n))
	if err != nil {
		if provider.IsNotFound(err) {
			return "", nil
		}
		if e, ok := provider.AsError(err); ok && e.Code == "ProviderNotEnabled" {
			return "", nil
		}
		return "", fmt.Errorf("reading the machine of node %s: %w", n.Name, err)
	}
	return m.Image, nil
}

func (r *Reconciler) pools(ctx context.Context) ([]v1alpha1.NodePool, error) {
	var list v1alpha1.NodePoolList
	if err := r.kube.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	return list.Items, nil
}

// replaced is the Node whose record names n as its replacement, nil for
// none.
func (r *Reconciler) replaced(ctx context.Context, n *corev1.Node) (*corev1.Node, error) {
	keys := []string{"machine/" + provider.MachineName(n)}
	if n.Spec.ProviderID != "" {
		keys = append(keys, "id/"+provider.IDKey(n.Spec.ProviderID))
	}
	for _, k := range keys {
		var list corev1.NodeList
		if err := r.kube.List(ctx, &list, client.MatchingFields{indexReplacement: k}); err != nil {
			return nil, fmt.Errorf("finding the node %s replaces: %w", n.Name, err)
		}
		if len(list.Items) > 0 {
			return &list.Items[0], nil
		}
	}
	return nil, nil
}

// poolOf is the pool the node joins: the one its provider labelled it with,
// else the one of the node it replaces, else the one whose nodeSelector
// matches it.
func poolOf(n, replaced *corev1.Node, pools []v1alpha1.NodePool) *v1alpha1.NodePool {
	if name := n.Labels[contract.LabelNodePool]; name != "" {
		for i := range pools {
			if pools[i].Name == name {
				return &pools[i]
			}
		}
	}
	m := nodepool.NewMatcher(pools)
	if replaced != nil {
		if p, _ := m.For(replaced); p != nil {
			return p
		}
	}
	p, _ := m.For(n)
	return p
}

// replacementKeys are the index values of a Node with a record: its
// replacement's machine name and providerID.
func replacementKeys(o client.Object) []string {
	rec, err := disruption.RecordOf(o.(*corev1.Node))
	if err != nil || rec == nil || rec.Replacement == "" {
		return nil
	}
	keys := []string{"machine/" + rec.Replacement}
	if rec.ReplacementProviderID != "" {
		keys = append(keys, "id/"+provider.IDKey(rec.ReplacementProviderID))
	}
	return keys
}
