package nodepool_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/controller"
	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

const labelPool = "sluice.dev/test-pool"

func TestMain(m *testing.M) { sandboxtest.Main(m) }

// scene is one test's pool: a NodePool with the kwok provider, its nodes
// made by that provider, a workload on them, and (once started) a
// controller.
type scene struct {
	env      *sandboxtest.Env
	name     string
	kube     client.Client
	machines *provider.Machines
	deleted  deletions    // the machines the controller deleted, by name
	creates  atomic.Int64 // the controller's requests for new machines, refused or not
	kwok     *kwok.Provider
	selector map[string]string
	onPool   fixture.PodOption
	// config, when set, is what the controller talks to the API server
	// with (a test's own transport around the sandbox's).
	config *rest.Config
}

func logger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// cloudNames makes the scenes' kwok provider name Nodes as a cloud's kubelet
// does, not after their machines (TestCloudNamedNodes).
var cloudNames bool

// cloudNodeName is an EC2-style Node name for a machine: ip-10-a-b-c, from
// a hash of the machine's name.
func cloudNodeName(machine string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(machine))
	v := h.Sum32()
	return fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", v>>16&0xff, v>>8&0xff, v&0xff)
}

// baseScene is the part of a scene every provider's shares: a sandbox, the
// NodePool CRD, a client, and the pool's name and selector.
func baseScene(t *testing.T) *scene {
	t.Helper()
	env := sandboxtest.New(t)
	s := &scene{env: env, name: sandboxtest.UniqueName("pool")}
	s.selector = map[string]string{labelPool: s.name}
	s.onPool = fixture.NodeSelector(s.selector)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := pools.Install(context.Background(), ext); err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	s.kube = kube
	return s
}

// newScene creates a pool of size nodes, made by the kwok provider from the
// pool's template (image img-1), after edit has adjusted the pool.
func newScene(t *testing.T, size int, edit func(*v1alpha1.NodePool)) *scene {
	t.Helper()
	s := baseScene(t)
	env := s.env
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var kopts kwok.Options
	if cloudNames {
		kopts.NodeNames = cloudNodeName
	}
	s.kwok = kwok.New(env.Client, clock.RealClock{}, kopts)
	go func() { _ = s.kwok.Run(ctx) }()
	s.machines = provider.NewMachines(provider.Set{v1alpha1.ProviderKwok: s.kwok}, clock.RealClock{})

	pool := &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: s.name},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: s.selector},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok, Kwok: &v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{Duration: time.Second}}},
			Template: &v1alpha1.NodeTemplate{
				Labels:        s.selector,
				InstanceTypes: []string{"Standard_D4s_v5"},
				Image:         "img-1",
			},
			// Consolidation off unless a test turns it on: the scenes'
			// workloads are small, and would shrink the pool under them.
			Disruption: &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "2"}}, ConsolidateAfter: v1alpha1.Never},
		},
	}
	if edit != nil {
		edit(pool)
	}
	if err := s.kube.Create(context.Background(), pool); err != nil {
		t.Fatalf("creating node pool: %v", err)
	}
	t.Cleanup(func() { s.cleanup() })
	// The pool's first nodes, as a controller that ran before left them
	// (registered); the controller's provider finds them from their Nodes.
	first := kwok.New(env.Client, clock.RealClock{}, kwok.Options{NodeNames: kopts.NodeNames, Registered: true})
	go func() { _ = first.Run(ctx) }() // it lifts their startup taints too
	for range size {
		if _, err := first.Create(context.Background(), pool, ""); err != nil {
			t.Fatalf("making the pool's nodes: %v", err)
		}
	}
	s.waitNodes(t, size, 60*time.Second)
	return s
}

// recording is the scene's machines, noting every machine the controller
// deletes.
type recording struct {
	*provider.Machines
	deleted *deletions
	creates *atomic.Int64
}

func (r recording) CreateMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error) {
	r.creates.Add(1)
	return r.Machines.CreateMachine(ctx, pool, name)
}

func (r recording) DeleteMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) error {
	r.deleted.add(name)
	return r.Machines.DeleteMachine(ctx, pool, name)
}

type deletions struct {
	mu    sync.Mutex
	names []string
}

func (d *deletions) add(name string) { d.mu.Lock(); d.names = append(d.names, name); d.mu.Unlock() }

func (d *deletions) list() []string { d.mu.Lock(); defer d.mu.Unlock(); return slices.Clone(d.names) }

