package bench

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/test/bench/feed"
)

// envFleetSizes overrides the node counts BenchmarkFleet measures.
const envFleetSizes = "SLUICE_BENCH_FLEET" // comma-separated node counts (default 1000,2000,5000)

// fleetRuns is how many times each figure is measured at each size; the
// median is printed and judged. SLUICE_BENCH_FLEET_RUNS=1 makes a quick
// look while working on a figure.
var fleetRuns = 3

func init() {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_FLEET_RUNS")); err == nil && n > 0 {
		fleetRuns = n
	}
}

// BenchmarkFleet measures the controller's own costs on a cluster at
// Kubernetes' limits: 5,000 nodes, 150,000 pods and 100 pools, and the same
// shape at 1,000 and 2,000 nodes for the growth curve. The objects are
// generated as the API server holds them (fleet_objects_test.go) and served
// by an in-memory API server (package feed: why it is faithful, and what it
// does not do, is its doc); the unmodified `sluice controller` binary runs
// against it in its own process, with its cache, transforms, indexes,
// reconcilers and orchestrator. At each size, three times over (a new
// controller process each time), it measures:
//
//   - the controller's start: caches synced and every queue empty;
//   - its memory once settled, after a forced collection: heap in use and
//     resident set, and the heap per pod;
//   - one evaluation pass of every pool: every pool's spec is edited at
//     once, and the wall time runs until every pool's status shows the edit
//     (decided and written);
//   - its API requests while idle for 20 s (writes must be none), and that
//     it asked the feed for no eviction or binding, which the feed does not
//     decide;
//   - `sluice status` and `sluice doctor` over the whole cluster, each a
//     process of its own listing everything.
//
// The consolidation pass is timed in this process (fleet_consolidation_test.go).
func BenchmarkFleet(b *testing.B) {
	sizes := fleetSizes(b)
	sc := newScorecard(b)
	for range b.N {
		loadStart := loadavg()
		bin := buildSluiceBinary(b)
		var results []fleetResult
		for _, n := range sizes {
			results = append(results, fleetAtSize(b, bin, n))
			if n != sizes[len(sizes)-1] {
				// So far, in case a larger size does not finish.
				printFleet(results, nil, loadStart)
			}
		}
		reportFleet(b, sc, results, loadStart)
	}
	sc.judge()
}

func fleetSizes(b *testing.B) []int {
	b.Helper()
	v := os.Getenv(envFleetSizes)
	if v == "" {
		return []int{1000, 2000, 5000}
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < fleetPools {
			b.Fatalf("%s=%q: want node counts of at least %d (one per pool), comma-separated", envFleetSizes, v, fleetPools)
		}
		out = append(out, n)
	}
	return out
}

// fleetResult is one size's figures, a sample per run.
type fleetResult struct {
	fleet                     *fleet
	synced, pass, reconciles  []time.Duration
	heap, rss                 []float64 // bytes
	status, doctor            []time.Duration
	statusCPU, doctorCPU      []time.Duration
	passCPU                   []float64 // the controller's CPU seconds over the pass
	idleWrites, idleReads     []float64
	idleCPU                   []float64 // cores
	passConsolidations        []float64 // consolidation passes run within the pool pass
	refused                   int       // evictions and bindings asked of the feed
	consolidateLargest, whole consolidationFigures
	load                      string
	heapTop                   string
}

