package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/test/audit"
)

// envDriftNodes overrides the size of BenchmarkDriftAtScale's pool, for a
// quick run or a machine that does not hold 1,000 nodes.
const envDriftNodes = "SLUICE_BENCH_DRIFT_NODES"

// envDriftProfile names a directory: BenchmarkDriftAtScale then writes a
// CPU profile of the controller over the drift's first two minutes, and its
// goroutines every 10 s (where a pass waits is not CPU), and prints the
// profile's top.
const envDriftProfile = "SLUICE_BENCH_DRIFT_PROFILE"

// BenchmarkDriftAtScale drifts one large pool on the sandbox (1,000 nodes by
// default, SLUICE_BENCH_DRIFT_NODES) to a new image under a 10 % budget,
// replacement first, with machines that boot in 5 s and 2 pods a node (in
// Deployments of 100 under PDBs of maxUnavailable 25 %) that take 3 s to
// exit. `sluice controller` runs as its own process. It prints:
//
//   - the wall time, from the pool's edit to every node running the new image
//     and Ready with the pool at its size, beside its lower bound: the larger
//     of rounds × (boot + exit), rounds being ceil(nodes / budget), and the
//     pods to move over the sandbox's own ceiling of pod deletions a second.
//     The ceiling is measured in the same run, before the controller starts,
//     by the mass-spot bench's bare client (measureCeiling): it cordons a
//     budget's worth of the pool's nodes, evicts every pod on them at once
//     with no client limit, and its evictions granted a second are the rate;
//     the nodes are uncordoned and the workload settles before sluice's turn;
//   - the most old nodes out of service at once (marked, cordoned or being
//     deleted, and not yet gone), against the budget;
//   - the time from a slot freeing to the next node marked, p50 and p99. The
//     budget lets B = ceil(nodes × 10 %) old nodes count at once, and an old
//     node counts until its Node is gone (a replacement on its way does not
//     count, docs/pools.md). So the k-th old Node to go frees the slot the
//     (B+k)-th mark may take: the k-th sample is the time from the k-th old
//     Node's deletion to the (B+k)-th old node getting sluice's disruption
//     record (contract.AnnotationDisruption), for k = 1 .. nodes − B. Both
//     instants are when the benchmark's own watch of the nodes saw them, so
//     the watch's delay is on both sides;
//   - the controller's API requests in a minute of idling before the drift;
//   - whether test/audit's watcher, started just before the edit, saw any
//     promise broken (PDB floors, the budget, one replacement per node, ...).
//
// Each figure is judged against its target (targets_bench_test.go).
func BenchmarkDriftAtScale(b *testing.B) {
	const (
		budgetPct   = 10
		boot        = 5 * time.Second
		slowestExit = 3 * time.Second
		podsPer     = 2
		perApp      = 100
		idleWindow  = time.Minute
	)
	nodes := envInt(b, envDriftNodes, 1000)
	if nodes%(perApp/podsPer) != 0 {
		b.Fatalf("%s=%d: want a multiple of %d (Deployments of %d pods, %d a node)", envDriftNodes, nodes, perApp/podsPer, perApp, podsPer)
	}
	budget := int(math.Ceil(float64(nodes) * budgetPct / 100))
	if benchTargets[driftScaleOut].threshold != float64(budget) && nodes == 1000 {
		b.Fatalf("the target for old nodes out at once is %g, but the pool's budget is %d nodes", benchTargets[driftScaleOut].threshold, budget)
	}
	sc := newScorecard(b)
	for range b.N {
		loadStart := loadavg()
		bin := buildSluiceBinary(b)
		begin := time.Now()
		sb, clientset, _ := startSandbox(b)
		kube := poolClient(b, sb)
		pool := benchPool("scale", budgetPct, boot)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := watchRollout(ctx, b, clientset, pool.Name, markedBySluice)
		counter := newReadyCounter(ctx, clientset)

		// The pool's nodes, made by a kwok provider of the benchmark's own
		// (the controller's finds them from their Nodes).
		stepStart := time.Now()
		if err := kube.Create(ctx, pool); err != nil {
			b.Fatalf("creating pool %s: %v", pool.Name, err)
		}
		made := kwok.New(clientset, clock.RealClock{}, kwok.Options{Registered: true})
		provCtx, provStop := context.WithCancel(ctx)
		go func() { _ = made.Run(provCtx) }()
		fast := pool.DeepCopy()
		fast.Spec.Provider.Kwok.BootDelay = &metav1.Duration{}
		for range nodes {
			if _, err := made.Create(ctx, fast, ""); err != nil {
				b.Fatal(err)
			}
		}
		waitFor(b, sb, 15*time.Minute, fmt.Sprintf("%d nodes of pool %s Ready", nodes, pool.Name), func() (int64, int64) {
			return int64(w.readyUntainted()), int64(nodes)
		})
		provStop()
		nodesReady := time.Since(stepStart)

		stepStart = time.Now()
		const ns = "drift"
		if err := fixture.Create(ctx, clientset, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
		waitUntil(b, 2*time.Minute, "the default ServiceAccount in "+ns, func() bool {
			_, err := clientset.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil
		})
		apps := nodes * podsPer / perApp
		pods := apps * perApp
		var objs []runtime.Object
		for a := range apps {
			name := fmt.Sprintf("app%02d", a)
			objs = append(objs,
				fixture.Deployment(ns, name, perApp, fixture.NodeSelector(pool.Spec.Template.Labels), fixture.Requests("100m", "128Mi"),
					fixture.GracePeriod(30), fixture.ExitsAfter(slowestExit.Seconds())),
				fixture.PDB(ns, name, name, fixture.MaxUnavailable("25%")))
		}
		createParallel(ctx, b, clientset, objs, 4)
		waitFor(b, sb, 20*time.Minute, "pods Running and Ready", func() (int64, int64) { return counter.readyPods.Load(), int64(pods) })
		waitBudgetsSettled(b, clientset, ns, apps, 5*time.Minute)
		podsReady := time.Since(stepStart)

		// The sandbox's ceiling, on a budget's worth of the pool's nodes,
		// before the controller runs; then the cluster settles again.
		stepStart = time.Now()
		waitCalm(b, time.Minute)
		ceilNodes := spreadNodes(w.names(), budget)
		ceil := measureCeiling(b, &scaleCluster{sb: sb, client: clientset, ns: ns}, ceilNodes)
		for _, n := range ceilNodes {
			if _, err := clientset.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(`{"spec":{"unschedulable":null}}`), metav1.PatchOptions{}); err != nil {
				b.Fatalf("uncordoning %s after the ceiling: %v", n, err)
			}
		}
		waitFor(b, sb, 10*time.Minute, "pods Running and Ready after the ceiling", func() (int64, int64) { return counter.readyPods.Load(), int64(pods) })
		waitBudgetsSettled(b, clientset, ns, apps, 10*time.Minute)
		ceilingStep := time.Since(stepStart)

		// `sluice top` on this sandbox, before the controller runs: a change
		// at a time, so each one's way to the screen is timed alone.
		waitCalm(b, time.Minute)
		tops := measureTop(ctx, b, sb.RESTConfig(), clientset, spreadNodes(w.names(), topChanges))

		c := startControllerProcess(b, bin, sb.Kubeconfig(), "--providers", "kwok", "--profiling")
		c.waitQueuesEmpty(b, 5*time.Minute)
		idle := c.idle(b, 10*time.Second, idleWindow)
		waitCalm(b, 2*time.Minute)

		a, err := audit.Start(ctx, sb.RESTConfig(), func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "auditor: "+format+"\n", args...)
		})
		if err != nil {
			b.Fatal(err)
		}
		moving := podsOn(b, clientset, ns, w.start())
		evictedBefore := evictionsByCode(b, clientset)["201"]
		reqBefore := c.requests(b)
		passSum, passCount := reconcileTime(b, c, "nodepool")
		latBefore := apiserverLatency(b, clientset)
		loadDrift := loadavg()
		profiled := func() {}
		if dir := os.Getenv(envDriftProfile); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatalf("%s=%s: %v", envDriftProfile, dir, err)
			}
			profiled = profileController(b, c, dir, "drift-cpu.pprof", 2*time.Minute)
			go sampleGoroutines(ctx, c, dir, 10*time.Second)
		}
		start := time.Now()
		patch := []byte(`{"spec":{"template":{"image":"img-2"}}}`)
		if err := kube.Patch(ctx, pool, client.RawPatch(types.MergePatchType, patch)); err != nil {
			b.Fatal(err)
		}
		finished := true
		deadline := start.Add(30 * time.Minute)
		for !w.rolledTo(onImage("img-2"), nodes) {
			c.mustRun(b, "during the drift")
			if time.Now().After(deadline) {
				finished = false
				fmt.Fprintf(os.Stderr, "the drift was not over after 30m\ncontroller log:\n%s\n", c.out.tail(40))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		wall := time.Since(start)
		loadEnd := loadavg()
		profiled()
		reqs := c.requests(b).minus(reqBefore)
		passSum2, passCount2 := reconcileTime(b, c, "nodepool")
		lat := apiserverLatency(b, clientset).minus(latBefore)
		evicted := evictionsByCode(b, clientset)["201"] - evictedBefore
		sum := a.Finish()

		rounds := int(math.Ceil(float64(nodes) / float64(budget)))
		byRounds := time.Duration(rounds) * (boot + slowestExit)
		byCeiling := time.Duration(math.Inf(1))
		if ceil.rate > 0 {
			byCeiling = time.Duration(float64(moving) / ceil.rate * float64(time.Second))
		}
		lower := max(byRounds, byCeiling)
		ratio := wall.Seconds() / lower.Seconds()
		if !finished {
			ratio = math.Inf(1)
		}
		slots := w.slotToMark(budget)
		p50, p99 := "none", "none"
		if len(slots) > 0 {
			p50 = nearestRank(slots, 0.5).Round(time.Millisecond).String()
			p99 = nearestRank(slots, 0.99).Round(time.Millisecond).String()
		}
		wallShown := wall.Round(100 * time.Millisecond).String()
		if !finished {
			wallShown = "not over after " + wallShown
		}
		size := fmt.Sprintf("%d nodes", nodes)
		if nodes != 1000 {
			size += fmt.Sprintf(" (%s; the issue asks for 1,000)", envDriftNodes)
		}
		setup := fmt.Sprintf("%s (sandbox %s + nodes Ready %s + pods Ready %s + ceiling and settling %s)", time.Since(begin).Round(time.Second)-wall.Round(time.Second),
			sb.StartupDuration().Round(time.Second), nodesReady.Round(time.Second), podsReady.Round(time.Second), ceilingStep.Round(time.Second))
		printTable(fmt.Sprintf("# Drift at scale on the sandbox: a pool of %s, budget %d%% (%d nodes), boot %s, pods exit %s, %d pods in %d Deployments (PDB maxUnavailable 25%%), `sluice controller` as its own process; one rollout (load at start %s)",
			size, budgetPct, budget, boot, slowestExit, pods, apps, loadStart), [][]string{
			{"figure", "sluice", "target"},
			{"wall time, edit -> every node on the new image and Ready", wallShown, ""},
			{"lower bound", fmt.Sprintf("%s = max(%d rounds × (%s + %s) = %s, %d pods to move / %.0f deletions/s = %s)", lower.Round(100*time.Millisecond),
				rounds, boot, slowestExit, byRounds, moving, ceil.rate, byCeiling.Round(100*time.Millisecond)), ""},
			{"ratio to the lower bound", fmt.Sprintf("%.2fx", ratio), sc.want(driftScaleRatio)},
			{"  the sandbox's ceiling (bare client, evictions only)", fmt.Sprintf("%.0f pod deletions/s (%d evictions, %d refused, on %d nodes holding %d pods; load %s)",
				ceil.rate, ceil.evicted, ceil.refused, ceil.nodes, ceil.pods, ceil.load), ""},
			{"old nodes out of service at once, most", strconv.Itoa(w.mostOut()), fmt.Sprintf("%s (the budget)", sc.want(driftScaleOut))},
			{"slot freed (old Node gone) -> next old node marked, p50 / p99", fmt.Sprintf("%s / %s (%d slots)", p50, p99, len(slots)), "p99 " + sc.want(driftScaleSlot)},
			{"evictions (API server's count, 201)", fmt.Sprintf("%.0f", evicted), ""},
			{"controller API requests during the drift", fmt.Sprintf("%.0f (%.0f reads, %.0f writes), %.1f per node", reqs.total(), reqs.reads(), reqs.writes(), reqs.total()/float64(nodes)), ""},
			{"  the pool's passes during the drift (what one slot waits for)", fmt.Sprintf("%.0f passes, %.2fs each on average", passCount2-passCount, (passSum2-passSum)/max(passCount2-passCount, 1)), ""},
			{"  the API server's mean latency during the drift", lat.String(), ""},
			{"controller API writes, idle minute before", fmt.Sprintf("%.0f", idle.requests.writes()), sc.want(driftScaleIdleWrites)},
			{"controller API reads, idle minute before", fmt.Sprintf("%.2f/s", idle.requests.reads()/idle.window.Seconds()), sc.want(driftScaleIdleReads)},
			{"controller RSS idle / at the end", fmt.Sprintf("%d MiB / %d MiB", idle.mem.RSS>>20, c.memory(b).RSS>>20), ""},
			{"auditor: promises broken", fmt.Sprintf("%d (%s)", sum.Violations(), auditChecked(sum)), sc.want(driftScaleAudit)},
			{"controller start -> caches synced", c.synced.Round(100 * time.Millisecond).String(), ""},
			{"setup", setup, ""},
			{"machine load (1, 5, 15 min) at the edit / at the end", loadDrift + " / " + loadEnd, ""},
		})
		printTop(sc, tops, nodes, pods)
		slowestSlots(w, budget, 8, start, c)
		if sum.Violations() > 0 || os.Getenv("SLUICE_BENCH_AUDIT") != "" {
			fmt.Printf("\nauditor:\n%s\n", sum)
		}
		c.stop()
		sc.add(driftScaleRatio, ratio)
		sc.add(driftScaleOut, float64(w.mostOut()))
		if len(slots) > 0 {
			sc.add(driftScaleSlot, nearestRank(slots, 0.99).Seconds())
		}
		sc.add(driftScaleIdleWrites, idle.requests.writes())
		sc.add(driftScaleIdleReads, idle.requests.reads()/idle.window.Seconds())
		sc.add(driftScaleAudit, float64(sum.Violations()))
	}
	sc.judge()
}