func (d *deletions) has(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.names, name)
}

// cleanup deletes the pool and its nodes, releasing any finalizer the
// (stopped) controller left.
func (s *scene) cleanup() {
	ctx := context.Background()
	_ = s.kube.Delete(ctx, &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: s.name}})
	nodes, err := s.nodes(ctx)
	if err != nil {
		return
	}
	for _, n := range nodes {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		_ = s.kube.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch))
		_ = s.kube.Delete(ctx, n)
	}
}

// start runs the controller as `sluice controller --providers kwok` does.
func (s *scene) start(t *testing.T) { s.startWith(t, nil) }

// startWith runs the controller with its options adjusted by edit.
func (s *scene) startWith(t *testing.T, edit func(*controller.Options)) {
	t.Helper()
	stop := s.run(t, edit)
	t.Cleanup(stop)
}

// run starts a controller and returns what stops it (as a killed leader
// stops: its context canceled, nothing written on the way out).
func (s *scene) run(t *testing.T, edit func(*controller.Options)) (stop func()) {
	t.Helper()
	opts := controller.Options{
		Identity:            "test-" + t.Name(),
		Workers:             4,
		RequestTimeout:      30 * time.Second,
		MetricsAddress:      "0",
		HealthAddress:       "0",
		Log:                 logger(t).With("component", "controller"),
		Registry:            prometheus.NewRegistry(),
		SeveralManagers:     true,
		Machines:            recording{s.machines, &s.deleted, &s.creates},
		RegistrationTimeout: 20 * time.Second,
	}
	if edit != nil {
		edit(&opts)
	}
	cfg := s.env.Config
	if s.config != nil {
		cfg = s.config
	}
	mgr, err := controller.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("controller: %v", err)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// nodes lists the pool's nodes, those being deleted included.
func (s *scene) nodes(ctx context.Context) ([]*corev1.Node, error) {
	var list corev1.NodeList
	if err := s.kube.List(ctx, &list, client.MatchingLabels(s.selector)); err != nil {
		return nil, err
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// eachNodeChange calls f with every state of the pool's nodes that the API
// server reports, from their state now until ctx ends: a watch, so no state
// between two looks is missed. It returns when ctx ends.
func (s *scene) eachNodeChange(ctx context.Context, t *testing.T, f func(*corev1.Node)) {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(s.selector).String()}
	for ctx.Err() == nil {
		w, err := s.env.Client.CoreV1().Nodes().Watch(ctx, opts)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("watching the pool's nodes: %v", err)
			}
			return
		}
		for ev := range w.ResultChan() { // closed when ctx ends, or the server ends the watch
			if n, ok := ev.Object.(*corev1.Node); ok {
				f(n)
			}
		}
		w.Stop()
	}
}

// waitNodes waits until the pool has exactly n nodes, all Ready and none
// being deleted, and returns their names.
func (s *scene) waitNodes(t *testing.T, n int, timeout time.Duration) []string {
	t.Helper()
	var names []string
	s.env.WaitFor(t, timeout, fmt.Sprintf("%d Ready nodes in pool %s", n, s.name), func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		names = names[:0]
		for _, node := range nodes {
			if node.DeletionTimestamp != nil || !ready(node) || hasTaint(node, corev1.TaintNodeNotReady) {
				return false, nil
			}
			names = append(names, node.Name)
		}
		return len(names) == n, nil
	})
	slices.Sort(names)
	return names
}

