package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
)

// Sizes of the cluster both benchmarks below build; the environment
// overrides them for a quick run.
const (
	envNodes      = "SLUICE_BENCH_NODES"   // nodes in the cluster (default 1,000)
	envPreempt    = "SLUICE_BENCH_PREEMPT" // nodes preempted at once (default 100, or a tenth of the nodes when fewer than 1,000)
	podsPerNode   = 30
	replicas      = 100
	preemptNotice = 30 * time.Second
)

// BenchmarkControllerAtScale runs `sluice controller` as its own process
// (chart defaults: 64 workers, a 200 QPS client, no leader election)
// against N nodes and 30 pods a node, and measures what it costs at rest
// and how quickly it still reacts. Once its caches have synced and its queue
// is empty it is left alone for 60 s: its API requests come from its own
// client-go metrics (rest_client_requests_total, the delta over the minute),
// its memory from /proc. Then three nodes, each with an Azure metadata
// emulator and an in-process agent, are given a Preempt with 30 s of notice
// one at a time, and the benchmark's node watch times the agent's report
// landing on the Node against the node's cordon. Requests, memory and the
// median cordon are judged against their targets (targets_bench_test.go).
func BenchmarkControllerAtScale(b *testing.B) {
	const (
		probes     = 3
		idleWindow = time.Minute
		settle     = 10 * time.Second
	)
	sc := newScorecard(b)
	for range b.N {
		loadStart := loadavg()
		bin := buildSluiceBinary(b)
		n := envInt(b, envNodes, 1000)
		if n < probes {
			b.Fatalf("%s=%d: want at least %d nodes", envNodes, n, probes)
		}
		cl := newScaleCluster(b, n, probes)
		c := startControllerProcess(b, bin, cl.sb.Kubeconfig())
		c.waitQueueEmpty(b)
		idle := c.idle(b, settle, idleWindow)

		watch := watchDrains(b, cl.client, cl.ns, cl.targets)
		var cordon, total, drained, recorded []time.Duration
		for i, t := range cl.targets {
			id := fmt.Sprintf("preempt-probe-%d", i)
			done := cl.h.marks.expect(t.node, id)
			ev, deadline := preempt(id, t.vm, time.Now().Add(preemptNotice))
			appeared := t.emu.inject(ev)
			select {
			case <-done:
			case <-time.After(preemptNotice):
				b.Fatalf("node %s not cordoned %s after Preempt %s appeared\ncontroller log:\n%s", t.node, preemptNotice, id, c.out.tail(40))
			}
			r := cl.h.marks.reaction(t.node, appeared, t.emu.firstPoll())
			cordon = append(cordon, r.record+r.cordon)
			total = append(total, r.total)
			// One node at a time: the next probe starts once this drain is
			// over (or its deadline has passed), so each figure is one node's.
			reported, _ := cl.h.marks.times(t.node)
			if emptied, ok := watch.waitEmpty(c, t.node, deadline.Add(5*time.Second)); ok {
				drained = append(drained, emptied.Sub(reported))
			}
			if rec, _ := cl.h.marks.recordOf(t.node); !rec.IsZero() {
				recorded = append(recorded, rec.Sub(reported))
			}
		}
		watch.stop()
		end := c.memory(b)
		c.stop()

		reportAtScale(b, sc, cl, c, idle, end, reactions{cordon: cordon, total: total, drained: drained, recorded: recorded}, loadStart, loadavg())
	}
	sc.judge()
}

