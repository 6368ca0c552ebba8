package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/catalog"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/test/audit"
)

// The side-by-side consolidation scene: the same 50 Standard_D8s_v5 nodes
// full of the same pods in two sandboxes, one after the other, the workload
// scaled down by 70 % to the same layout (sidelayout_bench_test.go), then
// one consolidator let loose in each.
const (
	sideNodes       = 50
	sidePerNode     = 5 // 1500m/4Gi pods: five fill a Standard_D8s_v5 (7820m allocatable)
	sideDeployments = 5
	sideScaleDown   = 70 // percent of the replicas removed
	sideQuiet       = 90 * time.Second
	sideCap         = 12 * time.Minute
	sideCPU         = "1500m"
	sideMemory      = "4Gi"
	sideStartType   = "Standard_D8s_v5"
	// sideAfter and sideBudget are both NodePools' consolidateAfter and
	// budget (percent of the pool's nodes).
	sideAfter  = 10 * time.Second
	sideBudget = 10
)

// sideTypes are the sizes both consolidators may choose from, at the
// catalogue's on-demand prices.
var sideTypes = []string{"Standard_D8s_v5", "Standard_D2s_v5", "Standard_D4s_v5", "Standard_D16s_v5"}

// sidePool is the label both the sluice NodePool and the Karpenter NodePool
// put on their nodes, and the workload's node selector.
var sidePool = map[string]string{"bench.sluice.dev/pool": "consolidate"}

// BenchmarkConsolidationVersusKarpenter runs the same consolidation twice on
// identical sandboxes: once by sluice (`sluice controller` as its own process,
// a kwok-provider NodePool), once by Karpenter v1.14.1's kwok provider, built
// from its Go module by hack/tools/karpenter.sh and run as its own process
// with the same instance types at the same prices. Each starts from 50
// Standard_D8s_v5 nodes carrying 250 pods in 5 Deployments under PDBs,
// consolidation off; the Deployments are scaled down by 70 %, and then
// consolidation is turned on (consolidateAfter 10s, budget 10 % of nodes, the
// four D-series sizes allowed). It prints, side by side: nodes and hourly
// cost at the end, the bin-packing minimum for the pods left, time to
// converge (the last change to any node before 90 s without one), evictions
// (the API server's own count of accepted evictions), machines created, and
// PDB floors broken (judged by test/audit's watcher, which knows nothing of
// either consolidator), and judges sluice's figures against their targets
// (targets_bench_test.go).
func BenchmarkConsolidationVersusKarpenter(b *testing.B) {
	sc := newScorecard(b)
	for range b.N {
		loadStart := loadavg()
		karpenter := karpenterTools(b)
		bin := buildSluiceBinary(b)
		waitCalm(b, 3*time.Minute)
		results := []sideResult{
			runSide(b, &sluiceSide{bin: bin}),
			runSide(b, &karpenterSide{dir: karpenter}),
		}
		reportSides(b, sc, results, loadStart)
	}
	sc.judge()
}

// side is one consolidator under test.
type side interface {
	name() string
	// start brings up the consolidator and the sandbox's starting nodes,
	// consolidation off; the workload is created after it returns.
	start(b *testing.B, sb *sandbox.Sandbox, clientset kubernetes.Interface, kubectl string)
	// ready says whether the starting nodes are all there.
	ready(nodes []corev1.Node) bool
	// enable turns consolidation on.
	enable(b *testing.B)
	// check fails the benchmark if the consolidator's process is gone.
	check(b *testing.B)
	stop()
}

// sideResult is what one run measured.
type sideResult struct {
	name                       string
	nodes                      int
	cost, minimum              float64
	minimumNodes               int
	types                      string
	converged                  time.Duration
	settled                    bool
	evictions, created, broken int
	// mustMove is the fewest pods any consolidation to the minimum has to
	// evict, given where the scale-down left them: all but those already on
	// the minimum's number of fullest nodes.
	mustMove int
	// planned and layout are the pods per node the scale-down was to
	// leave (sidelayout_bench_test.go) and did leave.
	planned, layout string
	load            string
	// audit is the auditor's table, printed when it saw a PDB floor broken.
	audit string
	// drains are the slowest drain of each round the side made (a node's
	// drain: from its deletion to its going; a round: nodes whose drains
	// overlap).
	drains []time.Duration
}