// pool reads the NodePool.
func (s *scene) pool(t *testing.T) *v1alpha1.NodePool {
	t.Helper()
	p := &v1alpha1.NodePool{}
	if err := s.kube.Get(context.Background(), client.ObjectKey{Name: s.name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// edit changes the NodePool's spec.
func (s *scene) edit(t *testing.T, change func(*v1alpha1.NodePool)) {
	t.Helper()
	p := s.pool(t)
	orig := p.DeepCopy()
	change(p)
	if err := s.kube.Patch(context.Background(), p, client.MergeFrom(orig)); err != nil {
		t.Fatalf("editing node pool: %v", err)
	}
}

// workload puts a Deployment of replicas pods on the pool with a PDB of
// minAvailable, and waits until they run.
func (s *scene) workload(t *testing.T, replicas int32, minAvailable string, opts ...fixture.PodOption) {
	t.Helper()
	opts = append([]fixture.PodOption{s.onPool, fixture.Requests("100m", "128Mi"), fixture.GracePeriod(10), fixture.ExitsAfter(1)}, opts...)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", replicas, opts...),
		fixture.PDB(s.env.Namespace, "web", "web", fixture.MinAvailable(minAvailable)))
	s.env.WaitForPods(t, "app=web", int(replicas))
}

// auditor watches the pool from outside, with its own rules, all through
// a test: how many nodes were out of service at once (cordoned, being
// deleted, marked by the controller, or NotReady after having been Ready),
// whether the PDB ever fell below its floor, and whether a pod was ever
// unschedulable.
type auditor struct {
	mu            sync.Mutex
	maxDisrupting int
	pdbBreaches   []string
	unschedulable []string
	seenReady     map[string]bool
	samples       int
	// minServing is the fewest Ready, schedulable, undeleted nodes seen.
	minServing      int
	stop            chan struct{}
	done            chan struct{}
	nodesEverInPool map[string]bool
}

func (s *scene) audit(t *testing.T) *auditor {
	t.Helper()
	a := &auditor{seenReady: map[string]bool{}, nodesEverInPool: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{}), minServing: -1}
	go func() {
		defer close(a.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-tick.C:
				a.sample(s)
			}
		}
	}()
	t.Cleanup(a.finish)
	return a
}

func (a *auditor) finish() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

func (a *auditor) sample(s *scene) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := s.nodes(ctx)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.samples++
	out, serving := 0, 0
	for _, n := range nodes {
		a.nodesEverInPool[n.Name] = true
		r := ready(n)
		if r && !n.Spec.Unschedulable && n.DeletionTimestamp == nil {
			serving++
		}
		if r {
			a.seenReady[n.Name] = true
		}
		_, marked := n.Annotations[contract.AnnotationDisruption]
		if n.Spec.Unschedulable || n.DeletionTimestamp != nil || marked || !r && a.seenReady[n.Name] {
			out++
		}
	}
	a.maxDisrupting = max(a.maxDisrupting, out)
	if a.minServing < 0 || serving < a.minServing {
		a.minServing = serving
	}
	var pdb policyv1.PodDisruptionBudget
	if err := s.kube.Get(ctx, client.ObjectKey{Namespace: s.env.Namespace, Name: "web"}, &pdb); err == nil &&
		pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DesiredHealthy > 0 && pdb.Status.CurrentHealthy < pdb.Status.DesiredHealthy {
		a.pdbBreaches = append(a.pdbBreaches, fmt.Sprintf("%s: %d healthy < %d", time.Now().Format(time.StampMilli), pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy))
	}
	var pods corev1.PodList
	if err := s.kube.List(ctx, &pods, client.InNamespace(s.env.Namespace)); err == nil {
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					a.unschedulable = append(a.unschedulable, p.Name+": "+c.Message)
				}
			}
		}
	}
}

// check fails the test when the pool had more than limit nodes out of
// service at once, a PDB was breached or a pod could not be scheduled.
func (a *auditor) check(t *testing.T, limit int) {
	t.Helper()
	a.finish()
	a.mu.Lock()
	defer a.mu.Unlock()
	t.Logf("auditor: %d samples, at most %d nodes out of service at once (budget %d), %d PDB breaches, %d unschedulable pods",
		a.samples, a.maxDisrupting, limit, len(a.pdbBreaches), len(a.unschedulable))
	if a.samples < 10 {
		t.Errorf("auditor: only %d samples; it saw too little to vouch for anything", a.samples)
	}
	if a.maxDisrupting > limit {
		t.Errorf("auditor: %d nodes were out of service at once; the budget allows %d", a.maxDisrupting, limit)
	}
	if len(a.pdbBreaches) > 0 {
		t.Errorf("auditor: the PDB fell below its floor: %v", a.pdbBreaches[:min(5, len(a.pdbBreaches))])
	}
	if len(a.unschedulable) > 0 {
		t.Errorf("auditor: pods could not be scheduled: %v", a.unschedulable[:min(5, len(a.unschedulable))])
	}
}

// poolEvents lists "Reason: message" of the Events on the pool.
func (s *scene) poolEvents(t *testing.T) []string { return s.events(t, "NodePool", s.name) }

// events lists "Reason: message" of the Events on one object.
func (s *scene) events(t *testing.T, kind, name string) []string {
	t.Helper()
	list, err := s.env.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", kind),
			fields.OneTermEqualSelector("involvedObject.name", name)).String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}