// BenchmarkMassSpotEvent preempts many spot nodes at once: on the same
// cluster shape, 100 nodes (SLUICE_BENCH_PREEMPT) each with an emulator and
// an agent get a Preempt with 30 s of notice, all within 2 s, while
// `sluice controller` runs as its own process. The pods have a 10 s grace
// period and stop 3 s after being asked; the other nodes have room for every
// replacement. From outside the controller it times each node's cordon and
// drain against its agent's report, follows every pod off the preempted nodes
// (evicted, DeadlineForced, or still there at the deadline), and watches
// every PodDisruptionBudget for a moment below what it must keep. Its
// figures are judged against their targets (targets_bench_test.go), the
// bare client's beside them.
func BenchmarkMassSpotEvent(b *testing.B) {
	const spread = 2 * time.Second
	sc := newScorecard(b)
	for range b.N {
		bin := buildSluiceBinary(b)
		n := envInt(b, envNodes, 1000)
		p := envInt(b, envPreempt, min(100, max(n/10, 1)))
		// Each node holds 30 pods and may take 110: the replacements of the
		// pods of the nodes the bare client empties, then of the preempted
		// ones, need the rest to stay under that.
		if 2*p > n*7/10 {
			b.Fatalf("%s=%d of %s=%d: the other nodes would have no room for the replacements; preempt at most %d", envPreempt, p, envNodes, n, n*7/20)
		}
		cl := newScaleCluster(b, n, p)
		// First the sandbox's ceiling, on other nodes: a bare client empties
		// as many as fast as the API server lets it. Then the cluster settles
		// again (every replacement Ready) before sluice's turn.
		waitCalm(b, 5*time.Minute)
		ceil := measureCeiling(b, cl, ceilingNodes(b, cl, p))
		waitBudgetsSettled(b, cl.client, cl.ns, cl.budgets, 10*time.Minute)
		c := startControllerProcess(b, bin, cl.sb.Kubeconfig(), "--profiling")
		c.waitQueueEmpty(b)
		// The event is measured on a cluster at rest, not on the backlog of
		// building it (kwok still starting pods minutes late).
		waitCalm(b, 5*time.Minute)
		loadStart := loadavg()
		watch := watchDrains(b, cl.client, cl.ns, cl.targets)

		deadlines := make([]time.Time, len(cl.targets))
		for i, t := range cl.targets {
			cl.h.marks.expect(t.node, preemptID(i))
		}
		reqBefore, inBefore := c.requests(b), c.insideBefore(b)
		begin := time.Now()
		var wg sync.WaitGroup
		for i, t := range cl.targets {
			wg.Add(1)
			time.AfterFunc(spread*time.Duration(i)/time.Duration(len(cl.targets)), func() {
				defer wg.Done()
				ev, deadline := preempt(preemptID(i), t.vm, time.Now().Add(preemptNotice))
				deadlines[i] = deadline
				t.emu.inject(ev)
			})
		}
		wg.Wait()
		injected := time.Since(begin)

		// The event's span: nothing sluice does after the last deadline
		// changes the outcome; 5 s more lets budgets' status and Events land.
		end := slices.MaxFunc(deadlines, time.Time.Compare).Add(5 * time.Second)
		peak, rss := c.observe(b, end)
		reqAfter, window := c.requests(b), time.Since(begin)
		mem := c.memory(b)
		in := c.insideAfter(b, inBefore, rss)
		c.stop()
		watch.stop()

		reportMassSpot(b, sc, massSpot{
			cluster: cl, watch: watch, deadlines: deadlines, injected: injected, spread: spread,
			requests: reqAfter.total() - reqBefore.total(), window: window, peakRate: peak, mem: mem,
			controller: c, loadStart: loadStart, loadEnd: loadavg(), ceiling: ceil, inside: in,
		})
	}
	sc.judge()
}

// scaleCluster is the cluster both benchmarks build: n AKS nodes in pools of
// 100, some of them with an emulator and an in-process agent, and 30 pods a
// node from Deployments of 100 replicas placed by the scheduler, each with a
// budget of maxUnavailable 10%. The pods stop 3 s after being asked, within
// a 10 s grace period.
type scaleCluster struct {
	sb      *sandbox.Sandbox
	client  kubernetes.Interface
	h       *harness
	ns      string
	targets []*target // the nodes with an agent, spread over the pools
	nodes   int
	pods    int
	budgets int // one per Deployment

	nodesReady, podsReady, budgetsSettled time.Duration
	setup                                 time.Duration // from the sandbox's start to every budget settled
}

