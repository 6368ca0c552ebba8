package bench

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// group is one copy of a benchmark's workload: nodes to drain, spare nodes,
// and a namespace. Each tool gets its own identical group.
type group struct {
	ns     string
	nodes  []string
	spares []string
	label  map[string]string
}

func startSandbox(b *testing.B) (*sandbox.Sandbox, kubernetes.Interface, string) {
	b.Helper()
	ctx := context.Background()
	bin, err := sandbox.FindBinaries(ctx, "", os.Stderr)
	if err != nil {
		b.Fatal(err)
	}
	sb, err := sandbox.Start(ctx, sandbox.Config{BinDir: bin})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sb.Stop() })
	cfg := sb.RESTConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	return sb, kubernetes.NewForConfigOrDie(cfg), filepath.Join(bin, "kubectl")
}

// newGroup creates the nodes to drain, then the workload (which lands on
// them), then the spare nodes replacements move to.
func newGroup(b *testing.B, client kubernetes.Interface, name string, nodes, spares int, workload func(g *group) []runtime.Object) *group {
	b.Helper()
	ctx := context.Background()
	g := &group{ns: name, label: map[string]string{"bench.sluice.dev/group": name}}
	if err := fixture.Create(ctx, client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		b.Fatal(err)
	}
	pool := fixture.AKSPool(name, nodes, fixture.WithLabels(g.label), fixture.MaxPods(250), fixture.InstanceType("Standard_D16s_v5", "15", "60Gi"))
	for _, n := range pool.Nodes() {
		g.nodes = append(g.nodes, n.Name)
		if err := fixture.Create(ctx, client, n); err != nil {
			b.Fatal(err)
		}
	}
	waitUntil(b, 2*time.Minute, "the default ServiceAccount in "+name, func() bool {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	objs := workload(g)
	if err := fixture.Create(ctx, client, objs...); err != nil {
		b.Fatal(err)
	}
	waitUntil(b, 10*time.Minute, "every pod of "+name+" running", func() bool {
		list, err := client.CoreV1().Pods(name).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false
		}
		for _, p := range list.Items {
			if p.Status.Phase != corev1.PodRunning {
				return false
			}
		}
		return len(list.Items) >= expectedPods(objs)
	})
	spare := fixture.EKSNodeGroup(name+"-spare", spares, fixture.WithLabels(g.label), fixture.MaxPods(250), fixture.InstanceType("m5.4xlarge", "15", "60Gi"))
	for _, n := range spare.Nodes() {
		g.spares = append(g.spares, n.Name)
		if err := fixture.Create(ctx, client, n); err != nil {
			b.Fatal(err)
		}
	}
	return g
}

func expectedPods(objs []runtime.Object) int {
	n := 0
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && d.Spec.Replicas != nil {
			n += int(*d.Spec.Replicas)
		}
	}
	return n
}

func waitUntil(b *testing.B, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("waiting %s for %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// countingClient is a client whose every HTTP request is counted, by verb,
// resource and subresource.
func countingClient(b *testing.B, sb *sandbox.Sandbox) (kubernetes.Interface, *requestTally) {
	b.Helper()
	t := newRequestTally()
	cfg := sb.RESTConfig()
	cfg.QPS, cfg.Burst = 100, 200 // sluice's CLI defaults
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			t.add(requestKindOf(r.Method, r.URL), 1)
			return rt.RoundTrip(r)
		})
	})
	return kubernetes.NewForConfigOrDie(cfg), t
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// requestKind is a request as the API server's apiserver_request_total
// labels it: its verb (GET, LIST, WATCH, POST, PATCH, ...), resource and
// subresource.
type requestKind struct{ verb, resource, subresource string }

func (k requestKind) String() string {
	r := k.resource
	if k.subresource != "" {
		r += "/" + k.subresource
	}
	if r == "" {
		r = "(not a resource)"
	}
	return k.verb + " " + r
}

// requestKindOf names a client's request as the API server would:
// /api/v1/namespaces/ns/pods/p/eviction is a POST of pods/eviction, a GET
// without a name a LIST, and with ?watch=true a WATCH.
func requestKindOf(method string, u *url.URL) requestKind {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return requestKind{verb: method}
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // a namespaced resource; "namespaces/ns" alone is the namespace itself
	}
	var k requestKind
	named := len(parts) >= 2
	if len(parts) >= 1 {
		k.resource = parts[0]
	}
	if len(parts) >= 3 {
		k.subresource = parts[2]
	}
	switch {
	case method == http.MethodGet && u.Query().Get("watch") == "true":
		k.verb = "WATCH"
	case method == http.MethodGet && !named:
		k.verb = "LIST"
	case method == http.MethodDelete && !named:
		k.verb = "DELETECOLLECTION"
	default:
		k.verb = method
	}
	return k
}