// latencies are the API server's own request durations (sum and count of
// apiserver_request_duration_seconds) for the requests a pool pass and a
// drain make, by "VERB resource[/subresource]".
type latencies map[string][2]float64

var latencyKinds = []string{"PATCH nodes", "DELETE nodes", "GET nodes", "POST pods/eviction"}

func apiserverLatency(b *testing.B, clientset kubernetes.Interface) latencies {
	b.Helper()
	raw, err := clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	out := latencies{}
	for _, line := range strings.Split(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok || (name != "apiserver_request_duration_seconds_sum" && name != "apiserver_request_duration_seconds_count") {
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
		var verb, resource, sub string
		for _, m := range promLabel.FindAllStringSubmatch(labels, -1) {
			switch m[1] {
			case "verb":
				verb = m[2]
			case "resource":
				resource = m[2]
			case "subresource":
				sub = m[2]
			}
		}
		key := verb + " " + resource
		if sub != "" {
			key += "/" + sub
		}
		if !slices.Contains(latencyKinds, key) {
			continue
		}
		e := out[key]
		if strings.HasSuffix(name, "_sum") {
			e[0] += v
		} else {
			e[1] += v
		}
		out[key] = e
	}
	return out
}

func (l latencies) minus(o latencies) latencies {
	d := latencies{}
	for k, v := range l {
		d[k] = [2]float64{v[0] - o[k][0], v[1] - o[k][1]}
	}
	return d
}

func (l latencies) String() string {
	var parts []string
	for _, k := range latencyKinds {
		if e := l[k]; e[1] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f ms (%.0f)", k, 1000*e[0]/e[1], e[1]))
		}
	}
	return strings.Join(parts, ", ")
}

