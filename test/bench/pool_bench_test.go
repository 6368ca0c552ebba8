package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// BenchmarkPoolDrift rolls a 100-node pool (2 pods a node, each taking 3 s to
// exit) to a new image under a 20 % budget, replacement first, with machines
// that take 5 s to boot, and prints the wall time beside its lower bound:
// ceil(100/20) batches, each at least one boot and the slowest pod's exit.
// The median ratio of three rollouts to that bound, and the most old nodes
// out at once in any of them, are judged against their targets
// (targets_bench_test.go).
func BenchmarkPoolDrift(b *testing.B) {
	const (
		nodes       = 100
		budgetPct   = 20
		boot        = 5 * time.Second
		slowestExit = 3 * time.Second
		rollouts    = 3
	)
	if budget := nodes * budgetPct / 100; benchTargets[driftOut].threshold != float64(budget) {
		b.Fatalf("the target for old nodes out at once is %g, but the pool's budget is %d nodes", benchTargets[driftOut].threshold, budget)
	}
	sc := newScorecard(b)
	for range b.N {
		loadStart := loadavg()
		bin := buildSluiceBinary(b)
		sb, clientset, _ := startSandbox(b)
		kube := poolClient(b, sb)
		pool := benchPool("drift", budgetPct, boot)
		makePool(b, sb, clientset, kube, pool, nodes)
		ns := "drift"
		objs := []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			fixture.Deployment(ns, "app", 2*nodes, fixture.NodeSelector(pool.Spec.Template.Labels), fixture.Requests("100m", "128Mi"),
				fixture.GracePeriod(30), fixture.ExitsAfter(slowestExit.Seconds())),
			fixture.PDB(ns, "app", "app", fixture.MaxUnavailable("25%"))}
		createParallel(context.Background(), b, clientset, objs, 4)
		waitUntil(b, 5*time.Minute, "the workload running", func() bool { return readyPods(b, clientset, ns) == 2*nodes })
		waitCalm(b, 3*time.Minute)
		c := startControllerProcess(b, bin, sb.Kubeconfig(), "--providers", "kwok")
		c.waitQueueEmpty(b)
		batches := int(math.Ceil(float64(nodes) / float64(nodes*budgetPct/100)))
		lower := time.Duration(batches) * (boot + slowestExit)
		var walls []time.Duration
		var rows [][]string
		mostOut := 0
		for run := range rollouts {
			waitUntil(b, 5*time.Minute, "the workload running", func() bool { return readyPods(b, clientset, ns) == 2*nodes })
			r := rollout(b, c, clientset, kube, pool, fmt.Sprintf("img-%d", run+2), nodes)
			walls = append(walls, r.wall)
			mostOut = max(mostOut, r.maxOut)
			sc.add(driftRatio, r.wall.Seconds()/lower.Seconds())
			rows = append(rows, []string{fmt.Sprintf("rollout %d", run+1), r.wall.Round(100 * time.Millisecond).String(),
				fmt.Sprintf("%.2fx", r.wall.Seconds()/lower.Seconds()), strconv.Itoa(r.maxOut),
				fmt.Sprintf("%.1f (%.0f reads, %.0f writes)", r.requests.total()/nodes, r.requests.reads(), r.requests.writes()),
				fmt.Sprintf("%.1f", r.apiserver/nodes), r.load})
		}
		slices.Sort(walls)
		median := walls[len(walls)/2]
		fmt.Printf("\n# Drift of a %d-node pool, budget %d%%, boot %s, slowest pod exit %s; %d rollouts on one cluster (load at start %s)\n",
			nodes, budgetPct, boot, slowestExit, rollouts, loadStart)
		printTable("", append([][]string{{"run", "wall time", "vs lower bound", "old nodes out at once (max)",
			"controller requests per node", "API server requests per node (all clients)", "load at end"}}, rows...))
		ratio := benchTargets[driftRatio]
		sc.add(driftOut, float64(mostOut))
		printTable("", [][]string{
			{"figure", "sluice", "target"},
			{"median wall time", median.Round(100 * time.Millisecond).String(),
				fmt.Sprintf("%s the lower bound %s = %s", ratio.want(), lower, time.Duration(ratio.threshold*float64(lower)).Round(time.Second))},
			{"median ratio to the lower bound", fmt.Sprintf("%.2fx", median.Seconds()/lower.Seconds()), ratio.want()},
			{"old nodes out of service at once, most in any rollout", strconv.Itoa(mostOut), fmt.Sprintf("%s (the budget, %d%% of %d)", sc.want(driftOut), budgetPct, nodes)},
		})
	}
	sc.judge()
}

