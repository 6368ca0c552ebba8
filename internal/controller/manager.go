// Package controller assembles sluice's controllers into one
// controller-runtime manager: one shared informer cache (Nodes, Pods indexed
// by node and stripped of what sluice never reads, PodDisruptionBudgets,
// NodePools), one termination queue with its cross-node budget, leader
// election on a Lease, health probes and Prometheus metrics (the workqueue
// and client metrics controller-runtime gives included).
package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sluice-dev/sluice/internal/controller/capihook"
	"github.com/sluice-dev/sluice/internal/controller/claims"
	"github.com/sluice-dev/sluice/internal/controller/deletion"
	"github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/controller/registration"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/termination"
	"github.com/sluice-dev/sluice/internal/timeline"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/simulate"
)

// Options configure the controller process.
type Options struct {
	// Identity names this replica on the Lease and on drain claims.
	Identity string
	// PodNamespace is the namespace of the controller's own pod (evicted last
	// when it runs on a node it drains); "" when it runs outside a pod.
	PodNamespace string

	LeaderElection bool
	LeaseNamespace string
	LeaseName      string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration

	// MetricsAddress serves /metrics; HealthAddress serves /healthz and
	// /readyz; "0" turns either off.
	MetricsAddress string
	HealthAddress  string
	// Profiling serves Go's /debug/pprof/ on MetricsAddress too.
	Profiling bool

	// RequestTimeout bounds every API request the drains make and every
	// reconcile (watches are not bounded: they are meant to stay open).
	RequestTimeout time.Duration

	// Workers is how many nodes are reconciled at once (drains run beside).
	Workers int
	// Limits cap the nodes disrupting at once; MaxInFlight the evictions.
	Limits      termination.Limits
	MaxInFlight int

	// Machines makes and deletes the machines of pools with a provider;
	// nil: no provider is enabled, and such pools report ProviderReady=False.
	Machines Machines
	// DryRun: every controller decides and reports (status, Events, logs),
	// and changes no node and no machine.
	DryRun bool
	// RegistrationTimeout bounds how long a replacement may take to become
	// a Ready node.
	RegistrationTimeout time.Duration
	// ConsolidationValidationDelay is how long a consolidation decision
	// waits for a second pass to confirm it; default 15 s.
	ConsolidationValidationDelay time.Duration

	// TimelineNamespace and TimelineRetention: every drain's timeline is
	// kept as a ConfigMap in that namespace for that long after the drain,
	// pruned hourly (`sluice explain node NODE --timeline`); 0 keeps none
	// and deletes those kept before; "" leaves ConfigMaps alone.
	TimelineNamespace string
	TimelineRetention time.Duration

	Webhook *maintenance.Webhook
	// Leading is more work that runs on the leader only (the AWS queue
	// reader).
	Leading []func(context.Context) error
	Log     *slog.Logger
	Clock   clock.WithTicker

	// Registry takes sluice's own metrics; default the registry the
	// manager serves on MetricsAddress.
	Registry prometheus.Registerer
	// SeveralManagers lets one process build more than one manager (tests):
	// controller-runtime otherwise refuses a second controller of a name.
	SeveralManagers bool
}

// terminationQueue builds the queue every drain goes through, keeping the
// drains' timelines when asked, and adds it (and the timelines' pruning) to
// the manager.
func terminationQueue(mgr manager.Manager, clientset kubernetes.Interface, shared *drain.Shared, recorder record.EventRecorder, opts Options) (*termination.Queue, error) {
	queue, err := termination.New(clientset, opts.Clock, shared, opts.Limits, opts.Identity, recorder,
		termination.NewMetrics(opts.Registry), opts.Log.With("component", "termination"))
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(queue); err != nil {
		return nil, fmt.Errorf("adding the termination queue: %w", err)
	}
	if opts.TimelineNamespace == "" || opts.DryRun {
		return queue, nil
	}
	// With no retention nothing is kept, and what an earlier run kept is
	// deleted at the first pruning.
	store := timeline.NewStore(clientset, opts.TimelineNamespace, opts.TimelineRetention, opts.Clock, opts.Log.With("component", "timelines"))
	if opts.TimelineRetention > 0 {
		queue.KeepTimelines(store)
	}
	if err := mgr.Add(store); err != nil {
		return nil, fmt.Errorf("adding the timelines' pruning: %w", err)
	}
	return queue, nil
}

