package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// BenchmarkDrainTwentyNodes drains 20 nodes of 50 pods each (50 Deployments,
// PodDisruptionBudgets at maxUnavailable 25%, processes that take 5 s to
// stop) with kubectl drain once and with sluice (--parallel 20) three times,
// on identical copies of the workload in one sandbox, and prints the median
// sluice run beside kubectl: wall time, both beside the drain's lower bound
// (drainBound), and API requests per evicted pod, each judged by the median
// of the three runs against its target (targets_bench_test.go). It runs
// twice: on a quiet machine, and with one core kept busy by a CPU burner of
// our own beside the control plane ("loaded"); both are held to the same
// targets.
//
// Requests are counted by verb, resource and subresource twice: by the
// client (sluice's every request through a counting round-tripper,
// kubectl's from its -v=6 log), and by the API server's own
// apiserver_request_total over the same window, which counts every client
// (the controller manager, the scheduler and the simulated kubelets too)
// and so is a check on the client's count only where sluice is the one
// client making that kind of request, such as evictions; its count of
// evictions by HTTP code shows the refused (429) ones.
func BenchmarkDrainTwentyNodes(b *testing.B) {
	for _, loaded := range []bool{false, true} {
		name := "quiet"
		if loaded {
			name = "loaded"
		}
		b.Run(name, func(b *testing.B) {
			sc := newScorecard(b)
			for range b.N {
				drainTwentyNodes(b, sc, loaded)
			}
			sc.judge()
		})
	}
}

const sluiceRuns = 3

type sluiceRun struct {
	took      time.Duration
	requests  *requestTally
	server    map[requestKind]float64 // the API server's count over the run, all clients
	evicted   int
	evictions map[string]float64 // by HTTP code, from the API server
	// firstAsk, lastAsk: when the first and the last pod were asked to
	// leave, from the start.
	firstAsk, lastAsk time.Duration
}

func (r sluiceRun) perPod() float64 { return float64(r.requests.Load()) / float64(max(r.evicted, 1)) }