// requestTally counts requests by kind.
type requestTally struct {
	mu    sync.Mutex
	kinds map[requestKind]int64
	total atomic.Int64
}

func newRequestTally() *requestTally { return &requestTally{kinds: map[requestKind]int64{}} }

func (t *requestTally) add(k requestKind, n int64) {
	t.total.Add(n)
	t.mu.Lock()
	t.kinds[k] += n
	t.mu.Unlock()
}

// Load is how many requests were counted.
func (t *requestTally) Load() int64 { return t.total.Load() }

// byKind is a copy of the counts.
func (t *requestTally) byKind() map[requestKind]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.kinds)
}

// kubectlResponse is one request in kubectl's -v=6 log.
var kubectlResponse = regexp.MustCompile(`"Response" verb="(\w+)" url="([^"]+)"`)

// runKubectlDrain drains nodes with the pinned kubectl, returning how long it
// took and the API requests it made (its -v=6 log has one line each).
func runKubectlDrain(b *testing.B, kubectl, kubeconfig string, nodes []string, extra ...string) (time.Duration, *requestTally) {
	b.Helper()
	args := append([]string{"--kubeconfig", kubeconfig, "drain", "--ignore-daemonsets", "-v=6"}, extra...)
	args = append(args, nodes...)
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, args...) //nolint:gosec // the pinned kubectl
	cmd.Stderr = &stderr
	start := time.Now()
	_ = cmd.Run() // a timeout exits non-zero; the figures still count
	took := time.Since(start)
	tally := newRequestTally()
	for _, m := range kubectlResponse.FindAllStringSubmatch(stderr.String(), -1) {
		u, err := url.Parse(m[2])
		if err != nil {
			b.Fatalf("kubectl's log names a request %q: %v", m[2], err)
		}
		tally.add(requestKindOf(m[1], u), 1)
	}
	return took, tally
}

// podClock watches a namespace and records, per pod, when it was asked to
// leave, the grace it was given, and when it was gone.
type podClock struct {
	mu    sync.Mutex
	asked map[types.UID]time.Time
	grace map[types.UID]int64
	gone  map[types.UID]time.Time
	exit  map[types.UID]float64 // the simulated process's own shutdown time
	stop  func()
}

// watchPods starts recording; only pods already on one of nodes are counted,
// not the replacements that appear elsewhere.

func watchPods(b *testing.B, client kubernetes.Interface, ns string, nodes []string) *podClock {
	b.Helper()
	on := map[string]bool{}
	for _, n := range nodes {
		on[n] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pc := &podClock{asked: map[types.UID]time.Time{}, grace: map[types.UID]int64{}, gone: map[types.UID]time.Time{}, exit: map[types.UID]float64{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			pc.mu.Lock()
			if _, tracked := pc.exit[p.UID]; !tracked && (!on[p.Spec.NodeName] || p.DeletionTimestamp != nil) {
				pc.mu.Unlock()
				continue // a replacement, or a pod first seen already leaving
			}
			if v := p.Annotations[contract.SandboxExitAfterSeconds]; v != "" {
				var f float64
				_, _ = fmt.Sscan(v, &f)
				pc.exit[p.UID] = f
			}
			if _, seen := pc.asked[p.UID]; !seen && p.DeletionTimestamp != nil {
				pc.asked[p.UID] = now
				if p.DeletionGracePeriodSeconds != nil {
					pc.grace[p.UID] = *p.DeletionGracePeriodSeconds
				}
			}
			if ev.Type == watch.Deleted {
				pc.gone[p.UID] = now
			}
			pc.mu.Unlock()
		}
	}()
	pc.stop = func() { cancel(); w.Stop(); <-done }
	return pc
}

// graceful counts the pods that exited on their own before the deadline:
// given at least the time their process needs, and gone by then. A pod never
// asked to leave, or still terminating at the deadline, died with the node.
func (pc *podClock) graceful(deadline time.Time) (graceful, total int) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for uid, need := range pc.exit {
		total++
		if os.Getenv("SLUICE_BENCH_DETAIL") != "" {
			fmt.Fprintf(os.Stderr, "  pod %s needs %.0fs: asked %+.1fs, grace %ds, gone %+.1fs\n", uid[:8], need,
				pc.asked[uid].Sub(deadline).Seconds(), pc.grace[uid], pc.gone[uid].Sub(deadline).Seconds())
		}
		gone, ok := pc.gone[uid]
		if ok && !gone.After(deadline) && float64(pc.grace[uid]) >= need {
			graceful++
		}
	}
	return graceful, total
}