func fleetAtSize(b *testing.B, bin string, n int) fleetResult {
	b.Helper()
	srv, err := feed.New(clock.RealClock{})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	built := time.Now()
	f := buildFleet(b, srv, n)
	fmt.Fprintf(os.Stderr, "fleet of %d nodes, %d pods, %d PodDisruptionBudgets, %d pools built in %s\n", f.nodes, f.pods, f.pdbs, len(f.pools), time.Since(built).Round(time.Second))
	kubeconfig := filepath.Join(b.TempDir(), "feed.kubeconfig")
	if err := os.WriteFile(kubeconfig, srv.Kubeconfig(), 0o600); err != nil {
		b.Fatal(err)
	}
	r := fleetResult{fleet: f, load: loadavg()}
	profiles := fleetProfileDir(b)
	for run := range fleetRuns {
		start := time.Now()
		c := startControllerProcess(b, bin, kubeconfig, "--providers", "kwok", "--profiling")
		c.waitQueuesEmpty(b, 15*time.Minute)
		r.synced = append(r.synced, time.Since(start))

		time.Sleep(5 * time.Second)
		heap, rss := settledMemory(b, c)
		r.heap, r.rss = append(r.heap, heap), append(r.rss, rss)
		if run == 0 {
			_, r.heapTop = c.heapProfile(b)
		}

		before, cpu := srv.Requests(), c.cpu(b)
		const idle = 20 * time.Second
		time.Sleep(idle)
		reads, writes := requestDelta(before, srv.Requests())
		r.idleReads, r.idleWrites = append(r.idleReads, reads/idle.Seconds()), append(r.idleWrites, writes)
		r.idleCPU = append(r.idleCPU, (c.cpu(b)-cpu)/idle.Seconds())

		sum, count := reconcileTime(b, c, "nodepool")
		passesBefore := consolidationPasses(b, c)
		passCPUBefore := c.cpu(b)
		var profiled func()
		if profiles != "" && run == 0 {
			profiled = profileController(b, c, profiles, fmt.Sprintf("controller-pass-%d.pprof", n), 20*time.Second)
		}
		r.pass = append(r.pass, editEveryFleetPool(b, srv, f, run))
		if profiled != nil {
			profiled()
		}
		sum2, count2 := reconcileTime(b, c, "nodepool")
		r.passCPU = append(r.passCPU, c.cpu(b)-passCPUBefore)
		r.passConsolidations = append(r.passConsolidations, consolidationPasses(b, c)-passesBefore)
		r.reconciles = append(r.reconciles, time.Duration((sum2-sum)/max(count2-count, 1)*float64(time.Second)))
		c.mustRun(b, "after the pass")
		c.stop()

		wall, spent := timeCommand(b, bin, append([]string{"status", "--kubeconfig", kubeconfig}, profileArgs(profiles, fmt.Sprintf("status-%d-%d.pprof", n, run))...)...)
		r.status, r.statusCPU = append(r.status, wall), append(r.statusCPU, spent)
		// A doctor run past a minute is run once: its median would cost
		// the benchmark minutes more and say the same.
		if run == 0 || r.doctor[0] < time.Minute {
			wall, spent := timeCommand(b, bin, append([]string{"doctor", "--kubeconfig", kubeconfig}, profileArgs(profiles, fmt.Sprintf("doctor-%d-%d.pprof", n, run))...)...)
			r.doctor, r.doctorCPU = append(r.doctor, wall), append(r.doctorCPU, spent)
		}
	}
	for key, v := range srv.Requests() {
		if strings.HasSuffix(key, "/eviction") || strings.HasSuffix(key, "/binding") {
			r.refused += v
		}
	}
	r.consolidateLargest, r.whole = fleetConsolidation(b, srv, f)
	return r
}