// auditChecked says how many acts each invariant the drift exercises was
// checked on.
func auditChecked(s audit.Summary) string {
	var out []string
	for _, inv := range []audit.Invariant{audit.Budget, audit.PDBFloor, audit.OneReplacement, audit.MachineAfterPods} {
		r := s.Row(inv)
		out = append(out, fmt.Sprintf("%s checked %d", inv, r.Checked))
	}
	return fmt.Sprint(out)
}

// podsOn counts the pods of ns on the given nodes, not being deleted: the
// pods a rollout of those nodes moves.
func podsOn(b *testing.B, clientset kubernetes.Interface, ns string, nodes map[string]bool) int {
	b.Helper()
	list, err := clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && nodes[p.Spec.NodeName] {
			n++
		}
	}
	return n
}

// spreadNodes picks n of names, spread over them in sorted order.
func spreadNodes(names []string, n int) []string {
	slices.Sort(names)
	n = min(n, len(names))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, names[i*len(names)/n])
	}
	return out
}

// rolloutWatch follows a pool's nodes from one watch: which were there when
// the rollout started (old), when each old one was chosen (chosen: for
// sluice, its disruption record) and when its Node went, and the most old
// nodes out of service at once (chosen, cordoned or being deleted).
type rolloutWatch struct {
	chosen   func(*corev1.Node) bool
	mu       sync.Mutex
	store    cache.Store
	started  bool
	old      map[string]bool
	markedAt map[string]time.Time
	goneAt   map[string]time.Time
	out      map[string]bool
	maxOut   int
}