// Machines makes and deletes pools' machines (internal/provider.Set).
type Machines interface {
	nodepool.Machines
}

// noMachines answers every pool with a provider when no provider is enabled.
type noMachines struct{}

func (noMachines) Serves(v1alpha1.ProviderName) bool { return false }

func (noMachines) CreateMachine(_ context.Context, pool *v1alpha1.NodePool, _ string) (*provider.Machine, error) {
	return nil, provider.NotEnabled(pool.Spec.Provider.Name)
}

func (noMachines) GetMachine(_ context.Context, pool *v1alpha1.NodePool, _ string) (*provider.Machine, error) {
	return nil, provider.NotEnabled(pool.Spec.Provider.Name)
}

func (noMachines) DeleteMachine(_ context.Context, pool *v1alpha1.NodePool, _ string) error {
	return provider.NotEnabled(pool.Spec.Provider.Name)
}

func (noMachines) ListMachines(_ context.Context, pool *v1alpha1.NodePool) ([]*provider.Machine, error) {
	return nil, provider.NotEnabled(pool.Spec.Provider.Name)
}

// MachineOf and NamesOf answer as a set of no providers does.
func (noMachines) MachineOf(pool *v1alpha1.NodePool, n *corev1.Node) string {
	return provider.NewMachines(nil, nil).MachineOf(pool, n)
}

func (noMachines) NamesOf(n *corev1.Node) []string { return provider.NewMachines(nil, nil).NamesOf(n) }

func (noMachines) CanReboot(*v1alpha1.NodePool) bool { return false }

func (noMachines) RebootMachine(_ context.Context, pool *v1alpha1.NodePool, _ string) error {
	return provider.NotEnabled(pool.Spec.Provider.Name)
}

func (noMachines) CheckRegistration(_ context.Context, pool *v1alpha1.NodePool) (string, error) {
	return "", provider.NotEnabled(pool.Spec.Provider.Name)
}

func (noMachines) CheckTemplate(_ context.Context, pool *v1alpha1.NodePool) (string, error) {
	return "", provider.NotEnabled(pool.Spec.Provider.Name)
}

// setLogger hands controller-runtime sluice's logger once per process.
var setLogger sync.Once

// Index names in the shared pod informer: pods by spec.nodeName, and the
// nodes holding a pod with required inter-pod affinity or anti-affinity
// (whose terms reach past its node: consolidation.ScopeWith).
const (
	podNodeIndex  = "pod-node-name"
	podTermsIndex = "pod-inter-pod-terms"
)

// podTermsIndexFunc indexes a bound pod with required inter-pod terms by its
// node.
func podTermsIndexFunc(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" || !simulate.HasRequiredPodAffinity(p) {
		return nil, nil
	}
	return []string{p.Spec.NodeName}, nil
}