// settledMemory forces a collection in the controller and reads its heap
// in use (the heap profile's runtime.MemStats, taken right after) and its
// resident set.
func settledMemory(b *testing.B, c *controllerProcess) (heap, rss float64) {
	b.Helper()
	resp, err := http.Get(strings.TrimSuffix(c.metrics, "/metrics") + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapInuse = "); ok {
			heap, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if heap == 0 {
		b.Fatal("the controller's heap profile gave no HeapInuse")
	}
	mem, err := sandbox.ResidentMemory(c.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return heap, float64(mem.RSS)
}

// editEveryFleetPool changes what no pool decides with (a cap on its node
// count far above its size) in every pool at once, and times until every
// pool's status shows the edit: each pool evaluated, decided and written.
func editEveryFleetPool(b *testing.B, srv *feed.Server, f *fleet, run int) time.Duration {
	b.Helper()
	start := time.Now()
	want := map[string]int64{}
	for i, pool := range f.pools {
		err := srv.Mutate(pool, func(obj runtime.Object) {
			p := obj.(*v1alpha1.NodePool)
			p.Spec.Limits = &v1alpha1.Limits{Nodes: ptr.To(int32(100000 + run*1000 + i))}
			want[p.Name] = p.Generation + 1
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	waitUntil(b, 5*time.Minute, "every pool's status showing the edit", func() bool {
		for _, pool := range f.pools {
			obj, err := srv.Get(pool)
			if err != nil || obj.(*v1alpha1.NodePool).Status.ObservedGeneration < want[pool.Name] {
				return false
			}
		}
		return true
	})
	return time.Since(start)
}

// consolidationPasses reads how many consolidation passes the controller
// has made (sluice_consolidation_pass_seconds' count).
func consolidationPasses(b *testing.B, c *controllerProcess) float64 {
	b.Helper()
	const family = "sluice_consolidation_pass_seconds_count"
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(c.metrics)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), family+" "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatalf("%s: %v", family, err)
			}
			return n
		}
	}
	return 0
}

func requestDelta(before, after map[string]int) (reads, writes float64) {
	for key, v := range after {
		d := float64(v - before[key])
		switch verb, _, _ := strings.Cut(key, " "); verb {
		case "get", "list", "watch":
			reads += d
		default:
			writes += d
		}
	}
	return reads, writes
}

// timeCommand runs the sluice binary with args and returns its wall time
// and its CPU time (user and system); exit 3 (a finding) is an answer, any
// other failure is not.
func timeCommand(b *testing.B, bin string, args ...string) (wall, cpu time.Duration) {
	b.Helper()
	start := time.Now()
	cmd := exec.Command(bin, args...)
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 3) {
		b.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 20))
	}
	return took, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianFloat(fs []float64) float64 {
	s := slices.Clone(fs)
	slices.Sort(s)
	return s[len(s)/2]
}

// reportFleet prints a column per size, each figure the median of its
// runs, and judges the largest size's figures against their targets.
func reportFleet(b *testing.B, sc *scorecard, rs []fleetResult, loadStart string) {
	b.Helper()
	printFleet(rs, sc, loadStart)
	last := rs[len(rs)-1]
	for _, r := range rs {
		if r.refused > 0 {
			b.Errorf("at %d nodes the controller asked the feed for %d evictions or bindings: it decided to disrupt, and the feed cannot judge that", r.fleet.nodes, r.refused)
		}
	}
	sc.add(fleetHeap, medianFloat(last.heap)/(1<<20))
	sc.add(fleetRSS, medianFloat(last.rss)/(1<<20))
	sc.add(fleetPerPod, medianFloat(last.heap)/float64(last.fleet.pods)/1024)
	sc.add(fleetPass, medianDuration(last.pass).Seconds())
	sc.add(fleetConsolidateLargest, medianDuration(last.consolidateLargest.took).Seconds())
	sc.add(fleetConsolidateAll, medianDuration(last.whole.took).Seconds())
	sc.add(fleetDoctor, medianDuration(last.doctor).Seconds())
	sc.add(fleetStatus, medianDuration(last.status).Seconds())
	sc.add(fleetIdleWrites, medianFloat(last.idleWrites))
}

