package drain

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Observer receives progress while a drain runs. It is called from many
// goroutines and must not block.
type Observer interface {
	Observe(Progress)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Progress)

// Observe calls f.
func (f ObserverFunc) Observe(p Progress) { f(p) }

// ProgressKind says what happened.
type ProgressKind string

// Progress kinds.
const (
	ProgressNodeStarted  ProgressKind = "NodeStarted"
	ProgressCordoned     ProgressKind = "Cordoned"
	ProgressEvicting     ProgressKind = "Evicting"
	ProgressBlocked      ProgressKind = "Blocked"
	ProgressForced       ProgressKind = "Forced"
	ProgressGone         ProgressKind = "Gone"
	ProgressNodeFinished ProgressKind = "NodeFinished"
)

// Progress is one step of a drain.
type Progress struct {
	Time    time.Time
	Node    string
	Kind    ProgressKind
	Pod     string // namespace/name, for pod steps
	Reason  Reason
	Message string
	PDB     string
	// Pods is the number of pods the node must shed (NodeStarted) or the
	// node's outcome (NodeFinished, in Message).
	Pods int
}

// Hooks are the optional ways a drain reports as it goes.
type Hooks struct {
	// Recorder writes Kubernetes Events on nodes and pods.
	Recorder record.EventRecorder
	// Observer receives progress.
	Observer Observer
}

// Drainer drains nodes. One Drainer may run several Drain calls, one at a time.
type Drainer struct {
	client kubernetes.Interface
	clock  clock.WithTicker
	opts   Options
	hooks  Hooks
}

// New returns a Drainer, or an error naming the option to fix.
func New(client kubernetes.Interface, clk clock.WithTicker, opts Options, hooks Hooks) (*Drainer, error) {
	if err := opts.Validate(clk.Now()); err != nil {
		return nil, err
	}
	if hooks.Recorder == nil {
		hooks.Recorder = &record.FakeRecorder{} // a nil channel: events are dropped
	}
	if hooks.Observer == nil {
		hooks.Observer = ObserverFunc(func(Progress) {})
	}
	return &Drainer{client: client, clock: clk, opts: opts, hooks: hooks}, nil
}

// Drain drains the named nodes, Options.Parallel at a time, and reports on
// each. The error is for failures of the drain itself (the API unreachable);
// pods that could not leave are in the report, not in the error.
func (d *Drainer) Drain(ctx context.Context, nodes []string) (*Report, error) {
	if len(nodes) == 0 {
		return nil, errors.New("no nodes to drain: name nodes or give a selector that matches some")
	}
	nodes = unique(nodes)
	start := d.clock.Now()
	r, err := d.newRun(ctx, start)
	if err != nil {
		return nil, err
	}
	defer r.stop()

	report := &Report{DryRun: d.opts.DryRun, StartedAt: start, Nodes: make([]NodeReport, len(nodes))}
	if !d.opts.Deadline.IsZero() {
		dl := d.opts.Deadline
		report.Deadline = &dl
	}
	parallel := d.opts.Parallel
	if d.opts.DryRun {
		parallel = 1 // the simulated budget is spent in a fixed order
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, len(nodes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				report.Nodes[i] = r.drainNode(ctx, nodes[i])
			}
		}()
	}
	for i := range nodes {
		next <- i
	}
	close(next)
	wg.Wait()
	report.FinishedAt = d.clock.Now()
	return report, ctx.Err()
}

// run is the state one Drain call shares across its nodes.
type run struct {
	*Drainer
	id       string
	stopAt   time.Time
	ledger   *ledger
	dry      map[string]int32    // dry run: disruptions left per PDB (namespace/name)
	takers   map[string][]string // dry run: the pods that took them
	pdbs     policylisters.PodDisruptionBudgetLister
	classify *classifier
	inFlight chan struct{}
	cancel   context.CancelFunc

	diagMu sync.Mutex
	diags  map[string]*diagnosis
}

type diagnosis struct {
	at      time.Time
	version string // the budget's resourceVersion it was made from
	reason  Reason
	message string
	done    chan struct{} // closed once reason and message are set
}

// Diagnoses of a held budget are reused while the budget's status has not
// changed, for at most diagnosisMaxAge (a pod's start window can run out
// without any change), and for at least diagnosisMinAge. Each look costs one
// request when the drain has no shared pod view, and a busy cluster holds
// budgets longer: this keeps the count from growing with the wait.
const (
	diagnosisMinAge = 5 * time.Second
	diagnosisMaxAge = 30 * time.Second
)

