package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/upgrade"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// BenchmarkUpgrade rolls a 30-node pool (2 pods a node, each taking its
// whole 10 s grace to exit, under a 25 % PDB) to a new image with maxSurge
// 33 %, machines that boot in 10 s, and a 5 s soak, three times, and
// prints each wall time beside the lower bound (batches x (boot + slowest
// drain + soak)) and beside sluice's own forecast, made just before; then
// the same upgrade done node by node with `kubectl drain`, as a script
// would: make a machine, wait until it is Ready, drain the old node, delete
// it. The median ratio to the lower bound, the median forecast error (either
// way) and the script's wall time over sluice's are judged against their
// targets (targets_bench_test.go). SLUICE_BENCH_UPGRADE_NODES changes the
// pool's size.
func BenchmarkUpgrade(b *testing.B) {
	nodes := 30
	if v, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_UPGRADE_NODES")); err == nil && v > 0 {
		nodes = v
	}
	const (
		boot     = 10 * time.Second
		soak     = 5 * time.Second
		grace    = 10
		upgrades = 3
	)
	sc := newScorecard(b)
	for range b.N {
		loadStart := loadavg()
		bin := buildSluiceBinary(b)
		sb, clientset, kubectl := startSandbox(b)
		kube := poolClient(b, sb)
		pool := benchPool("upgrade", 34, boot)
		pool.Spec.Upgrade = &v1alpha1.UpgradeSpec{MaxSurge: ptrTo(intstr.FromString("33%")), NodeSoakDuration: &metav1.Duration{Duration: soak}}
		makePool(b, sb, clientset, kube, pool, nodes)
		ns := "upgrade"
		objs := []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			fixture.Deployment(ns, "app", int32(2*nodes), fixture.NodeSelector(pool.Spec.Template.Labels), fixture.Requests("100m", "128Mi"), fixture.GracePeriod(grace)), //nolint:gosec // a small count
			fixture.PDB(ns, "app", "app", fixture.MaxUnavailable("25%"))}
		createParallel(context.Background(), b, clientset, objs, 4)
		waitUntil(b, 5*time.Minute, "the workload running", func() bool { return readyPods(b, clientset, ns) == 2*nodes })
		waitCalm(b, 3*time.Minute)
		c := startControllerProcess(b, bin, sb.Kubeconfig(), "--providers", "kwok")
		c.waitQueueEmpty(b)
		var rows [][]string
		var ratios, errs, walls []float64
		for run := range upgrades {
			waitUntil(b, 5*time.Minute, "the workload running", func() bool { return readyPods(b, clientset, ns) == 2*nodes })
			image := fmt.Sprintf("img-%d", run+2)
			fc := forecastNow(b, clientset, kube, pool.Name, image)
			r := upgradeOnce(b, c, clientset, kube, pool.Name, image)
			batches := int(math.Ceil(float64(nodes) / float64(fc.BatchSize)))
			lower := time.Duration(batches) * (boot + r.slowestDrain + soak)
			errPct := 100 * (fc.Total.Seconds() - r.wall.Seconds()) / r.wall.Seconds()
			ratios, errs, walls = append(ratios, r.wall.Seconds()/lower.Seconds()), append(errs, errPct), append(walls, r.wall.Seconds())
			rows = append(rows, []string{fmt.Sprintf("upgrade %d", run+1), r.wall.Round(100 * time.Millisecond).String(),
				fmt.Sprintf("%s (%d x (%s + %s + %s))", lower.Round(100*time.Millisecond), batches, boot, r.slowestDrain.Round(100*time.Millisecond), soak),
				fmt.Sprintf("%.2fx", r.wall.Seconds()/lower.Seconds()), fc.Total.Round(time.Second).String(), fmt.Sprintf("%+.0f%%", errPct),
				strconv.Itoa(len(fc.Blockers)), strconv.Itoa(r.blocked), r.load})
		}
		c.stop()
		slices.Sort(ratios)
		slices.Sort(errs)
		slices.Sort(walls)
		fmt.Printf("\n# Upgrade of a %d-node pool, maxSurge 33%%, boot %s, soak %s, pods exit in their %d s grace; %d upgrades on one cluster (load at start %s)\n",
			nodes, boot, soak, grace, upgrades, loadStart)
		printTable("", append([][]string{{"run", "wall time", "lower bound", "vs lower bound", "forecast", "forecast error",
			"blockers forecast", "nodes that blocked", "load at end"}}, rows...))
		// Printed before the script runs (ten minutes more), so a failure
		// there keeps sluice's figures.
		sc.add(upgradeRatio, ratios...)
		for _, e := range errs {
			sc.add(upgradeForecast, math.Abs(e))
		}
		script := scriptedUpgrade(b, clientset, kube, kubectl, sb.Kubeconfig(), pool.Name, "img-9", boot)
		sc.add(upgradeScript, script.Seconds()/walls[len(walls)/2])
		printTable("", [][]string{
			{"figure", "value", "target"},
			{"median ratio to the lower bound", fmt.Sprintf("%.2fx", ratios[len(ratios)/2]), sc.want(upgradeRatio)},
			{"median forecast error", fmt.Sprintf("%+.0f%%", errs[len(errs)/2]), "either way " + sc.want(upgradeForecast)},
			{"kubectl drain, node by node (one run)", fmt.Sprintf("%s (%.1fx sluice's median wall time; load at end %s)", script.Round(time.Second), script.Seconds()/walls[len(walls)/2], loadavg()),
				"over sluice's " + sc.want(upgradeScript)},
		})
	}
	sc.judge()
}