func printTable(title string, rows [][]string) {
	fmt.Printf("\n%s\n", title)
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
}

func requestRatio(kubectl, sluice float64) string {
	if sluice <= kubectl {
		return fmt.Sprintf("%.1fx fewer", kubectl/sluice)
	}
	return fmt.Sprintf("%.2fx more", sluice/kubectl)
}

// goneFrom counts the pods that were on the group's drained nodes and left.
func goneFrom(b *testing.B, client kubernetes.Interface, g *group) int {
	b.Helper()
	list, err := client.CoreV1().Pods(g.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	drained := map[string]bool{}
	for _, n := range g.nodes {
		drained[n] = true
	}
	left := 0
	for _, p := range list.Items {
		if drained[p.Spec.NodeName] {
			left++
		}
	}
	return len(g.nodes)*50 - left
}

// BenchmarkDeadlineGracefulExits drains a node that goes away in 30 s. Its 20
// pods have grace periods from 10 to 90 s, processes that really need 5 to
// 20 s to stop (so every one can fit), replacements that take 5 s to become
// Ready, and budgets of maxUnavailable 1. It
// compares the share that exit gracefully before the deadline: kubectl drain
// --timeout 30s against sluice drain --deadline 30s, and judges sluice's.
func BenchmarkDeadlineGracefulExits(b *testing.B) {
	const window = 30 * time.Second
	const startup = 5 // seconds from scheduled to Ready, for originals and replacements alike
	shapes := []struct {
		grace int64
		exit  float64
	}{{10, 5}, {30, 10}, {60, 15}, {90, 20}}
	sc := newScorecard(b)
	for range b.N {
		sb, client, kubectl := startSandbox(b)
		workload := func(g *group) []runtime.Object {
			var objs []runtime.Object
			for i, s := range shapes {
				name := fmt.Sprintf("svc%d", i)
				objs = append(objs,
					fixture.Deployment(g.ns, name, 5, fixture.NodeSelector(g.label), fixture.GracePeriod(s.grace), fixture.ExitsAfter(s.exit), fixture.StartsAfter(startup)),
					fixture.PDB(g.ns, name, name, fixture.MaxUnavailable("1")))
			}
			return objs
		}
		k := newGroup(b, client, "kubectl-deadline", 1, 2, workload)
		s := newGroup(b, client, "sluice-deadline", 1, 2, workload)
		time.Sleep(3 * time.Second)

		kWatch := watchPods(b, client, k.ns, k.nodes)
		kStart := time.Now()
		runKubectlDrain(b, kubectl, sb.Kubeconfig(), k.nodes, "--timeout", "30s")
		time.Sleep(time.Until(kStart.Add(window + time.Second)))
		kWatch.stop()
		kGraceful, kTotal := kWatch.graceful(kStart.Add(window))

		sWatch := watchPods(b, client, s.ns, s.nodes)
		sStart := time.Now()
		d, err := drain.New(client, clock.RealClock{}, drain.Options{IgnoreDaemonSets: true, Deadline: sStart.Add(window)}, drain.Hooks{})
		if err != nil {
			b.Fatal(err)
		}
		report, err := d.Drain(context.Background(), s.nodes)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Until(sStart.Add(window + time.Second)))
		sWatch.stop()
		sGraceful, sTotal := sWatch.graceful(sStart.Add(window))
		forced := 0
		for _, p := range report.Nodes[0].Pods {
			if p.Reason == drain.ReasonDeadlineForced {
				forced++
			}
		}

		kShare, sShare := 100*float64(kGraceful)/float64(max(kTotal, 1)), 100*float64(sGraceful)/float64(max(sTotal, 1))
		b.ReportMetric(kShare, "kubectl-graceful-%")
		b.ReportMetric(sShare, "sluice-graceful-%")
		sc.add(deadlineGraceful, sShare)
		printTable("a node going away in 30s: 20 pods, grace 10-90s, processes needing 5-20s, replacements Ready 5s after scheduling, PDBs maxUnavailable 1 (target: graceful exits with sluice "+sc.want(deadlineGraceful)+")", [][]string{
			{"", "kubectl drain --timeout 30s", "sluice drain --deadline 30s"},
			{"graceful exits before the deadline", fmt.Sprintf("%d/%d (%.0f%%)", kGraceful, kTotal, kShare), fmt.Sprintf("%d/%d (%.0f%%)", sGraceful, sTotal, sShare)},
			{"deleted despite a budget (DeadlineForced)", "0", fmt.Sprint(forced)},
		})
	}
	sc.judge()
}