func drainTwentyNodes(b *testing.B, sc *scorecard, loaded bool) {
	const nodes, deployments, replicas = 20, 50, 20
	sb, client, kubectl := startSandbox(b)
	workload := func(g *group) []runtime.Object {
		var objs []runtime.Object
		for i := range deployments {
			name := fmt.Sprintf("app%02d", i)
			objs = append(objs,
				fixture.Deployment(g.ns, name, replicas, fixture.NodeSelector(g.label), fixture.Requests("10m", "16Mi"), fixture.GracePeriod(30), fixture.ExitsAfter(5)),
				fixture.PDB(g.ns, name, name, fixture.MaxUnavailable("25%")))
		}
		return objs
	}
	condition := "quiet"
	if loaded {
		stop := burnOneCore(b)
		defer stop()
		condition = "loaded (one core kept busy by a CPU burner)"
	}
	loadBefore := loadavg()

	fmt.Fprintln(os.Stderr, "building 20 nodes x 50 pods for kubectl ...")
	k := newGroup(b, client, "kubectl-drain", nodes, nodes, workload)
	time.Sleep(3 * time.Second) // let the disruption controller settle every budget
	bound := drainBound(b, client, k)
	kTook, kRequests := runKubectlDrain(b, kubectl, sb.Kubeconfig(), k.nodes, "--timeout", "15m")
	kEvicted := goneFrom(b, client, k)

	runs := make([]sluiceRun, sluiceRuns)
	for i := range runs {
		fmt.Fprintf(os.Stderr, "building 20 nodes x 50 pods for sluice run %d ...\n", i+1)
		s := newGroup(b, client, fmt.Sprintf("sluice-drain-%d", i), nodes, nodes, workload)
		time.Sleep(3 * time.Second)
		if sBound := drainBound(b, client, s); sBound.total != bound.total {
			b.Fatalf("the copies of the workload differ: a lower bound of %s for kubectl's, %s for sluice run %d's", bound, sBound, i+1)
		}
		runs[i] = drainWithSluice(b, sb, client, s)
	}
	loadAfter := loadavg()

	slices.SortFunc(runs, func(a, c sluiceRun) int { return int(a.took - c.took) })
	med := runs[len(runs)/2]
	perPods := make([]float64, len(runs))
	for i, r := range runs {
		perPods[i] = r.perPod()
	}
	slices.Sort(perPods)
	medPer := perPods[len(perPods)/2]
	kPer := float64(kRequests.Load()) / float64(max(kEvicted, 1))
	speedup := kTook.Seconds() / med.took.Seconds()
	for _, r := range runs {
		sc.add(drainSpeedup, kTook.Seconds()/r.took.Seconds())
	}
	sc.add(drainRequestsPerPod, perPods...)
	b.ReportMetric(kTook.Seconds(), "kubectl-s")
	b.ReportMetric(med.took.Seconds(), "sluice-median-s")
	b.ReportMetric(speedup, "speedup-x")
	b.ReportMetric(medPer, "sluice-req/pod")
	b.ReportMetric(med.took.Seconds()/bound.total.Seconds(), "sluice-over-bound-x")
	var tookAll, perAll []string
	for _, r := range runs {
		tookAll = append(tookAll, fmt.Sprintf("%.1fs", r.took.Seconds()))
	}
	for _, p := range perPods {
		perAll = append(perAll, fmt.Sprintf("%.2f", p))
	}
	overBound := func(d time.Duration) string { return fmt.Sprintf("%.2fx", d.Seconds()/bound.total.Seconds()) }
	printTable(fmt.Sprintf("drain 20 nodes x 50 pods, %s; pods take 5s to shut down, PDBs maxUnavailable 25%%; kubectl once, sluice --parallel 20 %d times, median (targets: kubectl's wall time over sluice's %s, requests per evicted pod %s)\nload average before: %s; after: %s",
		condition, sluiceRuns, sc.want(drainSpeedup), sc.want(drainRequestsPerPod), loadBefore, loadAfter), [][]string{
		{"", "kubectl drain", "sluice drain (median)", "ratio", "sluice runs"},
		{"wall time", fmt.Sprintf("%.1fs", kTook.Seconds()), fmt.Sprintf("%.1fs", med.took.Seconds()), fmt.Sprintf("%.1fx faster", speedup), strings.Join(tookAll, " ")},
		{"lower bound (" + bound.String() + ")", bound.total.String(), bound.total.String(), "", ""},
		{"wall time over the lower bound", overBound(kTook), overBound(med.took), "", ""},
		{"sluice: first and last pod asked to leave", "", fmt.Sprintf("%.1fs, %.1fs", med.firstAsk.Seconds(), med.lastAsk.Seconds()), "", ""},
		{"pods evicted", fmt.Sprint(kEvicted), fmt.Sprint(med.evicted), "", ""},
		{"API requests (client side)", fmt.Sprint(kRequests.Load()), fmt.Sprint(med.requests.Load()), "", ""},
		{"requests per evicted pod", fmt.Sprintf("%.2f", kPer), fmt.Sprintf("%.2f", medPer), requestRatio(kPer, medPer), strings.Join(perAll, " ")},
		{"evictions the API server answered (median run)", "", codes(med.evictions), "", ""},
	})
	printRequestKinds(kRequests, med)
}