func watchRollout(ctx context.Context, b *testing.B, clientset kubernetes.Interface, pool string, chosen func(*corev1.Node) bool) *rolloutWatch {
	b.Helper()
	w := &rolloutWatch{chosen: chosen, old: map[string]bool{}, markedAt: map[string]time.Time{}, goneAt: map[string]time.Time{}, out: map[string]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = "bench.sluice.dev/pool=" + pool
	}))
	inf := factory.Core().V1().Nodes().Informer()
	w.store = inf.GetStore()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj, false) },
		UpdateFunc: func(_, obj any) { w.observe(obj, false) },
		DeleteFunc: func(obj any) { w.observe(obj, true) },
	}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w
}

func (w *rolloutWatch) observe(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || !w.old[n.Name] {
		return
	}
	if deleted {
		if _, seen := w.goneAt[n.Name]; !seen {
			w.goneAt[n.Name] = now
		}
		delete(w.out, n.Name)
		return
	}
	marked := w.chosen(n)
	if _, seen := w.markedAt[n.Name]; marked && !seen {
		w.markedAt[n.Name] = now
	}
	if marked || n.Spec.Unschedulable || n.DeletionTimestamp != nil {
		w.out[n.Name] = true
		w.maxOut = max(w.maxOut, len(w.out))
	}
}