func ptrTo[T any](v T) *T { return &v }

// forecastNow runs sluice's forecast (what `sluice plan upgrade` prints)
// against the cluster as it is.
func forecastNow(b *testing.B, clientset kubernetes.Interface, kube client.Client, name, image string) *upgrade.Forecast {
	b.Helper()
	ctx := context.Background()
	var pool v1alpha1.NodePool
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, &pool); err != nil {
		b.Fatal(err)
	}
	var all v1alpha1.NodePoolList
	if err := kube.List(ctx, &all); err != nil {
		b.Fatal(err)
	}
	nodes, err := clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pods, err := clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pdbs, err := clientset.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	f, err := upgrade.Predict(upgrade.Input{Pool: &pool, Members: nodepool.Members(&pool, nodes.Items, all.Items), Nodes: nodes.Items,
		Pods: pods.Items, PDBs: pdbs.Items, Image: image, Boot: pool.Spec.Provider.Kwok.BootDelay.Duration, Now: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// upgraded is one upgrade's figures.
type upgraded struct {
	wall, slowestDrain time.Duration
	blocked            int
	load               string
}

// upgradeOnce sets the pool's image and waits until its upgrade has
// Succeeded (or Failed), timing each node's drain from its record.
func upgradeOnce(b *testing.B, c *controllerProcess, clientset kubernetes.Interface, kube client.Client, name, image string) upgraded {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"image":%q}}}`, image))
	if err := kube.Patch(ctx, &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		b.Fatal(err)
	}
	drainStart, drained := map[string]time.Time{}, map[string]time.Duration{}
	var st *v1alpha1.UpgradeStatus
	waitUntil(b, 20*time.Minute, "the upgrade to "+image+" ended", func() bool {
		c.mustRun(b, "during the upgrade")
		for _, n := range poolNodes(b, clientset, name) {
			rec, _ := disruption.RecordOf(&n)
			if rec == nil {
				continue
			}
			if _, seen := drainStart[n.Name]; !seen && rec.Phase == disruption.PhaseDraining {
				drainStart[n.Name] = time.Now()
			}
			if s, seen := drainStart[n.Name]; seen && rec.Phase != disruption.PhaseDraining && drained[n.Name] == 0 {
				drained[n.Name] = time.Since(s)
			}
		}
		var pool v1alpha1.NodePool
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, &pool); err != nil {
			return false
		}
		st = pool.Status.Upgrade
		return st != nil && st.Image == image && (st.Phase == v1alpha1.UpgradeSucceeded || st.Phase == v1alpha1.UpgradeFailed)
	})
	wall := time.Since(start)
	var slowest time.Duration
	for _, d := range drained {
		slowest = max(slowest, d)
	}
	return upgraded{wall: wall, slowestDrain: slowest, blocked: len(st.Blocked) + len(st.Quarantined), load: loadavg()}
}

// scriptedUpgrade upgrades the pool node by node as a script around kubectl
// would: a new machine (the provider's API, as a script calls the cloud's
// CLI), wait for its Node to be Ready, `kubectl drain` the old node, delete
// it and its machine. The controller is stopped, and the pool's finalizers
// removed first.
func scriptedUpgrade(b *testing.B, clientset kubernetes.Interface, kube client.Client, kubectl, kubeconfig, name, image string, boot time.Duration) time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pool v1alpha1.NodePool
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, &pool); err != nil {
		b.Fatal(err)
	}
	old := poolNodes(b, clientset, name)
	for _, n := range old {
		if _, err := clientset.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	p := kwok.New(clientset, clock.RealClock{}, kwok.Options{Registered: true}) // no controller registers them for kubectl
	go func() { _ = p.Run(ctx) }()
	next := pool.DeepCopy()
	next.Spec.Template.Image = image
	next.Spec.Provider.Kwok.BootDelay = &metav1.Duration{Duration: boot}
	start := time.Now()
	for _, n := range old {
		m, err := p.Create(ctx, next, "")
		if err != nil {
			b.Fatal(err)
		}
		waitUntil(b, 5*time.Minute, "the new node "+m.Name+" Ready", func() bool {
			node, err := clientset.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
			return err == nil && nodeReady(node) && !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
		})
		runKubectlDrain(b, kubectl, kubeconfig, []string{n.Name}, "--delete-emptydir-data", "--timeout=10m")
		if err := clientset.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}