func runSide(b *testing.B, s side) sideResult {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sb, clientset, kubectl := startSandbox(b)
	defer func() { _ = sb.Stop() }()
	s.start(b, sb, clientset, kubectl)
	defer s.stop()

	const ns = "work"
	replicas := sideNodes * sidePerNode / sideDeployments
	objs := []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}
	for d := range sideDeployments {
		name := fmt.Sprintf("app%d", d)
		objs = append(objs,
			fixture.Deployment(ns, name, int32(replicas), fixture.NodeSelector(sidePool), fixture.Requests(sideCPU, sideMemory),
				fixture.GracePeriod(10), fixture.ExitsAfter(2)),
			fixture.PDB(ns, name, name, fixture.MaxUnavailable("10%")))
	}
	createParallel(ctx, b, clientset, objs, 4)
	waitUntil(b, 10*time.Minute, fmt.Sprintf("%s: %d nodes and %d pods Ready", s.name(), sideNodes, replicas*sideDeployments), func() bool {
		s.check(b)
		return s.ready(poolNodesByLabel(b, clientset)) && readyPods(b, clientset, ns) == replicas*sideDeployments
	})

	left := replicas * (100 - sideScaleDown) / 100
	planned, _ := scaleDownAsPlanned(ctx, b, clientset, ns, poolNodesByLabel(b, clientset), left)
	for d := range sideDeployments {
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, left)
		if out, err := exec.Command(kubectl, "--kubeconfig", sb.Kubeconfig(), "-n", ns, "patch", "deployment", fmt.Sprintf("app%d", d),
			"--type", "merge", "-p", patch).CombinedOutput(); err != nil {
			b.Fatalf("scaling app%d down: %v\n%s", d, err, out)
		}
	}
	pods := left * sideDeployments
	waitUntil(b, 5*time.Minute, fmt.Sprintf("%s: the workload down to %d pods", s.name(), pods), func() bool {
		list, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == pods && readyPods(b, clientset, ns) == pods
	})

	mustMove := fewestMoves(b, clientset, ns, pods)
	startLayout := layoutNow(ctx, b, clientset, ns, poolNodesByLabel(b, clientset))

	a, err := audit.Start(ctx, sb.RESTConfig(), func(string, ...any) {})
	if err != nil {
		b.Fatal(err)
	}
	w := watchNodeChanges(ctx, clientset)
	evictedBefore := evictionsByCode(b, clientset)["201"]
	start := time.Now()
	s.enable(b)
	settled := false
	for time.Since(start) < sideCap {
		s.check(b)
		time.Sleep(2 * time.Second)
		if time.Since(w.last()) >= sideQuiet && readyPods(b, clientset, ns) == pods {
			settled = true
			break
		}
	}
	converged := w.last().Sub(start)
	sum := a.Finish()
	final := poolNodesByLabel(b, clientset)
	r := sideResult{name: s.name(), nodes: len(final), converged: converged, settled: settled,
		evictions: int(evictionsByCode(b, clientset)["201"] - evictedBefore), created: w.created(),
		broken: sum.Row(audit.PDBFloor).Violated, load: loadavg(), audit: sum.String(), mustMove: mustMove,
		planned: planned, layout: startLayout, drains: w.roundDrains()}
	count := map[string]int{}
	for _, n := range final {
		t := n.Labels[provider.LabelInstanceType]
		count[t]++
		typ, ok := catalog.Lookup(t)
		if !ok {
			b.Fatalf("%s: node %s has instance type %q, not in the catalogue", s.name(), n.Name, t)
		}
		r.cost += typ.OnDemand
	}
	var kinds []string
	for t, n := range count {
		kinds = append(kinds, fmt.Sprintf("%d×%s", n, strings.TrimPrefix(t, "Standard_")))
	}
	slices.Sort(kinds)
	r.types = strings.Join(kinds, " ")
	r.minimum, r.minimumNodes = packingMinimum(b, pods)
	return r
}