// drainWithSluice drains g's nodes with sluice as `sluice drain
// --ignore-daemonsets --parallel 20` would, counting its requests.
func drainWithSluice(b *testing.B, sb *sandbox.Sandbox, client kubernetes.Interface, g *group) sluiceRun {
	b.Helper()
	var (
		mu                sync.Mutex
		firstAsk, lastAsk time.Time
	)
	observe := drain.ObserverFunc(func(p drain.Progress) {
		if p.Kind != drain.ProgressEvicting {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if firstAsk.IsZero() || p.Time.Before(firstAsk) {
			firstAsk = p.Time
		}
		if p.Time.After(lastAsk) {
			lastAsk = p.Time
		}
	})
	before, evBefore := apiserverRequestsByKind(b, client)
	counted, requests := countingClient(b, sb)
	d, err := drain.New(counted, clock.RealClock{}, drain.Options{IgnoreDaemonSets: true, Parallel: len(g.nodes)}, drain.Hooks{Observer: observe})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	report, err := d.Drain(context.Background(), g.nodes)
	took := time.Since(start)
	if err != nil || !report.Drained() {
		b.Fatalf("sluice drain: %v drained=%v", err, report != nil && report.Drained())
	}
	after, evAfter := apiserverRequestsByKind(b, client)
	for k := range after {
		after[k] -= before[k]
	}
	for code := range evAfter {
		evAfter[code] -= evBefore[code]
	}
	mu.Lock()
	defer mu.Unlock()
	return sluiceRun{took: took, requests: requests, server: after, evicted: goneFrom(b, client, g), evictions: evAfter,
		firstAsk: firstAsk.Sub(start), lastAsk: lastAsk.Sub(start)}
}

// printRequestKinds prints the requests of kubectl and of sluice's median
// run by verb, resource and subresource, beside the API server's count of
// the same kinds over the sluice run.
func printRequestKinds(kubectl *requestTally, med sluiceRun) {
	k, s := kubectl.byKind(), med.requests.byKind()
	kinds := slices.Collect(maps.Keys(s))
	for kind := range k {
		if _, ok := s[kind]; !ok {
			kinds = append(kinds, kind)
		}
	}
	slices.SortFunc(kinds, func(a, c requestKind) int {
		if d := cmp.Compare(s[c]+k[c], s[a]+k[a]); d != 0 {
			return d
		}
		return strings.Compare(a.String(), c.String())
	})
	per := func(n int64) string { return fmt.Sprintf("%d (%.2f/pod)", n, float64(n)/float64(max(med.evicted, 1))) }
	rows := [][]string{{"request", "kubectl drain (its log)", "sluice, median run (its client)", "API server over that run (all clients)"}}
	for _, kind := range kinds {
		server := ""
		if v, ok := med.server[kind]; ok {
			server = fmt.Sprintf("%.0f", v)
		}
		rows = append(rows, []string{kind.String(), fmt.Sprint(k[kind]), per(s[kind]), server})
	}
	rows = append(rows, []string{"all", fmt.Sprint(kubectl.Load()), per(med.requests.Load()), ""})
	printTable("API requests by verb and resource (the API server counts a WATCH when it ends, and counts every client's requests: "+
		"the controller manager's, the simulated kubelets', and its own, such as the list of budgets each eviction makes inside it)", rows)
}

// drainBound is the least time a drain of g's nodes can take, from the
// workload as built. Each PodDisruptionBudget lets its pods on the drained
// nodes go in waves: ceil(those pods / the disruptions it allows with every
// pod healthy). A wave after the first waits until the previous wave's
// replacements are Ready, since the budget counts a replacement as healthy
// only then; it does not wait for the previous wave's pods to exit, since a
// ReplicaSet replaces a pod as soon as it is being deleted and a pod being
// deleted no longer counts either way. The last wave's pods then take their
// exit time to go: min(grace period, the process's own exit). So per budget
// (waves - 1) × ready + exit, and the drain's bound is the largest. The
// sandbox's pods are Ready as soon as they are bound unless their template
// says otherwise (sandbox.sluice.dev/ready-after-seconds), so with this
// workload the bound is the exit time alone. It omits every latency of the
// control plane: the eviction's round trip, the ReplicaSet controller
// creating a replacement, the scheduler binding it, the simulated kubelet
// starting it, the disruption controller writing the budget's new status and
// the watch bringing it, once per wave; and the cordon, the first list and
// the last check of each node.
func drainBound(b *testing.B, client kubernetes.Interface, g *group) lowerBound {
	b.Helper()
	ctx := context.Background()
	pdbs, err := client.PolicyV1().PodDisruptionBudgets(g.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pods, err := client.CoreV1().Pods(g.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	drained := map[string]bool{}
	for _, n := range g.nodes {
		drained[n] = true
	}
	var worst lowerBound
	for _, pdb := range pdbs.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			b.Fatal(err)
		}
		var on []*corev1.Pod
		for i := range pods.Items {
			if p := &pods.Items[i]; drained[p.Spec.NodeName] && sel.Matches(labels.Set(p.Labels)) {
				on = append(on, p)
			}
		}
		if len(on) == 0 {
			continue
		}
		allowed := int(pdb.Status.DisruptionsAllowed)
		if allowed < 1 {
			b.Fatalf("PodDisruptionBudget %s/%s allows no disruption before the drain: the bound would be infinite", pdb.Namespace, pdb.Name)
		}
		lb := lowerBound{pdb: pdb.Name, pods: len(on), allowed: allowed, waves: (len(on) + allowed - 1) / allowed}
		for _, p := range on {
			lb.exit = max(lb.exit, podExit(p))
			lb.ready = max(lb.ready, secondsAnnotation(p, contract.SandboxReadyAfterSeconds))
		}
		lb.total = time.Duration(lb.waves-1)*lb.ready + lb.exit
		if lb.total > worst.total {
			worst = lb
		}
	}
	if worst.waves == 0 {
		b.Fatalf("no PodDisruptionBudget of %s selects a pod on the drained nodes", g.ns)
	}
	return worst
}

// lowerBound is drainBound's answer, from its slowest budget.
type lowerBound struct {
	pdb           string
	pods, allowed int
	waves         int
	exit, ready   time.Duration
	total         time.Duration
}

func (lb lowerBound) String() string {
	return fmt.Sprintf("PDB %s: %d pods on the drained nodes, %d at a time = %d waves; (%d-1) x %s to a replacement's Ready + %s exit",
		lb.pdb, lb.pods, lb.allowed, lb.waves, lb.waves, lb.ready, lb.exit)
}

// podExit is how long the pod takes to go once asked: its process's own
// exit time, cut short by its grace period, as the sandbox's kubelet does.
func podExit(p *corev1.Pod) time.Duration {
	grace := time.Duration(ptr.Deref(p.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)) * time.Second
	if p.Annotations[contract.SandboxExitAfterSeconds] == "" {
		return grace
	}
	return min(grace, secondsAnnotation(p, contract.SandboxExitAfterSeconds))
}

func secondsAnnotation(p *corev1.Pod, key string) time.Duration {
	v, err := strconv.ParseFloat(p.Annotations[key], 64)
	if err != nil {
		return 0
	}
	return time.Duration(v * float64(time.Second))
}

// burnOneCore keeps one core busy with a child process of our own (this test
// binary, spinning) until the returned function is called: a fixed, bounded
// load beside the control plane.
func burnOneCore(b *testing.B) func() {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBurnCPU$") //nolint:gosec // this very test binary
	cmd.Env = append(os.Environ(), "SLUICE_BENCH_BURN=1")
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting the CPU burner: %v", err)
	}
	return func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
}