func newScaleCluster(b *testing.B, nodes, agents int) *scaleCluster {
	b.Helper()
	const pool = 100
	start := time.Now()
	sb, client, _ := startSandbox(b)
	h := newHarness(b, client)
	b.Cleanup(h.stop)
	cl := &scaleCluster{sb: sb, client: client, h: h, ns: "scale", nodes: nodes}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the ready counter's watches are needed only here
	counter := newReadyCounter(ctx, client)

	stepStart := time.Now()
	var plain []runtime.Object
	stride := max(nodes/agents, 1)
	i := 0
	for p := 0; p*pool < nodes; p++ {
		for _, n := range fixture.AKSPool(fmt.Sprintf("scale%02d", p), min(pool, nodes-p*pool)).Nodes() {
			if i%stride == 0 && len(cl.targets) < agents {
				cl.targets = append(cl.targets, h.addNode(b, sb, n, true))
			} else {
				plain = append(plain, n)
			}
			i++
		}
	}
	createParallel(ctx, b, client, plain, 16)
	waitFor(b, sb, 10*time.Minute, "nodes Ready", func() (int64, int64) { return counter.readyNodes.Load(), int64(nodes) })
	cl.nodesReady = time.Since(stepStart)

	stepStart = time.Now()
	if err := fixture.Create(ctx, client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cl.ns}}); err != nil {
		b.Fatal(err)
	}
	waitUntil(b, 2*time.Minute, "the default ServiceAccount in "+cl.ns, func() bool {
		_, err := client.CoreV1().ServiceAccounts(cl.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	deployments := max((nodes*podsPerNode+replicas-1)/replicas, 1)
	var workloads []runtime.Object
	for d := range deployments {
		name := fmt.Sprintf("app%03d", d)
		workloads = append(workloads,
			fixture.Deployment(cl.ns, name, replicas, fixture.Requests("10m", "16Mi"), fixture.GracePeriod(10), fixture.ExitsAfter(3)),
			fixture.PDB(cl.ns, name, name, fixture.MaxUnavailable("10%")))
	}
	createParallel(ctx, b, client, workloads, 8)
	cl.pods = deployments * replicas
	waitFor(b, sb, 30*time.Minute, "pods Running and Ready", func() (int64, int64) { return counter.readyPods.Load(), int64(cl.pods) })
	cl.podsReady = time.Since(stepStart)

	stepStart = time.Now()
	cl.budgets = deployments
	waitBudgetsSettled(b, client, cl.ns, deployments, 5*time.Minute)
	waitUntil(b, time.Minute, "every agent's first report", func() bool {
		return !slices.ContainsFunc(cl.targets, func(t *target) bool { return !h.marks.hasReport(t.node) })
	})
	cl.budgetsSettled = time.Since(stepStart)
	cl.setup = time.Since(start)
	return cl
}

func preemptID(i int) string { return fmt.Sprintf("preempt-%03d", i) }

// preempt is the notice Azure gives a spot VM. NotBefore carries whole
// seconds, so the deadline returned is the one the agent reads.
func preempt(id, vm string, notBefore time.Time) (azure.RawEvent, time.Time) {
	deadline := notBefore.UTC().Truncate(time.Second)
	return azure.RawEvent{EventID: id, EventType: string(maintenance.TypePreempt), ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: string(maintenance.StatusScheduled), NotBefore: azure.FormatNotBefore(deadline),
		Description: "Virtual machine is being preempted.", EventSource: "Platform", DurationInSeconds: -1}, deadline
}

// times reads when the report of the event expected on node landed and when
// the node was seen cordoned (zero: not yet).
func (m *nodeMarks) times(node string) (reported, cordoned time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk := m.nodes[node]
	return mk.reported, mk.cordoned
}

// recordOf returns when the controller's record of the event appeared on the
// node (zero: never seen) and whether the agent had cordoned it first.
func (m *nodeMarks) recordOf(node string) (recorded time.Time, byAgent bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk := m.nodes[node]
	return mk.recorded, mk.byAgent
}

// controllerProcess is `sluice controller` run from the built binary, with
// its /metrics on a loopback port.
type controllerProcess struct {
	cmd     *exec.Cmd
	metrics string
	out     *lockedBuffer
	exited  chan struct{}
	waitErr error
	stop    func()
	// synced is the time from start to its workers starting, which
	// controller-runtime does once the caches have synced.
	synced time.Duration
	// startup is the API requests it sent until then.
	startup requestCounts
}

func startControllerProcess(b *testing.B, bin, kubeconfig string, extra ...string) *controllerProcess {
	b.Helper()
	addr := freeLoopbackAddress(b)
	c := &controllerProcess{metrics: "http://" + addr + "/metrics", out: &lockedBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(bin, append([]string{"controller", "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metrics-bind-address", addr, "--health-probe-bind-address", "0", "--identity", "bench", "--log-format", "json"}, extra...)...)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	start := time.Now()
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { c.waitErr = c.cmd.Wait(); close(c.exited) }()
	c.stop = sync.OnceFunc(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(15 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
	b.Cleanup(c.stop)

	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(c.out.String(), "Starting workers") {
		c.mustRun(b, "before its caches synced")
		if time.Now().After(deadline) {
			b.Fatalf("sluice controller did not start its workers within 5m\n%s", c.out.tail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.synced = time.Since(start)
	c.startup = c.requests(b)
	return c
}

// mustRun fails the benchmark, with the log's tail, if the process is gone.
func (c *controllerProcess) mustRun(b *testing.B, when string) {
	b.Helper()
	select {
	case <-c.exited:
		b.Fatalf("sluice controller exited %s: %v\n%s", when, c.waitErr, c.out.tail(40))
	default:
	}
}

// waitQueueEmpty waits for the nodes queued at start (those with a
// maintenance report) to be reconciled.
func (c *controllerProcess) waitQueueEmpty(b *testing.B) {
	b.Helper()
	c.waitQueuesEmpty(b, 2*time.Minute)
}

// waitQueuesEmpty waits up to timeout for every work queue to empty.
func (c *controllerProcess) waitQueuesEmpty(b *testing.B, timeout time.Duration) {
	b.Helper()
	waitUntil(b, timeout, "the controller's work queues to empty", func() bool {
		c.mustRun(b, "while its queue emptied")
		depth, err := scrape(c.metrics, "workqueue_depth", "name")
		if err != nil {
			return false
		}
		for _, v := range depth {
			if v > 0 {
				return false
			}
		}
		return true
	})
}

// idleFigures are what the controller cost over a window with nothing to do.
type idleFigures struct {
	window     time.Duration
	requests   requestCounts
	cpuSeconds float64
	mem        sandbox.Memory
}

// idle lets the controller settle, then measures it over window, in which
// nothing happens in the cluster but the kwok heartbeats and the agents'
// polls (which write nothing while their report is unchanged).
func (c *controllerProcess) idle(b *testing.B, settle, window time.Duration) idleFigures {
	b.Helper()
	time.Sleep(settle)
	before, cpuBefore := c.requests(b), c.cpu(b)
	time.Sleep(window)
	c.mustRun(b, "while idle")
	after, cpuAfter := c.requests(b), c.cpu(b)
	return idleFigures{window: window, requests: after.minus(before), cpuSeconds: cpuAfter - cpuBefore, mem: c.memory(b)}
}

// observe follows the controller until end, sampling its requests each
// second; it returns the highest rate seen in one second, and its resident
// memory every 5 s.
func (c *controllerProcess) observe(b *testing.B, end time.Time) (peak float64, rss []string) {
	b.Helper()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start := time.Now()
	prev, prevAt := c.requests(b).total(), start
	for i := 1; time.Now().Before(end); i++ {
		<-tick.C
		c.mustRun(b, "during the event")
		cur, now := c.requests(b).total(), time.Now()
		peak = max(peak, (cur-prev)/now.Sub(prevAt).Seconds())
		prev, prevAt = cur, now
		if i%5 == 0 {
			rss = append(rss, fmt.Sprintf("+%.0fs %d MiB", now.Sub(start).Seconds(), c.memory(b).RSS>>20))
		}
	}
	return peak, rss
}

// requestCounts are the controller's API requests so far by HTTP method,
// from client-go's metric as controller-runtime serves it.
type requestCounts map[string]float64

func (c *controllerProcess) requests(b *testing.B) requestCounts {
	b.Helper()
	m, err := scrape(c.metrics, "rest_client_requests_total", "method")
	if err != nil {
		b.Fatalf("reading the controller's metrics: %v", err)
	}
	return m
}

func (r requestCounts) minus(o requestCounts) requestCounts {
	d := requestCounts{}
	for k, v := range r {
		d[k] = v - o[k]
	}
	return d
}

// reads are GETs: gets, lists and the opening of watches.
func (r requestCounts) reads() float64 { return r[http.MethodGet] + r[http.MethodHead] }

func (r requestCounts) writes() float64 { return r.total() - r.reads() }

func (r requestCounts) total() float64 {
	var t float64
	for _, v := range r {
		t += v
	}
	return t
}

func (c *controllerProcess) memory(b *testing.B) sandbox.Memory {
	b.Helper()
	m, err := sandbox.ResidentMemory(c.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// cpu reads the process's user and system time, in seconds, from /proc.
func (c *controllerProcess) cpu(b *testing.B) float64 {
	b.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		b.Fatalf("reading CPU time: short /proc stat %q", data)
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux
}

var promLabel = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// scrape reads one metric family from a Prometheus text endpoint and sums
// its samples by one label.
func scrape(url, family, by string) (map[string]float64, error) {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, _ := strings.Cut(line, "{")
		if name != family {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok || len(strings.Fields(value)) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("scraping %s: %q: %w", url, line, err)
		}
		key := ""
		for _, m := range promLabel.FindAllStringSubmatch(labels, -1) {
			if m[1] == by {
				key = m[2]
			}
		}
		out[key] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	return out, nil
}

func freeLoopbackAddress(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// lockedBuffer is a process's output, written by exec's copier while the
// benchmark reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

var _ io.Writer = (*lockedBuffer)(nil)

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *lockedBuffer) tail(lines int) string {
	all := strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
	return strings.Join(all[max(len(all)-lines, 0):], "\n")
}

// drainWatch follows, from outside the controller, what happens once nodes
// are told to go: each pod's way off them (asked to leave, by the eviction
// API or not, gone), when each node is first left with no pod but
// DaemonSets', the DeadlineForced Events, and every PodDisruptionBudget seen
// below what it must keep.
type drainWatch struct {
	mu       sync.Mutex
	nodes    map[string]*nodePods
	pods     map[types.UID]*podFate
	forced   map[string]bool      // pods named by a DeadlineForced Event
	violated map[string]time.Time // budget -> first seen with currentHealthy < desiredHealthy
	// The sandbox's pace: pods created after the watch started (the
	// replacements) and when each was first seen Ready.
	since      time.Time
	replaced   map[types.UID]time.Time
	readyAfter map[types.UID]time.Time

	stop func()
}

type nodePods struct {
	on      map[types.UID]bool
	initial int
	emptied time.Time
}

type podFate struct {
	name, app, node string
	asked, gone     time.Time
	evicted         bool // the API server marked it DisruptionTarget by the eviction API
}

// reasonEvictionByEvictionAPI is the reason the API server gives the
// DisruptionTarget condition of a pod it deletes for an eviction.
const reasonEvictionByEvictionAPI = "EvictionByEvictionAPI"

func watchDrains(b *testing.B, client kubernetes.Interface, ns string, targets []*target) *drainWatch {
	b.Helper()
	w := &drainWatch{nodes: map[string]*nodePods{}, pods: map[types.UID]*podFate{}, forced: map[string]bool{}, violated: map[string]time.Time{},
		replaced: map[types.UID]time.Time{}, readyAfter: map[types.UID]time.Time{}}
	for _, t := range targets {
		w.nodes[t.node] = &nodePods{on: map[types.UID]bool{}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns), informers.WithTransform(slimPod))
	events := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("reason", "DeadlineForced").String()
		}))
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{factory.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.observePod(obj, false) },
			UpdateFunc: func(_, obj any) { w.observePod(obj, false) },
			DeleteFunc: func(obj any) { w.observePod(obj, true) },
		}},
		{factory.Policy().V1().PodDisruptionBudgets().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    w.observeBudget,
			UpdateFunc: func(_, obj any) { w.observeBudget(obj) },
		}},
		{events.Core().V1().Events().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    w.observeEvent,
			UpdateFunc: func(_, obj any) { w.observeEvent(obj) },
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			b.Fatal(err)
		}
	}
	factory.Start(ctx.Done())
	events.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	events.WaitForCacheSync(ctx.Done())
	w.mu.Lock()
	synced := time.Now()
	w.since = synced
	for _, np := range w.nodes {
		np.initial = len(np.on)
		if np.initial == 0 {
			np.emptied = synced
		}
	}
	w.mu.Unlock()
	w.stop = sync.OnceFunc(func() { cancel(); factory.Shutdown(); events.Shutdown() })
	b.Cleanup(w.stop)
	return w
}

// slimPod keeps of a pod only what drainWatch reads, as 30,000 of them are
// held in the benchmark's own process.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: map[string]string{fixture.LabelApp: p.Labels[fixture.LabelApp]}, OwnerReferences: p.OwnerReferences,
			DeletionTimestamp: p.DeletionTimestamp, CreationTimestamp: p.CreationTimestamp},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase, Conditions: p.Status.Conditions},
	}, nil
}