// fewestMoves is how many of the pods no consolidation to the minimum can
// leave in place: the minimum is a number of nodes, and at best they are
// the nodes that hold the most pods now (a node of the start type holds
// sidePerNode at most, the largest type no more than it can fit).
func fewestMoves(b *testing.B, clientset kubernetes.Interface, ns string, pods int) int {
	b.Helper()
	list, err := clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	perNode := map[string]int{}
	for _, p := range list.Items {
		perNode[p.Spec.NodeName]++
	}
	counts := slices.Collect(maps.Values(perNode))
	slices.Sort(counts)
	slices.Reverse(counts)
	_, keep := packingMinimum(b, pods)
	stay := 0
	for _, c := range counts[:min(keep, len(counts))] {
		stay += c
	}
	return pods - stay
}

// poolNodesByLabel lists the nodes that carry the scene's pool label.
func poolNodesByLabel(b *testing.B, clientset kubernetes.Interface) []corev1.Node {
	b.Helper()
	var sel []string
	for k, v := range sidePool {
		sel = append(sel, k+"="+v)
	}
	list, err := clientset.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: strings.Join(sel, ",")})
	if err != nil {
		b.Fatal(err)
	}
	return list.Items
}

// packingMinimum is the cheapest set of machines of the allowed types that
// holds pods identical pods (an unbounded covering knapsack over how many
// each type holds), and how many machines that is: nobody can do better.
func packingMinimum(b *testing.B, pods int) (float64, int) {
	b.Helper()
	cpu, mem := resource.MustParse(sideCPU), resource.MustParse(sideMemory)
	type fit struct {
		holds int
		price float64
	}
	var fits []fit
	for _, name := range sideTypes {
		t, ok := catalog.Lookup(name)
		if !ok {
			b.Fatalf("%s is not in the catalogue", name)
		}
		alloc := t.Allocatable
		holds := min(int(alloc.Cpu().MilliValue()/cpu.MilliValue()), int(alloc.Memory().Value()/mem.Value()), 110)
		if holds > 0 {
			fits = append(fits, fit{holds, t.OnDemand})
		}
	}
	cost := make([]float64, pods+1)
	machines := make([]int, pods+1)
	for n := 1; n <= pods; n++ {
		cost[n] = math.Inf(1)
		for _, f := range fits {
			c := cost[max(n-f.holds, 0)] + f.price
			if c < cost[n]-1e-9 {
				cost[n], machines[n] = c, machines[max(n-f.holds, 0)]+1
			}
		}
	}
	return cost[pods], machines[pods]
}

// nodeChanges follows every node of the scene: its arrival, its departure,
// and any change to whether it takes pods (cordon, taints, deletion).
type nodeChanges struct {
	mu      sync.Mutex
	changed time.Time
	initial map[string]bool
	added   map[string]bool
	synced  bool
	// deleting and gone are when each node was seen deleted (its drain
	// begins) and gone.
	deleting, gone map[string]time.Time
}

