package bench

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluice-dev/sluice/internal/agent"
	"github.com/sluice-dev/sluice/internal/controller"
	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
)

// BenchmarkMaintenanceReaction measures how soon sluice cordons a node once
// its cloud announces maintenance, and what the per-node agent costs. Ten
// AKS-shaped nodes each get a Scheduled Events emulator on loopback and an
// agent polling it at the default interval, with one controller beside them.
// One node at a time is given a Redeploy, and the benchmark's own node watch
// times each step until it sees spec.unschedulable. Then a real `sluice agent`
// process runs for 15 s against an eleventh node carrying an event, and its
// resident memory is set against the Helm chart's limit. The slowest cordon
// and the agent's memory are judged against their targets
// (targets_bench_test.go).
func BenchmarkMaintenanceReaction(b *testing.B) {
	const (
		nodes      = 10
		idleWindow = 30 * time.Second
		agentRun   = 15 * time.Second
		cordonWait = 30 * time.Second
	)
	sc := newScorecard(b)
	for range b.N {
		bin := buildSluiceBinary(b)
		sb, client, _ := startSandbox(b)
		h := newHarness(b, client)
		b.Cleanup(h.stop)

		var targets []*target
		for _, n := range fixture.AKSPool("maint", nodes).Nodes() {
			targets = append(targets, h.addNode(b, sb, n, true))
		}
		h.startController(b, sb)
		waitUntil(b, time.Minute, "every agent's first report", func() bool {
			return !slices.ContainsFunc(targets, func(t *target) bool { return !h.marks.hasReport(t.node) })
		})

		// Idle: every agent has reported "no events" and has nothing to do.
		// Client-go renews each watch every 5 to 10 minutes, which a 30 s
		// window misses: the steady rate is that, about 0.2 a minute, above
		// what this measures.
		reqBefore, pollsBefore := h.sums(targets)
		time.Sleep(idleWindow)
		reqAfter, pollsAfter := h.sums(targets)
		perNodeMinute := func(n int64) float64 { return float64(n) / nodes / idleWindow.Minutes() }
		idleRequests, idlePolls := perNodeMinute(reqAfter-reqBefore), perNodeMinute(pollsAfter-pollsBefore)

		var samples []reaction
		for i, t := range targets {
			// A random pause of up to one poll period puts each injection at a
			// uniformly random point of the agent's poll cycle, so the figure
			// is not flattered (or hurt) by the agents' phase.
			time.Sleep(rand.N(maintenance.DefaultPollInterval))
			id := fmt.Sprintf("redeploy-%02d", i)
			done := h.marks.expect(t.node, id)
			appeared := t.emu.inject(redeploy(id, t.vm))
			select {
			case <-done:
			case <-time.After(cordonWait):
				b.Fatalf("node %s not cordoned %s after event %s appeared", t.node, cordonWait, id)
			}
			samples = append(samples, h.marks.reaction(t.node, appeared, t.emu.firstPoll()))
		}

		rss := h.addNode(b, sb, fixture.AKSPool("rss", 1).Nodes()[0], false)
		fp := runAgentProcess(b, bin, sb.Kubeconfig(), rss, h.marks, agentRun)
		h.stop()

		reportReaction(b, sc, samples)
		reportFootprint(b, sc, fp, idleRequests, idlePolls)
	}
	sc.judge()
}

// target is one node under test: its emulator and, when the agent runs in
// the benchmark's process, the counter of that agent's API requests.
type target struct {
	node, vm string
	emu      *emulator
	requests *requestTally
}

// harness holds what the benchmark runs beside the sandbox: the node watch
// that times everything, the emulators, the agents and the controller.
type harness struct {
	client  kubernetes.Interface
	marks   *nodeMarks
	factory informers.SharedInformerFactory
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	servers []*httptest.Server
	once    sync.Once
}