// New builds the manager; Start runs it.
func New(cfg *rest.Config, opts Options) (manager.Manager, error) {
	opts.defaults()
	setLogger.Do(func() { ctrl.SetLogger(logr.FromSlogHandler(opts.Log.Handler())) })
	pools, err := servesNodePools(cfg)
	if err != nil {
		return nil, err
	}
	if !pools {
		opts.Log.Warn("the cluster does not serve NodePools: every node gets the default maintenance policy; install the chart's CRDs to configure pools", "groupVersion", v1alpha1.SchemeGroupVersion.String())
	}
	mgr, err := newManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	shared, err := sharedDrainState(mgr, opts.MaxInFlight)
	if err != nil {
		return nil, err
	}
	drainCfg := rest.CopyConfig(cfg)
	drainCfg.Timeout = opts.RequestTimeout
	// Protobuf, as controller-runtime's own clients use for built-in
	// kinds: evictions and node reads cost the API server and us less.
	drainCfg.ContentType = runtime.ContentTypeProtobuf
	drainCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	clientset, err := kubernetes.NewForConfig(drainCfg)
	if err != nil {
		return nil, fmt.Errorf("building a client: %w", err)
	}
	// Every Event goes to the webhook too, whoever records it: the drains,
	// the NodePool controller, the maintenance controller.
	recorder := maintenance.WithWebhook(mgr.GetEventRecorderFor("sluice-controller"), opts.Webhook)
	leading := slices.Clone(opts.Leading)
	if opts.Webhook != nil {
		leading = append(leading, func(ctx context.Context) error { opts.Webhook.Run(ctx); return nil })
	}
	for _, run := range leading {
		if err := mgr.Add(manager.RunnableFunc(run)); err != nil {
			return nil, fmt.Errorf("adding leader work (the webhook, the AWS queue reader): %w", err)
		}
	}
	queue, err := terminationQueue(mgr, clientset, shared, recorder, opts)
	if err != nil {
		return nil, err
	}
	if err := provider.Register(opts.Registry); err != nil {
		return nil, fmt.Errorf("registering the provider metrics: %w", err)
	}
	var policies maintenance.Policies = maintenance.Defaults{}
	if pools {
		policies = maintenance.NewPoolPolicies(mgr.GetClient(), opts.Log)
		if err := poolControllers(mgr, cfg, queue, recorder, shared, opts); err != nil {
			return nil, err
		}
	}
	// A person's drain, seen through its claim on the node, counts against
	// the queue's caps too.
	poolOf := func(ctx context.Context, n *corev1.Node) string { return policies.PolicyFor(ctx, n).Pool }
	if err := claims.New(mgr.GetClient(), opts.Clock, queue, opts.Identity, poolOf).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the drain-claim controller: %w", err)
	}
	mc := maintenance.NewController(mgr.GetClient(), mgr.GetAPIReader(), opts.Clock, queue, maintenance.Options{
		Identity: opts.Identity,
		Self:     selfPod(opts.PodNamespace, opts.Identity),
		PodsOn:   shared.PodsOn,
		Policies: policies,
		Recorder: recorder, // already sends to the webhook
		DryRun:   opts.DryRun,
		Metrics:  maintenance.NewMetrics(opts.Registry),
		Log:      opts.Log.With("component", "maintenance"),
	})
	if err := mc.SetupWithManager(mgr, opts.Workers, pools); err != nil {
		return nil, fmt.Errorf("setting up the maintenance controller: %w", err)
	}
	return mgr, nil
}

func (o *Options) defaults() {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Registry == nil {
		o.Registry = ctrlmetrics.Registry
	}
}

// newManager builds the manager with its cache, probes, metrics and Lease.
func newManager(cfg *rest.Config, opts Options) (manager.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	var lock resourcelock.Interface
	if opts.LeaderElection {
		l, err := leaseLock(cfg, opts)
		if err != nil {
			return nil, err
		}
		lock = l
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			NewInformer:      newInformer,
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:  {Transform: stripPod},
				&corev1.Node{}: {Transform: stripNode},
			},
		},
		Controller:                          config.Controller{ReconciliationTimeout: opts.RequestTimeout, SkipNameValidation: ptr.To(opts.SeveralManagers)},
		Metrics:                             metricsserver.Options{BindAddress: opts.MetricsAddress, ExtraHandlers: profiling(opts.Profiling)},
		HealthProbeBindAddress:              opts.HealthAddress,
		LeaderElection:                      opts.LeaderElection,
		LeaderElectionID:                    opts.LeaseName,
		LeaderElectionNamespace:             opts.LeaseNamespace,
		LeaderElectionReleaseOnCancel:       true, // the queue stops its drains first, then the Lease goes at once
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       &opts.LeaseDuration,
		RenewDeadline:                       &opts.RenewDeadline,
		RetryPeriod:                         &opts.RetryPeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("building the controller manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the readiness check: %w", err)
	}
	return mgr, nil
}