func watchNodeChanges(ctx context.Context, clientset kubernetes.Interface) *nodeChanges {
	w := &nodeChanges{changed: time.Now(), initial: map[string]bool{}, added: map[string]bool{},
		deleting: map[string]time.Time{}, gone: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactory(clientset, 0)
	inf := factory.Core().V1().Nodes().Informer()
	touch := func() { w.changed = time.Now() }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			n := obj.(*corev1.Node)
			w.mu.Lock()
			defer w.mu.Unlock()
			if !w.synced {
				w.initial[n.Name] = true
				return
			}
			w.added[n.Name] = true
			touch()
		},
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			if o.Spec.Unschedulable == n.Spec.Unschedulable && slices.Equal(taintKeys(o), taintKeys(n)) &&
				(o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			touch()
			if o.DeletionTimestamp == nil && n.DeletionTimestamp != nil {
				w.deleting[n.Name] = w.changed
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			touch()
			if n, ok := obj.(*corev1.Node); ok {
				w.gone[n.Name] = w.changed
			}
		},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	w.mu.Lock()
	w.synced, w.changed = true, time.Now()
	w.mu.Unlock()
	return w
}

func taintKeys(n *corev1.Node) []string {
	var keys []string
	for _, t := range n.Spec.Taints {
		keys = append(keys, t.Key+":"+string(t.Effect))
	}
	slices.Sort(keys)
	return keys
}

func (w *nodeChanges) last() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// roundDrains is the slowest drain of each round: the nodes that went,
// ordered by their deletion, a round being the nodes whose drains overlap
// (one that begins after every drain before it ended starts the next).
func (w *nodeChanges) roundDrains() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	type drain struct{ from, to time.Time }
	var ds []drain
	for n, to := range w.gone {
		from, ok := w.deleting[n]
		if !ok {
			from = to // deleted at once, no finalizer to drain it
		}
		ds = append(ds, drain{from, to})
	}
	slices.SortFunc(ds, func(a, b drain) int { return a.from.Compare(b.from) })
	var out []time.Duration
	var end time.Time
	for _, d := range ds {
		if len(out) == 0 || d.from.After(end) {
			out = append(out, 0)
		}
		out[len(out)-1] = max(out[len(out)-1], d.to.Sub(d.from))
		if d.to.After(end) {
			end = d.to
		}
	}
	return out
}

// roundsAllowed is the fewest rounds a budget of pct percent of the pool's
// nodes (rounded up, of the pool as it shrinks) takes from start nodes to
// end.
func roundsAllowed(start, end, pct int) int {
	rounds := 0
	for n := start; n > end; rounds++ {
		n -= (n*pct + 99) / 100
	}
	return rounds
}

func (w *nodeChanges) created() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.added)
}

// sluiceSide is sluice's controller with a kwok-provider NodePool.
type sluiceSide struct {
	bin  string
	pool *v1alpha1.NodePool
	sb   *sandbox.Sandbox
	ctl  *controllerProcess
	kctl string
}

func (s *sluiceSide) name() string { return "sluice" }

func (s *sluiceSide) start(b *testing.B, sb *sandbox.Sandbox, clientset kubernetes.Interface, kubectl string) {
	b.Helper()
	s.sb, s.kctl = sb, kubectl
	s.pool = &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "consolidate"},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: sidePool},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok, Kwok: &v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{Duration: 5 * time.Second}}},
			Template:     &v1alpha1.NodeTemplate{Labels: sidePool, InstanceTypes: sideTypes, Image: "img-1"},
			Disruption: &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: fmt.Sprintf("%d%%", sideBudget)}},
				ConsolidationPolicy: v1alpha1.ConsolidateWhenEmptyOrUnderutilized, ConsolidateAfter: v1alpha1.Never},
		},
	}
	makePool(b, sb, clientset, poolClient(b, sb), s.pool, sideNodes)
	s.ctl = startControllerProcess(b, s.bin, sb.Kubeconfig(), "--providers", "kwok")
}

func (s *sluiceSide) ready(nodes []corev1.Node) bool {
	return len(nodes) == sideNodes && !slices.ContainsFunc(nodes, func(n corev1.Node) bool {
		return !nodeReady(&n) || n.Labels[provider.LabelInstanceType] != sideStartType
	})
}

func (s *sluiceSide) enable(b *testing.B) {
	b.Helper()
	kubectlPatch(b, s.kctl, s.sb, "nodepools.sluice.dev/"+s.pool.Name, fmt.Sprintf(`{"spec":{"disruption":{"consolidateAfter":%q}}}`, sideAfter))
}

func (s *sluiceSide) check(b *testing.B) { b.Helper(); s.ctl.mustRun(b, "during the consolidation") }
func (s *sluiceSide) stop()              { s.ctl.stop() }

// karpenterSide is Karpenter's kwok provider, v1.14.1, with its own
// NodePool and KWOKNodeClass.
type karpenterSide struct {
	dir string
	// manifest is the KWOKNodeClass and NodePool applied at start; empty:
	// the consolidation scene's, consolidation off.
	manifest string
	sb       *sandbox.Sandbox
	kctl     string
	cmd      *exec.Cmd
	out      *lockedBuffer
	done     chan struct{}
}