func newHarness(b *testing.B, client kubernetes.Interface) *harness {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{client: client, marks: &nodeMarks{nodes: map[string]*marks{}}, ctx: ctx, cancel: cancel}
	h.factory = informers.NewSharedInformerFactory(client, 0)
	if _, err := h.factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    h.marks.observe,
		UpdateFunc: func(_, obj any) { h.marks.observe(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	h.factory.Start(ctx.Done())
	h.factory.WaitForCacheSync(ctx.Done())
	return h
}

// addNode creates the node with its own emulator and, when withAgent, its
// agent in this process, polling at the default interval.
func (h *harness) addNode(b *testing.B, sb *sandbox.Sandbox, n *corev1.Node, withAgent bool) *target {
	b.Helper()
	vm, err := azure.VMName(n.Spec.ProviderID)
	if err != nil {
		b.Fatal(err)
	}
	h.marks.track(n.Name)
	if err := fixture.Create(h.ctx, h.client, n); err != nil {
		b.Fatal(err)
	}
	t := &target{node: n.Name, vm: vm, emu: &emulator{Server: azure.NewServer()}}
	srv := httptest.NewServer(t.emu) // 127.0.0.1 only
	h.servers = append(h.servers, srv)
	t.emu.url = srv.URL
	if !withAgent {
		return t
	}
	w, err := agent.NewWatcher(maintenance.SourceAzure, srv.URL, n.Spec.ProviderID, clock.RealClock{}, maintenance.DefaultPollInterval, 2*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	approver, _ := w.(maintenance.Approver)
	var client kubernetes.Interface
	client, t.requests = countingClient(b, sb)
	a := agent.New(client, slog.New(slog.DiscardHandler), agent.Config{Node: n.Name, Source: maintenance.SourceAzure, Watcher: w, Approver: approver, CordonInvoluntary: true})
	h.wg.Add(1)
	go func() { defer h.wg.Done(); _ = a.Run(h.ctx) }()
	return t
}

// startController runs the controller as `sluice controller` does (the
// chart's default worker count, the default policies: a Redeploy is cordoned
// and drained), without leader election.
func (h *harness) startController(b *testing.B, sb *sandbox.Sandbox) {
	b.Helper()
	mgr, err := controller.New(sb.RESTConfig(), controller.Options{
		Identity: "bench", Workers: 4, RequestTimeout: 30 * time.Second, MetricsAddress: "0", HealthAddress: "0",
		Registry: prometheus.NewRegistry(), SeveralManagers: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	h.wg.Add(1)
	go func() { defer h.wg.Done(); _ = mgr.Start(h.ctx) }()
}

// sums adds up the in-process agents' API requests and the metadata requests
// their emulators answered.
func (h *harness) sums(targets []*target) (requests, polls int64) {
	for _, t := range targets {
		requests += t.requests.Load()
		polls += t.emu.requests.Load()
	}
	return requests, polls
}

// stop ends the agents and the controller, then the watch and the
// emulators; safe to call twice.
func (h *harness) stop() {
	h.once.Do(func() {
		h.cancel()
		h.wg.Wait()
		h.factory.Shutdown()
		for _, s := range h.servers {
			s.Close()
		}
	})
}

// emulator is one VM's Scheduled Events service. It counts the requests it
// answers and notes when the first poll that could see the latest event was
// answered.
type emulator struct {
	*azure.Server
	url      string
	requests atomic.Int64

	mu        sync.Mutex
	scheduled time.Time // when the latest event was in place
	polled    time.Time // when the first poll begun after that was answered
}

func (e *emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	begun := time.Now()
	e.requests.Add(1)
	e.Server.ServeHTTP(w, r)
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.Method == http.MethodGet && !e.scheduled.IsZero() && e.polled.IsZero() && begun.After(e.scheduled) {
		e.polled = time.Now()
	}
}

// inject schedules ev and returns the instant just before it appeared.
func (e *emulator) inject(ev azure.RawEvent) time.Time {
	appeared := time.Now()
	e.Schedule(ev)
	e.mu.Lock()
	e.scheduled, e.polled = time.Now(), time.Time{}
	e.mu.Unlock()
	return appeared
}

func (e *emulator) firstPoll() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.polled
}

func redeploy(id, vm string) azure.RawEvent {
	return azure.RawEvent{EventID: id, EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: azure.FormatNotBefore(time.Now().Add(5 * time.Minute)),
		EventSource: "Platform", DurationInSeconds: -1}
}

// nodeMarks records, per node, when the benchmark's node watch first saw each
// step of the reaction to the event expected there.
type nodeMarks struct {
	mu    sync.Mutex
	nodes map[string]*marks
}

type marks struct {
	hasReport bool   // the agent has reported at least once
	event     string // the event expected; empty: none yet
	reported  time.Time
	recorded  time.Time // the controller's record names the event
	cordoned  time.Time
	byAgent   bool          // cordoned before the controller's record: the agent's write
	done      chan struct{} // closed once cordoned
}

func (m *nodeMarks) track(node string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[node] = &marks{}
}

// expect starts timing the reaction to event on node; the channel closes
// once the node is seen cordoned.
func (m *nodeMarks) expect(node, event string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk := &marks{hasReport: m.nodes[node].hasReport, event: event, done: make(chan struct{})}
	m.nodes[node] = mk
	return mk.done
}

func (m *nodeMarks) hasReport(node string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodes[node].hasReport
}

func (m *nodeMarks) reported(node string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.nodes[node].reported.IsZero()
}

func (m *nodeMarks) observe(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	mk := m.nodes[n.Name]
	if mk == nil {
		return
	}
	_, has := n.Annotations[contract.AnnotationMaintenanceEvents]
	mk.hasReport = mk.hasReport || has
	if mk.event == "" {
		return
	}
	// A later step implies the earlier ones, should one update carry several.
	if r, _, err := maintenance.ReportOf(n); err == nil && mk.reported.IsZero() {
		if _, ok := r.Find(mk.event); ok {
			mk.reported = now
		}
	}
	ev, _, recorded := mcontroller.PhaseOf(n)
	recorded = recorded && ev == mk.event
	if recorded && mk.recorded.IsZero() {
		mk.recorded = now
		mk.reported = firstSet(mk.reported, now)
	}
	if n.Spec.Unschedulable && mk.cordoned.IsZero() {
		// A cordon seen before the controller's record is the agent's, in
		// the write that reported a Preempt (internal/agent/cordon.go).
		mk.cordoned = now
		mk.byAgent = mk.recorded.IsZero()
		mk.reported = firstSet(mk.reported, now)
		close(mk.done)
	}
}

func firstSet(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t
}

// reaction is one event's path from the metadata service to the cordon.
type reaction struct {
	total                           time.Duration
	pollWait, agent, record, cordon time.Duration
}

func (m *nodeMarks) reaction(node string, appeared, polled time.Time) reaction {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk := m.nodes[node]
	if polled.IsZero() || polled.After(mk.reported) {
		// The poll that saw the event began in the microseconds between
		// Schedule and its stamp: count the whole wait as waiting.
		polled = mk.reported
	}
	r := reaction{
		total:    mk.cordoned.Sub(appeared),
		pollWait: polled.Sub(appeared),
		agent:    mk.reported.Sub(polled),
	}
	if !mk.byAgent {
		r.record = mk.recorded.Sub(mk.reported)
		r.cordon = mk.cordoned.Sub(mk.recorded)
	}
	return r
}

// footprint is what a `sluice agent` process held after running a while.
type footprint struct {
	ran      time.Duration
	mem      sandbox.Memory
	anon     uint64 // of the RSS: the heap, stacks and runtime (RssAnon)
	file     uint64 // of the RSS: the mapped binary (RssFile), shareable and reclaimable
	heapMiB  int    // live heap after the last GC; -1 when none ran
	approved bool
}

var gcLine = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

// runAgentProcess runs the built binary as an agent for t's node, whose
// emulator already announces an event, for d; it checks the agent reported
// the event, reads the process's memory, and kills it.
func runAgentProcess(b *testing.B, bin, kubeconfig string, t *target, m *nodeMarks, d time.Duration) footprint {
	b.Helper()
	m.expect(t.node, "redeploy-rss") // the controller cordons it too; only the report is awaited here
	t.emu.inject(redeploy("redeploy-rss", t.vm))

	var out bytes.Buffer
	cmd := exec.Command(bin, "agent", "--kubeconfig", kubeconfig, "--node", t.node, "--cloud", "azure",
		"--imds-endpoint", t.emu.url, "--log-format", "text")
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1") // one line per GC, with the live heap
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	b.Cleanup(stop)
	running := func(what string) {
		select {
		case <-exited:
			b.Fatalf("sluice agent exited %s: %v\n%s", what, waitErr, out.String())
		default:
		}
	}

	deadline := time.Now().Add(30 * time.Second)
	for !m.reported(t.node) {
		running("before reporting the event")
		if time.Now().After(deadline) {
			stop()
			b.Fatalf("sluice agent did not report the event on %s within 30s\n%s", t.node, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Until(start.Add(d)))
	running("early")
	mem, err := sandbox.ResidentMemory(cmd.Process.Pid)
	anon, file := residentSplit(cmd.Process.Pid)
	ran := time.Since(start)
	stop()
	if err != nil {
		b.Fatal(err)
	}
	fp := footprint{ran: ran, mem: mem, anon: anon, file: file, heapMiB: -1, approved: slices.Contains(t.emu.Approved(), "redeploy-rss")}
	if gcs := gcLine.FindAllStringSubmatch(out.String(), -1); len(gcs) > 0 {
		fp.heapMiB, _ = strconv.Atoi(gcs[len(gcs)-1][3])
	}
	return fp
}

// residentSplit reads how much of a process's RSS is anonymous memory and how
// much is mapped files (zero where /proc does not say).
func residentSplit(pid int) (anon, file uint64) {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "RssAnon:":
			anon = kb << 10
		case "RssFile:":
			file = kb << 10
		}
	}
	return anon, file
}

// buildSluiceBinary builds the sluice command into a temporary directory.
func buildSluiceBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "sluice")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-dev/sluice/cmd/sluice").CombinedOutput()
	if err != nil {
		b.Fatalf("building sluice: %v\n%s", err, out)
	}
	return bin
}

func reportReaction(b *testing.B, sc *scorecard, samples []reaction) {
	b.Helper()
	row := func(name string, pick func(reaction) time.Duration, target string) []string {
		ds := make([]time.Duration, 0, len(samples))
		for _, s := range samples {
			ds = append(ds, pick(s))
		}
		slices.Sort(ds)
		r := []string{name}
		for _, p := range []float64{0, 0.5, 0.9, 1} {
			r = append(r, nearestRank(ds, p).Round(time.Millisecond).String())
		}
		return append(r, target)
	}
	total := row("event appears -> node cordoned", func(r reaction) time.Duration { return r.total }, "max "+sc.want(maintenanceCordon))
	printTable(fmt.Sprintf("maintenance reaction: an Azure Redeploy on %d AKS nodes, one at a time, each agent polling every %s, injected at a random point of its poll (target: the slowest cordoned %s)",
		len(samples), maintenance.DefaultPollInterval, sc.want(maintenanceCordon)), [][]string{
		{"", "min", "median", "p90", "max", "target"},
		total,
		row("  waiting for the agent's next poll", func(r reaction) time.Duration { return r.pollWait }, ""),
		row("  agent: poll answered -> report on the Node", func(r reaction) time.Duration { return r.agent }, ""),
		row("  controller: report -> its record on the Node", func(r reaction) time.Duration { return r.record }, ""),
		row("  controller: record -> cordoned", func(r reaction) time.Duration { return r.cordon }, ""),
	})
	ds := make([]time.Duration, 0, len(samples))
	for _, s := range samples {
		ds = append(ds, s.total)
	}
	slices.Sort(ds)
	b.ReportMetric(nearestRank(ds, 0.5).Seconds(), "cordon-p50-s")
	b.ReportMetric(nearestRank(ds, 0.9).Seconds(), "cordon-p90-s")
	b.ReportMetric(nearestRank(ds, 1).Seconds(), "cordon-max-s")
	sc.add(maintenanceCordon, nearestRank(ds, 1).Seconds())
}

func reportFootprint(b *testing.B, sc *scorecard, fp footprint, idleRequests, idlePolls float64) {
	b.Helper()
	heap := "no GC ran"
	if fp.heapMiB >= 0 {
		heap = fmt.Sprintf("%d MiB", fp.heapMiB)
	}
	approved := "no"
	if fp.approved {
		approved = "yes"
	}
	printTable(fmt.Sprintf("sluice agent footprint: a real process after %.0fs, having reported an event (approved it: %s) (target: the chart's memory limit)",
		fp.ran.Seconds(), approved), [][]string{
		{"", "measured", "target"},
		{"resident memory (RSS)", fmt.Sprintf("%d MiB", fp.mem.RSS>>20), sc.want(agentMemory)},
		{"  of which anonymous (heap, stacks, runtime)", fmt.Sprintf("%d MiB", fp.anon>>20), ""},
		{"  of which the mapped binary", fmt.Sprintf("%d MiB", fp.file>>20), ""},
		{"peak RSS", fmt.Sprintf("%d MiB", fp.mem.Peak>>20), ""},
		{"Go heap live after the last GC", heap, ""},
		{"API requests per node per minute, idle (10 in-process agents, 30s)", fmt.Sprintf("%.1f", idleRequests), ""},
		{"metadata requests per node per minute, idle", fmt.Sprintf("%.1f", idlePolls), ""},
	})
	b.ReportMetric(float64(fp.mem.RSS>>20), "agent-RSS-MiB")
	sc.add(agentMemory, float64(fp.mem.RSS)/(1<<20))
	b.ReportMetric(idleRequests, "idle-req/node/min")
}

// nearestRank is the p-quantile of sorted by the nearest-rank method: for ten
// samples the median is the 5th and p90 the 9th.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
