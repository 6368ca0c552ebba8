package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// BenchmarkDrainTwentyNodes drains 20 nodes of 50 pods each (50 Deployments,
// PodDisruptionBudgets at maxUnavailable 25%, processes that take 5 s to
// stop) with kubectl drain once and with sluice (--parallel 20) three times,
// on identical copies of the workload in one sandbox, and prints the median
// sluice run beside kubectl: wall time and API requests per evicted pod,
// each judged by the median of the three runs against its target
// (targets_bench_test.go). It runs twice: on a quiet machine, and with one
// core kept busy by a CPU burner of our own beside the control plane
// ("loaded"); both are held to the same targets.
//
// Requests are counted twice: by sluice's client (every request it sent),
// and by the API server's own apiserver_request_total for the eviction
// subresource (only drains evict), which shows refused (429) evictions.
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
	requests  int
	evicted   int
	evictions map[string]float64 // by HTTP code, from the API server
}

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
	kTook, kRequests := runKubectlDrain(b, kubectl, sb.Kubeconfig(), k.nodes, "--timeout", "15m")
	kEvicted := goneFrom(b, client, k)

	runs := make([]sluiceRun, sluiceRuns)
	for i := range runs {
		fmt.Fprintf(os.Stderr, "building 20 nodes x 50 pods for sluice run %d ...\n", i+1)
		s := newGroup(b, client, fmt.Sprintf("sluice-drain-%d", i), nodes, nodes, workload)
		time.Sleep(3 * time.Second)
		before := evictionsByCode(b, client)
		counted, requests := countingClient(b, sb)
		d, err := drain.New(counted, clock.RealClock{}, drain.Options{IgnoreDaemonSets: true, Parallel: nodes}, drain.Hooks{})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		report, err := d.Drain(context.Background(), s.nodes)
		took := time.Since(start)
		if err != nil || !report.Drained() {
			b.Fatalf("sluice drain: %v drained=%v", err, report != nil && report.Drained())
		}
		after := evictionsByCode(b, client)
		for code := range after {
			after[code] -= before[code]
		}
		runs[i] = sluiceRun{took: took, requests: int(requests.Load()), evicted: goneFrom(b, client, s), evictions: after}
	}
	loadAfter := loadavg()

	slices.SortFunc(runs, func(a, c sluiceRun) int { return int(a.took - c.took) })
	med := runs[len(runs)/2]
	perPod := func(r sluiceRun) float64 { return float64(r.requests) / float64(max(r.evicted, 1)) }
	perPods := make([]float64, len(runs))
	for i, r := range runs {
		perPods[i] = perPod(r)
	}
	slices.Sort(perPods)
	medPer := perPods[len(perPods)/2]
	kPer := float64(kRequests) / float64(max(kEvicted, 1))
	speedup := kTook.Seconds() / med.took.Seconds()
	for _, r := range runs {
		sc.add(drainSpeedup, kTook.Seconds()/r.took.Seconds())
	}
	sc.add(drainRequestsPerPod, perPods...)
	b.ReportMetric(kTook.Seconds(), "kubectl-s")
	b.ReportMetric(med.took.Seconds(), "sluice-median-s")
	b.ReportMetric(speedup, "speedup-x")
	b.ReportMetric(medPer, "sluice-req/pod")
	var tookAll, perAll []string
	for _, r := range runs {
		tookAll = append(tookAll, fmt.Sprintf("%.1fs", r.took.Seconds()))
	}
	for _, p := range perPods {
		perAll = append(perAll, fmt.Sprintf("%.2f", p))
	}
	printTable(fmt.Sprintf("drain 20 nodes x 50 pods, %s; pods take 5s to shut down, PDBs maxUnavailable 25%%; kubectl once, sluice --parallel 20 %d times, median (targets: kubectl's wall time over sluice's %s, requests per evicted pod %s)\nload average before: %s; after: %s",
		condition, sluiceRuns, sc.want(drainSpeedup), sc.want(drainRequestsPerPod), loadBefore, loadAfter), [][]string{
		{"", "kubectl drain", "sluice drain (median)", "ratio", "sluice runs"},
		{"wall time", fmt.Sprintf("%.1fs", kTook.Seconds()), fmt.Sprintf("%.1fs", med.took.Seconds()), fmt.Sprintf("%.1fx faster", speedup), strings.Join(tookAll, " ")},
		{"pods evicted", fmt.Sprint(kEvicted), fmt.Sprint(med.evicted), "", ""},
		{"API requests (client side)", fmt.Sprint(kRequests), fmt.Sprint(med.requests), "", ""},
		{"requests per evicted pod", fmt.Sprintf("%.2f", kPer), fmt.Sprintf("%.2f", medPer), requestRatio(kPer, medPer), strings.Join(perAll, " ")},
		{"evictions the API server answered (median run)", "", codes(med.evictions), "", ""},
	})
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

// evictionsByCode reads the API server's own count of eviction requests, by
// HTTP code.
func evictionsByCode(b *testing.B, client kubernetes.Interface) map[string]float64 {
	b.Helper()
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="pods"`) ||
			!strings.Contains(line, `subresource="eviction"`) || !strings.Contains(line, `verb="POST"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		for _, m := range promLabel.FindAllStringSubmatch(line, -1) {
			if m[1] == "code" {
				out[m[2]] += v
			}
		}
	}
	return out
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