func (k *karpenterSide) name() string { return "Karpenter v1.14.1 (kwok)" }

func (k *karpenterSide) start(b *testing.B, sb *sandbox.Sandbox, _ kubernetes.Interface, kubectl string) {
	b.Helper()
	k.sb, k.kctl = sb, kubectl
	// The same sandbox as sluice's: every CRD the chart ships is served
	// (the auditor watches sluice's NodePools, and finds none).
	poolClient(b, sb)
	if out, err := exec.Command(kubectl, "--kubeconfig", sb.Kubeconfig(), "apply", "--server-side", "-f", filepath.Join(k.dir, "crds")).CombinedOutput(); err != nil {
		b.Fatalf("installing Karpenter's CRDs: %v\n%s", err, out)
	}
	if out, err := exec.Command(kubectl, "--kubeconfig", sb.Kubeconfig(), "wait", "--for", "condition=Established", "--timeout", "60s",
		"crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh", "crd/kwoknodeclasses.karpenter.kwok.sh").CombinedOutput(); err != nil {
		b.Fatalf("waiting for Karpenter's CRDs: %v\n%s", err, out)
	}
	types := filepath.Join(b.TempDir(), "instance-types.json")
	if err := os.WriteFile(types, karpenterInstanceTypes(b), 0o600); err != nil {
		b.Fatal(err)
	}
	metrics, probes := freeLoopbackAddress(b), freeLoopbackAddress(b)
	k.out, k.done = &lockedBuffer{}, make(chan struct{})
	k.cmd = exec.Command(filepath.Join(k.dir, "bin", "karpenter-kwok"))
	k.cmd.Env = append(os.Environ(),
		"KUBECONFIG="+sb.Kubeconfig(),
		"LEADER_ELECTION_NAMESPACE=kube-system",
		"METRICS_PORT="+portOf(metrics),
		"HEALTH_PROBE_PORT="+portOf(probes),
		"INSTANCE_TYPES_FILE_PATH="+types,
		"LOG_LEVEL=info",
	)
	k.cmd.Stdout, k.cmd.Stderr = k.out, k.out
	if err := k.cmd.Start(); err != nil {
		b.Fatalf("starting Karpenter: %v", err)
	}
	go func() { _ = k.cmd.Wait(); close(k.done) }()
	b.Cleanup(k.stop)
	manifest := k.manifest
	if manifest == "" {
		manifest = karpenterObjects([]string{sideStartType})
	}
	kubectlApply(b, kubectl, sb, manifest)
}

func (k *karpenterSide) ready(nodes []corev1.Node) bool {
	return len(nodes) == sideNodes && !slices.ContainsFunc(nodes, func(n corev1.Node) bool {
		return !nodeReady(&n) || n.Labels[provider.LabelInstanceType] != sideStartType ||
			slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "karpenter.sh/unregistered" })
	})
}

func (k *karpenterSide) enable(b *testing.B) {
	b.Helper()
	kubectlApply(b, k.kctl, k.sb, karpenterObjects(sideTypes))
	kubectlPatch(b, k.kctl, k.sb, "nodepools.karpenter.sh/consolidate", fmt.Sprintf(`{"spec":{"disruption":{"consolidateAfter":%q}}}`, sideAfter))
}

func (k *karpenterSide) check(b *testing.B) {
	b.Helper()
	select {
	case <-k.done:
		b.Fatalf("Karpenter exited\n%s", k.out.tail(40))
	default:
	}
}