func (w *drainWatch) observePod(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" }) {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.since.IsZero() && p.CreationTimestamp.After(w.since) && !deleted {
		if _, seen := w.replaced[p.UID]; !seen {
			w.replaced[p.UID] = now
		}
		if _, seen := w.readyAfter[p.UID]; !seen && podReady(p) {
			w.readyAfter[p.UID] = now
		}
	}
	np := w.nodes[p.Spec.NodeName]
	if np == nil {
		return
	}
	f := w.pods[p.UID]
	if f == nil {
		if deleted {
			return
		}
		f = &podFate{name: p.Name, app: p.Labels[fixture.LabelApp], node: p.Spec.NodeName}
		w.pods[p.UID] = f
		np.on[p.UID] = true
	}
	if p.DeletionTimestamp != nil && f.asked.IsZero() {
		f.asked = now
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == reasonEvictionByEvictionAPI {
			f.evicted = true
		}
	}
	if deleted {
		f.asked = firstSet(f.asked, now)
		f.gone = now
		delete(np.on, p.UID)
		if len(np.on) == 0 && np.emptied.IsZero() {
			np.emptied = now
		}
	}
}

func podReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

func (w *drainWatch) observeBudget(obj any) {
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok || pdb.Status.ObservedGeneration < pdb.Generation || pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.violated[pdb.Name]; !seen {
		w.violated[pdb.Name] = time.Now()
	}
}