// start takes the nodes there now as the old ones, and returns them.
func (w *rolloutWatch) start() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, obj := range w.store.List() {
		w.old[obj.(*corev1.Node).Name] = true
	}
	w.started = true
	return maps.Clone(w.old)
}

func (w *rolloutWatch) names() []string {
	var out []string
	for _, obj := range w.store.List() {
		out = append(out, obj.(*corev1.Node).Name)
	}
	return out
}

// readyUntainted counts the pool's nodes that are Ready without the
// not-ready taint.
func (w *rolloutWatch) readyUntainted() int {
	ready := 0
	for _, obj := range w.store.List() {
		n := obj.(*corev1.Node)
		if nodeReady(n) && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) {
			ready++
		}
	}
	return ready
}

// markedBySluice says whether sluice chose the node: its disruption record.
func markedBySluice(n *corev1.Node) bool {
	_, marked := n.Annotations[contract.AnnotationDisruption]
	return marked
}

// onImage says whether sluice's provider made the node on image.
func onImage(image string) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool { return n.Annotations[contract.AnnotationImage] == image }
}

// rolledTo says whether the pool is nodes nodes, every one new, Ready and
// fresh.
func (w *rolloutWatch) rolledTo(fresh func(*corev1.Node) bool, nodes int) bool {
	all := w.store.List()
	if len(all) != nodes {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, obj := range all {
		n := obj.(*corev1.Node)
		if w.old[n.Name] || !fresh(n) || !nodeReady(n) {
			return false
		}
	}
	return true
}

func (w *rolloutWatch) mostOut() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxOut
}