// printFleet prints the sizes measured so far, a column each; sc, when
// given, fills the target column.
func printFleet(rs []fleetResult, sc *scorecard, loadStart string) {
	want := func(f figure) string {
		if sc == nil {
			return ""
		}
		return sc.want(f)
	}
	header := []string{"figure"}
	for _, r := range rs {
		header = append(header, fmt.Sprintf("%d nodes / %d pods", r.fleet.nodes, r.fleet.pods))
	}
	header = append(header, "target (largest size)")
	mib := func(v float64) string { return fmt.Sprintf("%.0f MiB", v/(1<<20)) }
	row := func(name, target string, cell func(r fleetResult) string) []string {
		out := []string{name}
		for _, r := range rs {
			out = append(out, cell(r))
		}
		return append(out, target)
	}
	ratio := func(c consolidationFigures) string {
		if c.bound == 0 {
			return "no bound"
		}
		return fmt.Sprintf("$%.2f/h now, $%.2f/h after its command (%d of %d nodes), bound $%.2f/h: %.2f× the bound",
			c.costNow, c.costPlan, c.removed, c.nodes, c.bound, c.costPlan/c.bound)
	}
	rows := [][]string{header,
		row("controller start: caches synced, queues empty", "", func(r fleetResult) string { return medianDuration(r.synced).Round(100 * time.Millisecond).String() }),
		row("controller heap in use, settled", want(fleetHeap), func(r fleetResult) string { return mib(medianFloat(r.heap)) }),
		row("controller resident memory", want(fleetRSS), func(r fleetResult) string { return mib(medianFloat(r.rss)) }),
		row("heap per pod (all of it over the pods)", want(fleetPerPod), func(r fleetResult) string {
			return fmt.Sprintf("%.2f KiB", medianFloat(r.heap)/float64(r.fleet.pods)/1024)
		}),
		row("one evaluation pass of every pool (wall)", want(fleetPass), func(r fleetResult) string { return medianDuration(r.pass).Round(time.Millisecond).String() }),
		row("  one pool's reconcile, mean", "", func(r fleetResult) string { return medianDuration(r.reconciles).Round(100 * time.Microsecond).String() }),
		row("  the controller's CPU time over it", "", func(r fleetResult) string { return fmt.Sprintf("%.2fs", medianFloat(r.passCPU)) }),
		row("  consolidation passes within it (of 100 pools)", "", func(r fleetResult) string { return fmt.Sprintf("%.0f", medianFloat(r.passConsolidations)) }),
		row("consolidation pass, largest pool", want(fleetConsolidateLargest), func(r fleetResult) string {
			return medianDuration(r.consolidateLargest.took).Round(time.Millisecond).String()
		}),
		row("  its CPU time", "", func(r fleetResult) string {
			return medianDuration(r.consolidateLargest.cpu).Round(time.Millisecond).String()
		}),
		row("  its plan against the cheapest packing", "", func(r fleetResult) string { return ratio(r.consolidateLargest) }),
		row("consolidation pass, every pool", want(fleetConsolidateAll), func(r fleetResult) string { return medianDuration(r.whole.took).Round(time.Millisecond).String() }),
		row("  their CPU time", "", func(r fleetResult) string { return medianDuration(r.whole.cpu).Round(time.Millisecond).String() }),
		row("  the plans against the cheapest packing", "", func(r fleetResult) string { return ratio(r.whole) }),
		row("sluice doctor, whole cluster", want(fleetDoctor), func(r fleetResult) string { return medianDuration(r.doctor).Round(time.Millisecond).String() }),
		row("  its CPU time", "", func(r fleetResult) string { return medianDuration(r.doctorCPU).Round(time.Millisecond).String() }),
		row("sluice status", want(fleetStatus), func(r fleetResult) string { return medianDuration(r.status).Round(time.Millisecond).String() }),
		row("  its CPU time", "", func(r fleetResult) string { return medianDuration(r.statusCPU).Round(time.Millisecond).String() }),
		row("controller API writes in 20 s idle", want(fleetIdleWrites), func(r fleetResult) string { return fmt.Sprintf("%.0f", medianFloat(r.idleWrites)) }),
		row("controller CPU while idle", "", func(r fleetResult) string { return fmt.Sprintf("%.0f%% of a core", 100*medianFloat(r.idleCPU)) }),
		row("controller API reads while idle", "", func(r fleetResult) string { return fmt.Sprintf("%.2f/s", medianFloat(r.idleReads)) }),
		row("evictions and bindings asked of the feed", "0 (it decides none)", func(r fleetResult) string { return fmt.Sprint(r.refused) }),
		row("load average when the size began", "", func(r fleetResult) string { return r.load }),
	}
	printTable(fmt.Sprintf("# Fleet: the controller's own costs, in its own process against the in-memory feed, median of %d runs (load at start %s, at end %s)",
		fleetRuns, loadStart, loadavg()), rows)
	last := rs[len(rs)-1]
	fmt.Printf("\nheap profile of the controller at %d nodes (inuse_space, after a collection):\n%s\n", last.fleet.nodes, last.heapTop)
}