func (w *drainWatch) observeEvent(obj any) {
	ev, ok := obj.(*corev1.Event)
	if !ok || ev.InvolvedObject.Kind != "Pod" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forced[ev.InvolvedObject.Name] = true
}

// waitEmpty waits until node has no pod but DaemonSets' or until is
// reached, failing only if the controller has gone.
func (w *drainWatch) waitEmpty(c *controllerProcess, node string, until time.Time) (time.Time, bool) {
	for time.Now().Before(until) {
		select {
		case <-c.exited:
			return time.Time{}, false
		default:
		}
		w.mu.Lock()
		emptied := w.nodes[node].emptied
		w.mu.Unlock()
		if !emptied.IsZero() {
			return emptied, true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Time{}, false
}

// massSpot is what BenchmarkMassSpotEvent saw.
type massSpot struct {
	cluster    *scaleCluster
	watch      *drainWatch
	controller *controllerProcess
	deadlines  []time.Time
	injected   time.Duration // from the first event to the last
	spread     time.Duration
	requests   float64 // the controller's, from the first event to the end
	window     time.Duration
	peakRate   float64
	mem        sandbox.Memory
	ceiling    ceiling // a bare client on as many other nodes, before
	inside     inside

	loadStart, loadEnd string
}

func reportMassSpot(b *testing.B, sc *scorecard, m massSpot) {
	b.Helper()
	cl, w := m.cluster, m.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	p := len(cl.targets)

	var cordon, drain, record []time.Duration
	cordonedIn2s, drainedInTime, byAgent := 0, 0, 0
	deadlineOf := map[string]time.Time{}
	firstReport, minPods, maxPods, podsOn := time.Time{}, -1, 0, 0
	for i, t := range cl.targets {
		deadlineOf[t.node] = m.deadlines[i]
		reported, cordoned := cl.h.marks.times(t.node)
		if !reported.IsZero() && (firstReport.IsZero() || reported.Before(firstReport)) {
			firstReport = reported
		}
		if !cordoned.IsZero() {
			d := cordoned.Sub(reported)
			cordon = append(cordon, d)
			if d <= 2*time.Second {
				cordonedIn2s++
			}
		}
		recorded, agent := cl.h.marks.recordOf(t.node)
		if agent {
			byAgent++
		}
		if !recorded.IsZero() {
			record = append(record, recorded.Sub(reported))
		}
		np := w.nodes[t.node]
		podsOn += np.initial
		if minPods < 0 || np.initial < minPods {
			minPods = np.initial
		}
		maxPods = max(maxPods, np.initial)
		if !np.emptied.IsZero() {
			drain = append(drain, max(np.emptied.Sub(reported), 0))
			if !np.emptied.After(m.deadlines[i]) {
				drainedInTime++
			}
		}
	}

	graceful, forced, evicted, stayed := 0, 0, 0, 0
	var lastAsk time.Time
	for _, f := range w.pods {
		deadline := deadlineOf[f.node]
		if w.forced[f.name] {
			forced++
		}
		if f.evicted {
			evicted++
			if f.asked.After(lastAsk) {
				lastAsk = f.asked
			}
		}
		if f.gone.IsZero() || f.gone.After(deadline) {
			stayed++
		} else if f.evicted && !w.forced[f.name] {
			graceful++
		}
	}
	evictRate := 0.0
	if evicted > 0 && lastAsk.After(firstReport) {
		evictRate = float64(evicted) / lastAsk.Sub(firstReport).Seconds()
	}
	explained := 0
	for budget := range w.violated {
		for _, f := range w.pods {
			if f.app == budget && w.forced[f.name] {
				explained++
				break
			}
		}
	}
	unexplained := len(w.violated) - explained

	lastDeadline := slices.MaxFunc(m.deadlines, time.Time.Compare)
	slices.Sort(cordon)
	slices.Sort(drain)
	slices.Sort(record)
	pct := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "none"
		}
		return fmt.Sprintf("%s / %s", nearestRank(ds, 0.5).Round(time.Millisecond), nearestRank(ds, 0.99).Round(time.Millisecond))
	}
	of := func(k, n int) string { return fmt.Sprintf("%d/%d", k, n) }
	ceil := m.ceiling
	printTable(fmt.Sprintf("mass spot event: %d of %d nodes get an Azure Preempt with %s of notice within %s (the last %s after the first), %d pods on them (%d to %d a node; grace 10s, stop after 3s), budgets maxUnavailable 10%%, `sluice controller` as its own process; beside it, before it, a bare client empties %d other nodes (%d pods) as fast as the API server lets it, evictions only, for the same %s",
		p, cl.nodes, preemptNotice, m.spread, m.injected.Round(time.Millisecond), podsOn, minPods, maxPods, ceil.nodes, ceil.pods, preemptNotice), append([][]string{
		{"", "sluice", "bare client (the sandbox's ceiling)", "target"},
		{"nodes cordoned within 2s of their agent's report", of(cordonedIn2s, p), "", sc.want(spotCordoned)},
		{"report on the Node -> cordoned, p50 / p99", pct(cordon), "", ""},
		{"  cordoned in the write that reported the event (the agent's)", of(byAgent, p), "", ""},
		{"  report on the Node -> the controller's record (adopts the cordon), p50 / p99", pct(record) + fmt.Sprintf(" (%d recorded)", len(record)), "", ""},
		{"report on the Node -> node empty (drained), p50 / p99", pct(drain) + fmt.Sprintf(" (%d drained)", len(drain)),
			pct(ceil.drained) + fmt.Sprintf(" (%d drained; from its start)", len(ceil.drained)), ""},
		{"nodes drained before their deadline", of(drainedInTime, p), of(ceil.drainedInTime, ceil.nodes), sc.want(spotDrained)},
		{"pods that left gracefully (evicted, gone before the deadline)", of(graceful, podsOn), of(ceil.goneInTime, ceil.pods), sc.want(spotGraceful)},
		{"  deleted despite a budget (DeadlineForced Events)", strconv.Itoa(forced), "0 (never)", ""},
		{"  still on their node at its deadline", strconv.Itoa(stayed), strconv.Itoa(ceil.pods - ceil.goneInTime), ""},
		{"evictions per second", fmt.Sprintf("%.0f/s (%d evictions; first report -> last eviction)", evictRate, evicted),
			fmt.Sprintf("%.0f/s (%d evictions, %d refused or failed; start -> last eviction)", ceil.rate, ceil.evicted, ceil.refused), ""},
		{"  the sandbox's pace: replacements created / Ready by the last deadline", replacementPace(w, firstReport, lastDeadline), ceil.pace, ""},
		{"budgets below desiredHealthy, not explained by DeadlineForced", fmt.Sprintf("%d (%d violated, %d explained)", unexplained, len(w.violated), explained), "", sc.want(spotBudgets)},
		{"controller API requests during the event", fmt.Sprintf("%.0f in %.0fs, peak %.0f/s (client limit 200/s, burst 400)", m.requests, m.window.Seconds(), m.peakRate), "", ""},
		{"controller RSS at the end / peak", fmt.Sprintf("%d MiB / %d MiB", m.mem.RSS>>20, m.mem.Peak>>20), "", sc.want(spotMemory) + " / " + sc.want(spotPeakMemory)},
		{"controller start -> caches synced", m.controller.synced.Round(100 * time.Millisecond).String(), "", ""},
		{"setup: sandbox, nodes Ready, pods Ready, budgets settled", setupLine(cl), "", ""},
		{"machine load (1, 5, 15 min) at start / end", m.loadStart + " / " + m.loadEnd, ceil.load, ""},
	}, m.inside.rows(m.window)...))
	fmt.Printf("\nthe controller's heap in use at the end of the event, largest holders (%s):\n%s\n", m.inside.heapFile, m.inside.heapTop)
	b.ReportMetric(float64(cordonedIn2s), "cordoned-in-2s")
	b.ReportMetric(float64(drainedInTime), "drained-in-time")
	if len(cordon) > 0 {
		b.ReportMetric(nearestRank(cordon, 0.5).Seconds(), "cordon-p50-s")
		b.ReportMetric(nearestRank(cordon, 0.99).Seconds(), "cordon-p99-s")
	}
	if len(drain) > 0 {
		b.ReportMetric(nearestRank(drain, 0.5).Seconds(), "drain-p50-s")
		b.ReportMetric(nearestRank(drain, 0.99).Seconds(), "drain-p99-s")
	}
	b.ReportMetric(100*float64(graceful)/float64(max(podsOn, 1)), "graceful-%")
	b.ReportMetric(evictRate, "evictions/s")
	b.ReportMetric(float64(unexplained), "pdb-violations")
	share := func(k, n int) float64 { return 100 * float64(k) / float64(max(n, 1)) }
	sc.add(spotCordoned, share(cordonedIn2s, p))
	sc.add(spotDrained, share(drainedInTime, p))
	sc.add(spotGraceful, share(graceful, podsOn))
	sc.add(spotBudgets, float64(unexplained))
	sc.add(spotMemory, float64(m.mem.RSS)/(1<<20))
	sc.add(spotPeakMemory, float64(m.mem.Peak)/(1<<20))
}