// slotToMark pairs the k-th old Node to go with the (budget+k)-th old node
// marked, and returns the time between them, sorted (see
// BenchmarkDriftAtScale).
func (w *rolloutWatch) slotToMark(budget int) []time.Duration {
	var out []time.Duration
	for _, s := range w.slotPairs(budget) {
		out = append(out, s.wait)
	}
	slices.Sort(out)
	return out
}

// slot is one freed slot and the mark that took it.
type slot struct {
	gone, marked     string
	goneAt, markedAt time.Time
	wait             time.Duration
}

// slotPairs are the slots slotToMark measures, slowest first.
func (w *rolloutWatch) slotPairs(budget int) []slot {
	w.mu.Lock()
	defer w.mu.Unlock()
	type at struct {
		node string
		t    time.Time
	}
	var marks, gone []at
	for n, t := range w.markedAt {
		marks = append(marks, at{n, t})
	}
	for n, t := range w.goneAt {
		gone = append(gone, at{n, t})
	}
	byTime := func(a, b at) int { return a.t.Compare(b.t) }
	slices.SortFunc(marks, byTime)
	slices.SortFunc(gone, byTime)
	var out []slot
	for k := 0; budget+k < len(marks) && k < len(gone); k++ {
		m := marks[budget+k]
		out = append(out, slot{gone: gone[k].node, goneAt: gone[k].t, marked: m.node, markedAt: m.t, wait: m.t.Sub(gone[k].t)})
	}
	slices.SortFunc(out, func(a, b slot) int { return cmp.Compare(b.wait, a.wait) })
	return out
}

// slowestSlots prints the n slowest slots, times from start, and saves the
// controller's log to a file for reading them beside it.
func slowestSlots(w *rolloutWatch, budget, n int, start time.Time, c *controllerProcess) {
	pairs := w.slotPairs(budget)
	fmt.Printf("\nslowest slots (times from the edit; UTC wall clock in brackets):\n")
	for _, s := range pairs[:min(n, len(pairs))] {
		fmt.Printf("  %s gone at +%.3fs [%s] -> %s marked at +%.3fs [%s]: %s\n", s.gone, s.goneAt.Sub(start).Seconds(), s.goneAt.UTC().Format("15:04:05.000"),
			s.marked, s.markedAt.Sub(start).Seconds(), s.markedAt.UTC().Format("15:04:05.000"), s.wait.Round(time.Millisecond))
	}
	if c == nil {
		return
	}
	f, err := os.CreateTemp("", "sluice-drift-controller-*.log")
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(c.out.String())
	fmt.Printf("the controller's log: %s\n", f.Name())
}