func (k *karpenterSide) stop() {
	if k.cmd == nil || k.cmd.Process == nil {
		return
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(15 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.done
	}
}

// karpenterObjects are Karpenter's KWOKNodeClass and NodePool for the
// scene: the same labels, types, budget and (at first) no consolidation.
func karpenterObjects(types []string) string {
	quoted := make([]string, len(types))
	for i, t := range types {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	var labels []string
	for k, v := range sidePool {
		labels = append(labels, fmt.Sprintf("        %s: %s", k, v))
	}
	return fmt.Sprintf(`apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
spec:
  nodeRegistrationDelay: 5s
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: consolidate
spec:
  template:
    metadata:
      labels:
%s
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      expireAfter: Never
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [%s]}
      - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: Never
    budgets:
    - nodes: "%d%%"
`, strings.Join(labels, "\n"), strings.Join(quoted, ", "), sideBudget)
}

// karpenterInstanceTypes is the instance-types file of Karpenter's kwok
// provider for the scene's types: the catalogue's on-demand prices, in the
// three zones sluice's kwok provider uses, with a capacity that leaves,
// after the 100m and 10Mi Karpenter's kwok provider reserves, exactly the
// catalogue's allocatable, so both sandboxes' nodes hold the same pods.
func karpenterInstanceTypes(b *testing.B) []byte {
	b.Helper()
	type requirement struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	}
	type offering struct {
		Price        float64
		Available    bool
		Requirements []requirement
	}
	type instanceType struct {
		Name             string            `json:"name"`
		Offerings        []offering        `json:"offerings"`
		Architecture     string            `json:"architecture"`
		OperatingSystems []string          `json:"operatingSystems"`
		Resources        map[string]string `json:"resources"`
	}
	var out []instanceType
	for _, name := range sideTypes {
		t, ok := catalog.Lookup(name)
		if !ok {
			b.Fatalf("%s is not in the catalogue", name)
		}
		it := instanceType{Name: name, Architecture: "amd64", OperatingSystems: []string{"linux"},
			Resources: map[string]string{
				"cpu":    fmt.Sprintf("%dm", t.Allocatable.Cpu().MilliValue()+100),
				"memory": fmt.Sprintf("%dMi", t.Allocatable.Memory().Value()>>20+10),
				"pods":   "110",
			}}
		for _, zone := range []string{"eastus-1", "eastus-2", "eastus-3"} {
			it.Offerings = append(it.Offerings, offering{Price: t.OnDemand, Available: true, Requirements: []requirement{
				{Key: "karpenter.sh/capacity-type", Operator: "In", Values: []string{"on-demand"}},
				{Key: provider.LabelZone, Operator: "In", Values: []string{zone}},
			}})
		}
		out = append(out, it)
	}
	data, err := json.Marshal(out)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// karpenterTools builds (or finds cached) Karpenter's kwok provider and CRDs.
func karpenterTools(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(filepath.Join("..", "..", "hack", "tools", "karpenter.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("building Karpenter's kwok provider (hack/tools/karpenter.sh): %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func kubectlApply(b *testing.B, kubectl string, sb *sandbox.Sandbox, manifest string) {
	b.Helper()
	cmd := exec.Command(kubectl, "--kubeconfig", sb.Kubeconfig(), "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("kubectl apply: %v\n%s\n%s", err, out, manifest)
	}
}

func kubectlPatch(b *testing.B, kubectl string, sb *sandbox.Sandbox, object, patch string) {
	b.Helper()
	if out, err := exec.Command(kubectl, "--kubeconfig", sb.Kubeconfig(), "patch", object, "--type", "merge", "-p", patch).CombinedOutput(); err != nil {
		b.Fatalf("kubectl patch %s: %v\n%s", object, err, out)
	}
}

func portOf(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

// reportSides prints the two runs side by side with the targets, and adds
// sluice's figures to the scorecard.
func reportSides(b *testing.B, sc *scorecard, rs []sideResult, loadStart string) {
	b.Helper()
	s, k := rs[0], rs[1]
	conv := func(r sideResult) string {
		if !r.settled {
			return fmt.Sprintf("not settled in %s (last change at %s)", sideCap, r.converged.Round(time.Second))
		}
		return r.converged.Round(time.Second).String()
	}
	pct := func(r sideResult) string { return fmt.Sprintf("%+.1f%%", 100*(r.cost-r.minimum)/r.minimum) }
	// The lower bound: the rounds the budget allows down to the bin-packing
	// minimum, each waiting consolidateAfter and a round's slowest drain
	// (the median, over the rounds, of each round's slowest; the shorter of
	// the two sides').
	rounds := roundsAllowed(sideNodes, s.minimumNodes, sideBudget)
	slowest := func(r sideResult) time.Duration {
		if len(r.drains) == 0 {
			return 0
		}
		return medianDuration(r.drains)
	}
	drain := min(slowest(s), slowest(k))
	bound := time.Duration(rounds) * (sideAfter + drain)
	overBound := func(r sideResult) string {
		return fmt.Sprintf("%.2f× (%d rounds made, slowest drains %s)", r.converged.Seconds()/bound.Seconds(), len(r.drains), roundedDurations(r.drains))
	}
	fmt.Printf("\n# Consolidation side by side: %d %s nodes, %d pods (%s/%s) in %d Deployments with PDBs, scaled down by %d%%; consolidateAfter %s, budget %d%%, types %s (load at start %s)\n",
		sideNodes, sideStartType, sideNodes*sidePerNode, sideCPU, sideMemory, sideDeployments, sideScaleDown, sideAfter, sideBudget, strings.Join(sideTypes, ", "), loadStart)
	printTable("", [][]string{
		{"figure", s.name, k.name, "target"},
		{"nodes at the end", fmt.Sprint(s.nodes), fmt.Sprint(k.nodes), fmt.Sprintf("minimum %d", s.minimumNodes)},
		{"machines at the end", s.types, k.types, ""},
		{"hourly cost at the end", fmt.Sprintf("$%.3f", s.cost), fmt.Sprintf("$%.3f", k.cost), fmt.Sprintf("minimum $%.3f", s.minimum)},
		{"above the bin-packing minimum", pct(s), pct(k), "sluice " + sc.want(sideAboveMinimum) + ", its cost over Karpenter's " + sc.want(sideCost)},
		{"time to converge", conv(s), conv(k), "sluice's over Karpenter's " + sc.want(sideConverge)},
		{"  lower bound: rounds × (consolidateAfter + slowest drain of a round)", fmt.Sprintf("%s = %d × (%s + %s)", bound.Round(time.Second), rounds, sideAfter, drain.Round(100*time.Millisecond)), "", ""},
		{"  time to converge over the bound", overBound(s), overBound(k), "sluice " + sc.want(sideBound)},
		{"evictions", fmt.Sprint(s.evictions), fmt.Sprint(k.evictions), "sluice's minus Karpenter's " + sc.want(sideEvictions)},
		{"start after the scale-down, nodes by pods held", s.layout, k.layout, "the plan on both: " + s.planned},
		{"  fewest possible, from where the scale-down left the pods", fmt.Sprint(s.mustMove), fmt.Sprint(k.mustMove), "the difference " + sc.want(sideFewest)},
		{"  beyond that fewest", fmt.Sprint(s.evictions - s.mustMove), fmt.Sprint(k.evictions - k.mustMove), "sluice's minus Karpenter's " + sc.want(sideBeyondFewest)},
		{"machines created", fmt.Sprint(s.created), fmt.Sprint(k.created), ""},
		{"PDB floors broken", fmt.Sprint(s.broken), fmt.Sprint(k.broken), "sluice " + sc.want(sideBroken)},
		{"load at the end", s.load, k.load, ""},
	})
	sc.add(sideAboveMinimum, 100*(s.cost-s.minimum)/s.minimum)
	sc.add(sideCost, s.cost/k.cost)
	sc.add(sideConverge, s.converged.Seconds()/k.converged.Seconds())
	sc.add(sideBound, s.converged.Seconds()/bound.Seconds())
	sc.add(sideEvictions, float64(s.evictions-k.evictions))
	sc.add(sideBeyondFewest, float64((s.evictions-s.mustMove)-(k.evictions-k.mustMove)))
	sc.add(sideFewest, math.Abs(float64(s.mustMove-k.mustMove)))
	sc.add(sideBroken, float64(s.broken))
	for _, r := range rs {
		if r.broken > 0 {
			fmt.Printf("\n%s: the auditor saw PDB floors broken:\n%s\n", r.name, r.audit)
		}
	}
}

// roundedDurations prints ds to a tenth of a second.
func roundedDurations(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond).String()
	}
	return strings.Join(out, " ")
}