func (d *Drainer) newRun(ctx context.Context, start time.Time) (*run, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &run{
		Drainer:  d,
		id:       utilrand.String(10),
		stopAt:   d.opts.stopAt(start),
		ledger:   newLedger(),
		dry:      map[string]int32{},
		takers:   map[string][]string{},
		inFlight: make(chan struct{}, d.opts.MaxInFlight),
		cancel:   cancel,
		diags:    map[string]*diagnosis{},
	}
	r.classify = &classifier{opts: &r.opts, now: d.clock.Now, daemonSetExists: cachedDaemonSets(func(ctx context.Context, ns, name string) error {
		_, err := d.client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})}
	if sh := d.opts.Shared; sh != nil {
		r.ledger, r.inFlight, r.pdbs = sh.ledger, sh.inFlight, sh.pdbs
		return r, nil
	}
	// One watch of every PodDisruptionBudget feeds both the matching of pods to
	// budgets and the ledger of this call's nodes.
	factory := informers.NewSharedInformerFactory(d.client, 0)
	pdbs := d.client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll)
	pagedInformerFor(factory, &policyv1.PodDisruptionBudget{}, d.opts.ChunkSize,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pdbs.List(ctx, o) }, pdbs.Watch)
	inf := factory.Policy().V1().PodDisruptionBudgets()
	observe := func(obj any) {
		if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			r.ledger.observe(pdb)
		}
	}
	listErrs := newListErrors()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: observe, UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("watching PodDisruptionBudgets: %w", err)
	}
	if err := listErrs.watch(inf.Informer()); err != nil {
		cancel()
		return nil, fmt.Errorf("watching PodDisruptionBudgets: %w", err)
	}
	r.pdbs = inf.Lister()
	factory.Start(ctx.Done())
	if err := waitForLists(ctx, d.clock, r.listBound(start), "PodDisruptionBudgets", listErrs, inf.Informer().HasSynced); err != nil {
		cancel()
		return nil, err
	}
	return r, nil
}

func (r *run) stop() { r.cancel() }

// listBound is how long a first list may take from now: ListTimeout, or less
// when the drain must stop sooner; zero when nothing bounds it.
func (r *run) listBound(now time.Time) time.Duration {
	bound := r.opts.ListTimeout
	if !r.stopAt.IsZero() {
		left := max(r.stopAt.Sub(now), time.Nanosecond)
		if bound == 0 || left < bound {
			bound = left
		}
	}
	return bound
}

// budgets returns every PodDisruptionBudget as last watched.
func (r *run) budgets() []*policyv1.PodDisruptionBudget {
	all, _ := r.pdbs.List(labels.Everything())
	return all
}

// diagnose explains why a budget is at zero, from a fresh look at the pods it
// selects. One look at a time is made per budget, and its answer is reused
// for a few seconds: the pods a budget holds all wake on the same change of
// its status, and they share one request between them.
func (r *run) diagnose(ctx context.Context, pdb *policyv1.PodDisruptionBudget) (Reason, string) {
	key := pdb.Namespace + "/" + pdb.Name
	now := r.clock.Now()
	if fresh, err := r.pdbs.PodDisruptionBudgets(pdb.Namespace).Get(pdb.Name); err == nil {
		pdb = fresh
	}
	r.diagMu.Lock()
	if d, ok := r.diags[key]; ok {
		age := now.Sub(d.at)
		if inFlight(d) || age < diagnosisMinAge || age < diagnosisMaxAge && d.version == pdb.ResourceVersion {
			r.diagMu.Unlock()
			select {
			case <-d.done:
				return d.reason, d.message
			case <-ctx.Done():
				return ReasonPDBBlocked, fmt.Sprintf("PodDisruptionBudget %s needs %d healthy pods and has %d",
					pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
			}
		}
	}
	d := &diagnosis{at: now, version: pdb.ResourceVersion, done: make(chan struct{})}
	r.diags[key] = d
	r.diagMu.Unlock()
	defer close(d.done)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		d.reason, d.message = ReasonPDBBlocked, fmt.Sprintf("PodDisruptionBudget %s has an invalid selector: %v", pdb.Name, err)
		return d.reason, d.message
	}
	selected, err := r.podsSelected(ctx, pdb.Namespace, sel)
	if err != nil {
		d.reason, d.message = ReasonPDBBlocked, fmt.Sprintf("PodDisruptionBudget %s needs %d healthy pods and has %d",
			pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
	} else {
		d.reason, d.message = diagnoseBlocked(pdb, selected, now)
	}
	return d.reason, d.message
}

func inFlight(d *diagnosis) bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// podsSelected lists the pods of a namespace a budget selects: from the shared
// pod watch when there is one, else with one request.
func (r *run) podsSelected(ctx context.Context, namespace string, sel labels.Selector) ([]corev1.Pod, error) {
	if r.opts.Shared != nil {
		return r.opts.Shared.podsSelected(namespace, sel)
	}
	return listPods(ctx, r.client, namespace, metav1.ListOptions{LabelSelector: sel.String()}, r.opts.ChunkSize)
}

// listPods lists pods in pages of chunk (all at once when 0), as kubectl's
// --chunk-size does.
func listPods(ctx context.Context, client kubernetes.Interface, namespace string, opts metav1.ListOptions, chunk int64) ([]corev1.Pod, error) {
	opts.Limit = chunk
	var out []corev1.Pod
	for {
		list, err := client.CoreV1().Pods(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

func unique(names []string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// sortPods orders pods by namespace and name, for stable reports.
func sortPods(pods []*corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
}