// replacementPace says how many pods the sandbox created and made Ready
// between the first report and the last deadline: a budget recovers only as
// fast as replacements become Ready, so this bounds how fast any drain can go.
func replacementPace(w *drainWatch, from, until time.Time) string {
	created, ready := 0, 0
	for _, at := range w.replaced {
		if !at.Before(from) && !at.After(until) {
			created++
		}
	}
	for _, at := range w.readyAfter {
		if !at.Before(from) && !at.After(until) {
			ready++
		}
	}
	secs := until.Sub(from).Seconds()
	if secs <= 0 {
		return "none"
	}
	return fmt.Sprintf("%d / %d in %.0fs (%.0f/s Ready)", created, ready, secs, float64(ready)/secs)
}

// reactions are the probes' times, each from the agent's report on the node
// unless named otherwise.
type reactions struct {
	cordon, total, drained []time.Duration
	recorded               []time.Duration // report -> the controller's record
}

func reportAtScale(b *testing.B, sc *scorecard, cl *scaleCluster, c *controllerProcess, idle idleFigures, end sandbox.Memory,
	r reactions, loadStart, loadEnd string) {
	b.Helper()
	cordon, total, drained := r.cordon, r.total, r.drained
	each := make([]string, 0, len(cordon))
	for _, d := range cordon {
		each = append(each, d.Round(time.Millisecond).String())
	}
	for _, ds := range [][]time.Duration{cordon, total, drained, r.recorded} {
		slices.Sort(ds)
	}
	median := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "none"
		}
		return nearestRank(ds, 0.5).Round(time.Millisecond).String()
	}
	minutes := idle.window.Minutes()
	reads, writes := idle.requests.reads(), idle.requests.writes()
	printTable(fmt.Sprintf("controller at scale: %d nodes, %d pods, budgets maxUnavailable 10%%, `sluice controller` as its own process (64 workers), idle %s after its caches synced and its queue emptied; watches renew every 5-10 min, which one minute may miss",
		cl.nodes, cl.pods, idle.window), [][]string{
		{"", "measured", "target"},
		{"API reads while idle (gets, lists, watches opened)", fmt.Sprintf("%.2f/s (%.0f/min)", reads/idle.window.Seconds(), reads/minutes), sc.want(scaleIdleReads)},
		{"API writes while idle", fmt.Sprintf("%.0f/min (%.2f/s)", writes/minutes, writes/idle.window.Seconds()), sc.want(scaleIdleWrites)},
		{"controller RSS, idle at scale", fmt.Sprintf("%d MiB", idle.mem.RSS>>20), sc.want(scaleIdleMemory)},
		{"controller peak RSS (VmHWM), at the end", fmt.Sprintf("%d MiB", end.Peak>>20), sc.want(scalePeakMemory)},
		{"controller CPU while idle", fmt.Sprintf("%.1f%% of a core", 100*idle.cpuSeconds/idle.window.Seconds()), ""},
		{fmt.Sprintf("Preempt report on the Node -> cordoned, median of %d", len(cordon)), median(cordon), sc.want(scaleCordon)},
		{"  each", strings.Join(each, ", "), ""},
		{"  report -> the controller's record (it adopts the agent's cordon), median", median(r.recorded), ""},
		{"  event appears -> cordoned (with the agent's 1s poll), median", median(total), ""},
		{"  report -> node empty (drained), median", fmt.Sprintf("%s (%d of %d drained)", median(drained), len(drained), len(cordon)), ""},
		{"controller start -> caches synced", c.synced.Round(100 * time.Millisecond).String(), ""},
		{"  API requests until then (reads / writes)", fmt.Sprintf("%.0f / %.0f", c.startup.reads(), c.startup.writes()), ""},
		{"setup: sandbox, nodes Ready, pods Ready, budgets settled", setupLine(cl), ""},
		{"machine load (1, 5, 15 min) at start / end", loadStart + " / " + loadEnd, ""},
	})
	b.ReportMetric(reads/idle.window.Seconds(), "idle-reads/s")
	b.ReportMetric(writes/minutes, "idle-writes/min")
	b.ReportMetric(float64(idle.mem.RSS>>20), "controller-RSS-MiB")
	b.ReportMetric(float64(end.Peak>>20), "controller-peak-MiB")
	if len(cordon) > 0 {
		b.ReportMetric(nearestRank(cordon, 0.5).Seconds(), "cordon-p50-s")
	}
	sc.add(scaleIdleReads, reads/idle.window.Seconds())
	sc.add(scaleIdleWrites, writes/minutes)
	sc.add(scaleIdleMemory, float64(idle.mem.RSS)/(1<<20))
	sc.add(scalePeakMemory, float64(end.Peak)/(1<<20))
	for _, d := range cordon {
		sc.add(scaleCordon, d.Seconds())
	}
}