// profiling is Go's profiler's handlers, when asked for: a heap or CPU
// profile of a controller that grew or spun is the way to learn why.
func profiling(on bool) map[string]http.Handler {
	if !on {
		return nil
	}
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}

// leaseLock is the Lease the replicas compete for, held under this
// replica's --identity and a per-start suffix: `kubectl get lease` names the
// replica that leads (controller-runtime's own lock names the host, which
// two replicas outside pods share).
func leaseLock(cfg *rest.Config, opts Options) (resourcelock.Interface, error) {
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// One hung request must not outlast the renew deadline.
	cfg.Timeout = max(time.Second, opts.RenewDeadline/2)
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the leader-election client: %w", err)
	}
	id := opts.Identity + "_" + string(uuid.NewUUID())
	return resourcelock.New(resourcelock.LeasesResourceLock, opts.LeaseNamespace, opts.LeaseName,
		clientset.CoreV1(), clientset.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
}

// sharedDrainState indexes the cache's pods by node (one index, read by the
// controller and the drains alike) and builds the drains' shared state on the
// cache's pod and PodDisruptionBudget informers.
func sharedDrainState(mgr manager.Manager, maxInFlight int) (*drain.Shared, error) {
	ctx := context.Background()
	pods, err := sharedIndexInformer(ctx, mgr, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	if err := pods.AddIndexers(toolscache.Indexers{podNodeIndex: drain.PodNodeIndexFunc, podTermsIndex: podTermsIndexFunc}); err != nil {
		return nil, fmt.Errorf("indexing pods by node: %w", err)
	}
	pdbs, err := sharedIndexInformer(ctx, mgr, &policyv1.PodDisruptionBudget{})
	if err != nil {
		return nil, err
	}
	return drain.NewShared(pdbs, pods, podNodeIndex, maxInFlight)
}

// servesNodePools asks discovery whether the cluster serves NodePools.
func servesNodePools(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("building a discovery client: %w", err)
	}
	list, err := dc.ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the API server whether it serves NodePools: %w", err)
	}
	for _, r := range list.APIResources {
		if r.Name == v1alpha1.NodePoolResource.Resource {
			return true, nil
		}
	}
	return false, nil
}

func sharedIndexInformer(ctx context.Context, mgr manager.Manager, obj client.Object) (toolscache.SharedIndexInformer, error) {
	inf, err := mgr.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("watching %T: %w", obj, err)
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("watching %T: the cache's informer is a %T, not a SharedIndexInformer", obj, inf)
	}
	return sii, nil
}

// selfPod picks the controller's own pod by namespace and name.
func selfPod(namespace, name string) func(*corev1.Pod) bool {
	if namespace == "" || name == "" {
		return nil
	}
	return func(p *corev1.Pod) bool { return p.Namespace == namespace && p.Name == name }
}