// TestBurnCPU spins one core until killed; it runs only as burnOneCore's child.
func TestBurnCPU(t *testing.T) {
	if os.Getenv("SLUICE_BENCH_BURN") != "1" {
		t.Skip("the CPU burner of BenchmarkDrainTwentyNodes/loaded")
	}
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			fmt.Println(x)
		}
	}
}

// apiserverRequestsByKind reads the API server's own count of requests
// served, all clients together, by verb, resource and subresource, and of
// evictions by HTTP code.
func apiserverRequestsByKind(b *testing.B, client kubernetes.Interface) (map[requestKind]float64, map[string]float64) {
	b.Helper()
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	kinds, evictions := map[requestKind]float64{}, map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "apiserver_request_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		var k requestKind
		code := ""
		for _, m := range promLabel.FindAllStringSubmatch(labels, -1) {
			switch m[1] {
			case "verb":
				k.verb = m[2]
			case "resource":
				k.resource = m[2]
			case "subresource":
				k.subresource = m[2]
			case "code":
				code = m[2]
			}
		}
		kinds[k] += v
		if k == (requestKind{verb: "POST", resource: "pods", subresource: "eviction"}) {
			evictions[code] += v
		}
	}
	return kinds, evictions
}

// evictionsByCode is the API server's own count of eviction requests, by
// HTTP code.
func evictionsByCode(b *testing.B, client kubernetes.Interface) map[string]float64 {
	b.Helper()
	_, evictions := apiserverRequestsByKind(b, client)
	return evictions
}

func codes(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %.0f", k, m[k])
	}
	return strings.Join(parts, ", ")
}