func setupLine(cl *scaleCluster) string {
	s := func(d time.Duration) string { return d.Round(time.Second).String() }
	return fmt.Sprintf("%s (%s + %s + %s + %s)", s(cl.setup), s(cl.sb.StartupDuration()), s(cl.nodesReady), s(cl.podsReady), s(cl.budgetsSettled))
}

// calmLoad is the one-minute load average, per core, under which the machine
// counts as at rest.
const calmLoad = 1.5

// waitCalm waits, at most max, for the one-minute load average to fall under
// calmLoad per core, and says on stderr how it went.
func waitCalm(b *testing.B, max time.Duration) {
	b.Helper()
	start := time.Now()
	for time.Since(start) < max {
		f := strings.Fields(loadavg())
		if len(f) == 0 {
			return
		}
		if one, err := strconv.ParseFloat(f[0], 64); err == nil && one <= calmLoad*float64(goruntime.NumCPU()) {
			fmt.Fprintf(os.Stderr, "machine at rest after %s (load %s)\n", time.Since(start).Round(time.Second), loadavg())
			return
		}
		time.Sleep(5 * time.Second)
	}
	fmt.Fprintf(os.Stderr, "machine still busy after %s (load %s); measuring anyway\n", max, loadavg())
}

// loadavg is the machine's load average over 1, 5 and 15 minutes.
func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if err != nil || len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// envInt reads a positive whole number from the environment, or def.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}