// clusterAPI sets up sluice's drains for Cluster API when the controller runs
// the cluster-api provider, and otherwise removes the pre-drain hooks an
// earlier run with it put on Machines (no one would release them).
func clusterAPI(mgr manager.Manager, cfg *rest.Config, machines Machines, queue *termination.Queue, recorder record.EventRecorder, opts Options) error {
	if machines.Serves(v1alpha1.ProviderClusterAPI) {
		hc := capihook.NewController(mgr.GetClient(), opts.Clock, queue, capihook.Options{
			DryRun: opts.DryRun, Recorder: recorder, Log: opts.Log.With("component", "clusterapi-hook"),
		})
		if err := hc.SetupWithManager(mgr, opts.Workers); err != nil {
			return fmt.Errorf("setting up the Cluster API deletion hook: %w", err)
		}
		return nil
	}
	// The provider was turned off (or never on): hooks an earlier run added
	// would hold Cluster API's deletions with nobody to release them. The
	// client is built now, before anything runs on cfg's transport.
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the client that removes Cluster API hooks: %w", err)
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		// Until one pass is clean: a hook left holds Cluster API's
		// deletions for good.
		_ = wait.PollUntilContextCancel(ctx, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			released, err := clusterapi.ReleaseHooks(ctx, dyn, opts.DryRun)
			if len(released) > 0 {
				opts.Log.Info("the cluster-api provider is off: removed sluice's pre-drain hook from Cluster API's Machines", "machines", released, "dryRun", opts.DryRun)
			}
			if err != nil {
				opts.Log.Error("removing sluice's pre-drain hooks; trying again in 30s", "err", err)
			}
			return err == nil, nil
		})
		return nil
	}))
}

// poolControllers sets up what serves NodePools: the pool, registration and
// deletion controllers, and Cluster API's hook.
func poolControllers(mgr manager.Manager, cfg *rest.Config, queue *termination.Queue, recorder record.EventRecorder, shared *drain.Shared, opts Options) error {
	machines := opts.Machines
	if machines == nil {
		machines = noMachines{}
	}
	churn := nodepool.NewChurn(opts.Clock)
	podInformer, err := sharedIndexInformer(context.Background(), mgr, &corev1.Pod{})
	if err != nil {
		return err
	}
	if _, err := podInformer.AddEventHandler(churn.Handler()); err != nil {
		return fmt.Errorf("watching pods leave nodes: %w", err)
	}
	changes := &nodepool.Changes{}
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Node{}, &policyv1.PodDisruptionBudget{}} {
		inf, err := sharedIndexInformer(context.Background(), mgr, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(changes.Handler()); err != nil {
			return fmt.Errorf("counting the changes consolidation sees: %w", err)
		}
	}
	pc := nodepool.NewController(mgr.GetClient(), mgr.GetAPIReader(), opts.Clock, machines, nodepool.Options{
		DryRun: opts.DryRun, RegistrationTimeout: opts.RegistrationTimeout, PodsOn: shared.PodsOn, LastChurn: churn.Last, Changes: changes.Seq,
		HoldsPodTerms: func(node string) (bool, error) {
			on, err := podInformer.GetIndexer().IndexKeys(podTermsIndex, node)
			return len(on) > 0, err
		},
		ValidationDelay: opts.ConsolidationValidationDelay,
		Queue:           queue, Recorder: recorder, Metrics: nodepool.NewMetrics(opts.Registry), Log: opts.Log.With("component", "nodepool"),
	})
	if err := pc.SetupWithManager(mgr, 1); err != nil {
		return fmt.Errorf("setting up the NodePool controller: %w", err)
	}
	rc := registration.New(mgr.GetClient(), opts.Clock, machines, registration.Options{
		DryRun: opts.DryRun, Recorder: recorder, Registry: opts.Registry, Log: opts.Log.With("component", "registration"), Live: mgr.GetAPIReader(),
	})
	if err := rc.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the node registration controller: %w", err)
	}
	dc := deletion.NewController(mgr.GetClient(), opts.Clock, queue, machines, deletion.Options{
		DryRun: opts.DryRun, Recorder: recorder, Log: opts.Log.With("component", "deletion"), Live: mgr.GetAPIReader(),
	})
	if err := dc.SetupWithManager(mgr, opts.Workers); err != nil {
		return fmt.Errorf("setting up the node deletion controller: %w", err)
	}
	if err := clusterAPI(mgr, cfg, machines, queue, recorder, opts); err != nil {
		return err
	}
	return nil
}