// rolled is one rollout's figures.
type rolled struct {
	wall      time.Duration
	maxOut    int
	requests  requestCounts
	apiserver float64
	load      string
}

// rollout sets the pool's image and waits until every node runs it, with
// the pool at its size again.
func rollout(b *testing.B, c *controllerProcess, clientset kubernetes.Interface, kube client.Client, pool *v1alpha1.NodePool, image string, nodes int) rolled {
	b.Helper()
	var old []string
	for _, n := range poolNodes(b, clientset, pool.Name) {
		old = append(old, n.Name)
	}
	before, apiBefore := c.requests(b), apiserverRequests(b, clientset)
	start := time.Now()
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"image":%q}}}`, image))
	if err := kube.Patch(context.Background(), pool, client.RawPatch(types.MergePatchType, patch)); err != nil {
		b.Fatal(err)
	}
	maxOut := 0
	waitUntil(b, 15*time.Minute, "every node on "+image, func() bool {
		c.mustRun(b, "during the rollout")
		cur := poolNodes(b, clientset, pool.Name)
		out, fresh := 0, 0
		for _, n := range cur {
			if slices.Contains(old, n.Name) {
				if n.Spec.Unschedulable || n.DeletionTimestamp != nil || n.Annotations[contract.AnnotationDisruption] != "" {
					out++
				}
				continue
			}
			if n.Annotations[contract.AnnotationImage] == image && nodeReady(&n) {
				fresh++
			}
		}
		maxOut = max(maxOut, out)
		return fresh == nodes && len(cur) == nodes
	})
	wall := time.Since(start)
	return rolled{wall: wall, maxOut: maxOut, requests: c.requests(b).minus(before),
		apiserver: apiserverRequests(b, clientset) - apiBefore, load: loadavg()}
}

// BenchmarkPoolsIdle: 1,000 nodes in 20 pools with a provider, nothing to
// do. It prints how long one evaluation pass over every pool takes and the
// writes the controller makes in a minute of idling, and judges both against
// their targets (targets_bench_test.go).
//
// The pass is measured twice. At start-up, the NodePool controller's
// reconciles share two cores with the caches' first lists, the other
// controllers' reconciles of every node (deletion, maintenance, claims:
// 1,000 each) and the API server; their average times 20 is printed, not
// judged. Once idle, every pool's spec is edited (a cap on its node count
// far above its size), and the reconciles that answer are the pass judged.
// The lower bound is the pass's own work in this process, without the API:
// choosing each pool's members and computing its view and status from the
// same nodes.
func BenchmarkPoolsIdle(b *testing.B) {
	const (
		pools   = 20
		perPool = 50
		window  = time.Minute
	)
	sc := newScorecard(b)
	for range b.N {
		loadStart := loadavg()
		bin := buildSluiceBinary(b)
		sb, clientset, _ := startSandbox(b)
		kube := poolClient(b, sb)
		for i := range pools {
			makePool(b, sb, clientset, kube, benchPool(fmt.Sprintf("idle-%02d", i), 10, 0), perPool)
		}
		waitCalm(b, 3*time.Minute)
		c := startControllerProcess(b, bin, sb.Kubeconfig(), "--providers", "kwok")
		c.waitQueueEmpty(b)
		sum, count := reconcileTime(b, c, "nodepool")
		idle := c.idle(b, 10*time.Second, window)
		sum2, count2 := reconcileTime(b, c, "nodepool")
		atStart := time.Duration(sum / count * pools * float64(time.Second))
		editEveryPool(b, kube, pools)
		c.waitQueueEmpty(b)
		sum3, count3 := reconcileTime(b, c, "nodepool")
		steady := time.Duration((sum3 - sum2) / max(count3-count2, 1) * pools * float64(time.Second))
		bound := passLowerBound(b, clientset, kube)
		fmt.Printf("\n# Idle controller, %d nodes in %d pools with the kwok provider (load at start %s, at end %s)\n",
			pools*perPool, pools, loadStart, loadavg())
		printTable("", [][]string{
			{"figure", "sluice", "target", "lower bound"},
			{"one evaluation pass over every pool", fmt.Sprintf("%s (%.0f pool reconciles after an edit of each pool, %.1f ms each)", steady.Round(time.Millisecond), count3-count2, 1000*(sum3-sum2)/max(count3-count2, 1)),
				sc.want(poolsPass), bound.Round(100*time.Microsecond).String() + " (the pass's work without the API)"},
			{"the same, at start-up (not judged)", fmt.Sprintf("%s (%d pool reconciles beside every controller's start, %.1f ms each)", atStart.Round(time.Millisecond), int(count), 1000*sum/count), "", ""},
			{"pool reconciles while idle", fmt.Sprintf("%.0f in %s", count2-count, window), "", ""},
			{"API writes while idle", fmt.Sprintf("%.0f in %s", idle.requests.writes(), window), sc.want(poolsWrites), "0"},
			{"API reads while idle", fmt.Sprintf("%.2f/s", idle.requests.reads()/window.Seconds()), "(watches only)", ""},
			{"controller RSS", fmt.Sprintf("%.0f MiB", float64(idle.mem.RSS)/(1<<20)), "", ""},
		})
		sc.add(poolsPass, steady.Seconds())
		sc.add(poolsWrites, idle.requests.writes())
	}
	sc.judge()
}

// editEveryPool changes what no pool decides with (a cap on its node count
// far above its size), so each is reconciled once more, and waits until
// every pool's status shows the edit: the reconcile that answered it has
// decided, acted and written.
func editEveryPool(b *testing.B, kube client.Client, pools int) {
	b.Helper()
	ctx := context.Background()
	want := map[string]int64{}
	for i := range pools {
		pool := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("idle-%02d", i)}}
		patch := []byte(fmt.Sprintf(`{"spec":{"limits":{"nodes":%d}}}`, 100000+i))
		if err := kube.Patch(ctx, pool, client.RawPatch(types.MergePatchType, patch)); err != nil {
			b.Fatalf("editing pool %s: %v", pool.Name, err)
		}
		want[pool.Name] = pool.Generation
	}
	waitUntil(b, 2*time.Minute, "every pool's status showing the edit", func() bool {
		for name, gen := range want {
			pool := &v1alpha1.NodePool{}
			if err := kube.Get(ctx, client.ObjectKey{Name: name}, pool); err != nil || pool.Status.ObservedGeneration < gen {
				return false
			}
		}
		return true
	})
}

// passLowerBound is the median of five passes of the evaluation's own work
// over the cluster's pools and nodes in this process: each pool's members,
// its view, and the budgets its status reports.
func passLowerBound(b *testing.B, clientset kubernetes.Interface, kube client.Client) time.Duration {
	b.Helper()
	ctx := context.Background()
	var pools v1alpha1.NodePoolList
	if err := kube.List(ctx, &pools); err != nil {
		b.Fatal(err)
	}
	nodes, err := clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var runs []time.Duration
	for range 5 {
		start := time.Now()
		for i := range pools.Items {
			pool := &pools.Items[i]
			now := time.Now()
			v := disruption.Observe(pool, poolctrl.Members(pool, nodes.Items, pools.Items), now)
			_ = v.AllowedByReason(now)
		}
		runs = append(runs, time.Since(start))
	}
	slices.Sort(runs)
	return runs[len(runs)/2]
}

// benchPool is a pool of the kwok provider whose nodes boot in boot.
func benchPool(name string, budgetPct int, boot time.Duration) *v1alpha1.NodePool {
	labels := map[string]string{"bench.sluice.dev/pool": name}
	return &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: labels},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok, Kwok: &v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{Duration: boot}}},
			Template:     &v1alpha1.NodeTemplate{Labels: labels, InstanceTypes: []string{"Standard_D4s_v5"}, Image: "img-1"},
			Disruption:   &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: fmt.Sprintf("%d%%", budgetPct)}}, ConsolidateAfter: v1alpha1.Never},
		},
	}
}

// makePool creates the pool and has a kwok provider of the benchmark's own
// make its nodes (the controller's provider finds them from their Nodes).
func makePool(b *testing.B, sb *sandbox.Sandbox, clientset kubernetes.Interface, kube client.Client, pool *v1alpha1.NodePool, n int) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := kube.Create(ctx, pool); err != nil {
		b.Fatalf("creating pool %s: %v", pool.Name, err)
	}
	p := kwok.New(clientset, clock.RealClock{}, kwok.Options{Registered: true})
	go func() { _ = p.Run(ctx) }()
	fast := pool.DeepCopy()
	fast.Spec.Provider.Kwok.BootDelay = &metav1.Duration{}
	for range n {
		if _, err := p.Create(ctx, fast, ""); err != nil {
			b.Fatal(err)
		}
	}
	waitUntil(b, 10*time.Minute, fmt.Sprintf("%d nodes of pool %s Ready", n, pool.Name), func() bool {
		ready := 0
		for _, node := range poolNodes(b, clientset, pool.Name) {
			if nodeReady(&node) && !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) {
				ready++
			}
		}
		return ready == n
	})
	_ = sb
}

func poolClient(b *testing.B, sb *sandbox.Sandbox) client.Client {
	b.Helper()
	cfg := sb.RESTConfig()
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := nodepool.Install(context.Background(), ext); err != nil {
		b.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	return kube
}

func poolNodes(b *testing.B, clientset kubernetes.Interface, pool string) []corev1.Node {
	b.Helper()
	list, err := clientset.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "bench.sluice.dev/pool=" + pool})
	if err != nil {
		b.Fatal(err)
	}
	return list.Items
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func readyPods(b *testing.B, clientset kubernetes.Interface, ns string) int {
	b.Helper()
	list, err := clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil && podReady(&list.Items[i]) {
			n++
		}
	}
	return n
}

// apiserverRequests is the API server's own count of requests served, all
// clients together.
func apiserverRequests(b *testing.B, clientset kubernetes.Interface) float64 {
	b.Helper()
	raw, err := clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	var total float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
		}
	}
	return total
}

// reconcileTime is the sum (seconds) and count of the named controller's
// reconciles, from controller-runtime's histogram.
func reconcileTime(b *testing.B, c *controllerProcess, controller string) (sum, count float64) {
	b.Helper()
	for _, family := range []string{"controller_runtime_reconcile_time_seconds_sum", "controller_runtime_reconcile_time_seconds_count"} {
		m, err := scrape(c.metrics, family, "controller")
		if err != nil {
			b.Fatal(err)
		}
		if strings.HasSuffix(family, "_sum") {
			sum = m[controller]
		} else {
			count = m[controller]
		}
	}
	if count == 0 {
		fmt.Fprintln(os.Stderr, "no reconcile of", controller, "measured")
		count = 1
	}
	return sum, count
}
