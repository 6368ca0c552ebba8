package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/rebootplan"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// BenchmarkReboots: every node of a 100-node pool asks for a reboot (2 pods
// a node, each taking 5 s to exit), the budget for RebootRequired is 20 %,
// the sandbox's reboot keeps a node down 3 s. It prints the wall time until
// every node is back in service beside its lower bound, ceil(100/20) rounds
// of (the pods' exit + the reboot), the most nodes rebooting at once, the
// forecast `sluice plan reboots` made before the start, and kured's pace
// from the same inputs: one node at a time, each its drain and its reboot
// (kured's --period, 1h by default, between nodes left out). The median of
// three runs is judged (targets_bench_test.go).
func BenchmarkReboots(b *testing.B) {
	const (
		nodes     = 100
		budgetPct = 20
		exit      = 5 * time.Second
		runs      = 3
	)
	downtime := kwok.DefaultRebootDowntime
	if budget := nodes * budgetPct / 100; benchTargets[rebootOut].threshold != float64(budget) {
		b.Fatalf("the target for nodes rebooting at once is %g, but the pool's budget is %d nodes", benchTargets[rebootOut].threshold, budget)
	}
	sc := newScorecard(b)
	for range b.N {
		loadStart := loadavg()
		bin := buildSluiceBinary(b)
		sb, clientset, _ := startSandbox(b)
		kube := poolClient(b, sb)
		pool := benchPool("reboot", budgetPct, time.Second)
		pool.Spec.Reboot = &v1alpha1.RebootSpec{}
		makePool(b, sb, clientset, kube, pool, nodes)
		ns := "reboot"
		objs := []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			fixture.Deployment(ns, "app", 2*nodes, fixture.NodeSelector(pool.Spec.Template.Labels), fixture.Requests("100m", "128Mi"),
				fixture.GracePeriod(30), fixture.ExitsAfter(exit.Seconds())),
			fixture.PDB(ns, "app", "app", fixture.MaxUnavailable("25%"))}
		createParallel(context.Background(), b, clientset, objs, 4)
		waitUntil(b, 5*time.Minute, "the workload running", func() bool { return readyPods(b, clientset, ns) == 2*nodes })
		waitCalm(b, 3*time.Minute)
		c := startControllerProcess(b, bin, sb.Kubeconfig(), "--providers", "kwok")
		c.waitQueueEmpty(b)
		rounds := int(math.Ceil(float64(nodes) / float64(nodes*budgetPct/100)))
		lower := time.Duration(rounds) * (exit + downtime)
		kured := time.Duration(nodes) * (exit + downtime)
		var (
			walls    []time.Duration
			rows     [][]string
			mostOut  int
			forecast time.Duration
		)
		for run := range runs {
			waitUntil(b, 5*time.Minute, "the workload running", func() bool { return readyPods(b, clientset, ns) == 2*nodes })
			r := rebootAll(b, c, clientset, pool, ns, downtime)
			walls, forecast = append(walls, r.wall), r.forecast
			mostOut = max(mostOut, r.maxOut)
			sc.add(rebootRatio, r.wall.Seconds()/lower.Seconds())
			sc.add(rebootVersusKured, kured.Seconds()/r.wall.Seconds())
			rows = append(rows, []string{fmt.Sprintf("run %d", run+1), r.wall.Round(100 * time.Millisecond).String(),
				fmt.Sprintf("%.2fx", r.wall.Seconds()/lower.Seconds()), strconv.Itoa(r.maxOut),
				r.forecast.Round(time.Second).String(), r.load})
		}
		slices.Sort(walls)
		median := walls[len(walls)/2]
		sc.add(rebootOut, float64(mostOut))
		fmt.Printf("\n# Reboots of a %d-node pool, budget %d%% for RebootRequired, pods exiting in %s, reboot down %s; %d runs on one cluster (load at start %s)\n",
			nodes, budgetPct, exit, downtime, runs, loadStart)
		printTable("", append([][]string{{"run", "wall time", "vs lower bound", "nodes rebooting at once (max)", "sluice plan reboots forecast", "load at end"}}, rows...))
		ratio := benchTargets[rebootRatio]
		printTable("", [][]string{
			{"figure", "value", "target"},
			{"median wall time", median.Round(100 * time.Millisecond).String(),
				fmt.Sprintf("%s the lower bound %s (%d rounds × (%s exit + %s down))", ratio.want(), lower, rounds, exit, downtime)},
			{"median ratio to the lower bound", fmt.Sprintf("%.2fx", median.Seconds()/lower.Seconds()), ratio.want()},
			{"kured's pace from the same inputs (one at a time, its period left out)", kured.String(),
				fmt.Sprintf("sluice %.1fx faster; %s", kured.Seconds()/median.Seconds(), sc.want(rebootVersusKured))},
			{"forecast (sluice plan reboots) over the median", fmt.Sprintf("%.2fx", forecast.Seconds()/median.Seconds()),
				"printed, not judged: the forecast gives each pod its full grace period (30s here; these pods exit after 5s), an upper bound"},
			{"nodes rebooting at once, most in any run", strconv.Itoa(mostOut), fmt.Sprintf("%s (the budget, %d%% of %d)", sc.want(rebootOut), budgetPct, nodes)},
		})
	}
	sc.judge()
}

// rebooted is one run's figures.
type rebooted struct {
	wall, forecast time.Duration
	maxOut         int
	load           string
}

// rebootAll has every node of the pool ask for a reboot, as its agent would
// report the OS's sentinel, and waits until every one is back in service:
// Ready, schedulable, on a new boot, its sentinel gone and no record left.
func rebootAll(b *testing.B, c *controllerProcess, clientset kubernetes.Interface, pool *v1alpha1.NodePool, ns string, downtime time.Duration) rebooted {
	b.Helper()
	ctx := context.Background()
	members := poolNodes(b, clientset, pool.Name)
	boots := map[string]string{}
	asked := time.Now().UTC().Format(time.RFC3339)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.AnnotationRebootRequired: asked}}})
	if err != nil {
		b.Fatal(err)
	}
	// The forecast first, from the pool as it will be once every node asks.
	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pdbs, err := clientset.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	in := rebootplan.Input{Pool: pool, Pods: pods.Items, PDBs: pdbs.Items, Downtime: downtime, Now: time.Now()}
	for i := range members {
		boots[members[i].Name] = members[i].Status.NodeInfo.BootID
		n := members[i].DeepCopy()
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[contract.AnnotationRebootRequired] = asked
		in.Members = append(in.Members, n)
	}
	f, err := rebootplan.Predict(in)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for _, n := range members {
		if _, err := clientset.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	maxOut := 0
	waitUntil(b, 15*time.Minute, "every node rebooted and back", func() bool {
		c.mustRun(b, "during the reboots")
		out, back := 0, 0
		for _, n := range poolNodes(b, clientset, pool.Name) {
			_, asks := n.Annotations[contract.AnnotationRebootRequired]
			_, recorded := n.Annotations[contract.AnnotationDisruption]
			if recorded {
				out++
			}
			if !asks && !recorded && !n.Spec.Unschedulable && nodeReady(&n) && n.Status.NodeInfo.BootID != boots[n.Name] {
				back++
			}
		}
		maxOut = max(maxOut, out)
		return back == len(members)
	})
	return rebooted{wall: time.Since(start), forecast: time.Duration(f.Total), maxOut: maxOut, load: loadavg()}
}
