package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/doctor"
)

// BenchmarkDoctor runs `sluice doctor` over a whole cluster, from objects
// built in memory (Diagnose is a pure function of the listed objects, so no
// control plane is needed): nodes in three pools spread over three zones,
// 30 pods a node from Deployments of 100 replicas, each with a budget.
// The room check dominates: every node's pods are replayed onto the rest.
// The 1,000-node size, which its target is for (targets_bench_test.go), is
// timed three times and judged by the median.
// SLUICE_DOCTOR_BENCH_NODES picks the sizes (default "100,200,400,1000").
func BenchmarkDoctor(b *testing.B) {
	const judged, runs = 1000, 3
	sizes := []int{100, 200, 400, 1000}
	if env := os.Getenv("SLUICE_DOCTOR_BENCH_NODES"); env != "" {
		sizes = nil
		for _, s := range strings.Split(env, ",") {
			n, err := strconv.Atoi(s)
			if err != nil {
				b.Fatalf("SLUICE_DOCTOR_BENCH_NODES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	sc := newScorecard(b)
	for range b.N {
		rows := [][]string{{"nodes", "pods", "budgets", "findings", "time", "target"}}
		for _, n := range sizes {
			in := doctorCluster(n)
			times := 1
			if n == judged {
				times = runs
			}
			var took []float64
			var r doctor.Report
			for range times {
				start := time.Now()
				r = doctor.Diagnose(in)
				took = append(took, time.Since(start).Seconds())
			}
			shown, target := fmt.Sprintf("%.2fs", took[0]), "-"
			if n == judged {
				shown = fmt.Sprintf("%.2fs (median of %d)", median(took), runs)
				target = sc.want(doctorThousandNodes)
				sc.add(doctorThousandNodes, took...)
				b.ReportMetric(median(took), "doctor-1000-s")
			}
			rows = append(rows, []string{strconv.Itoa(n), strconv.Itoa(len(in.Pods)), strconv.Itoa(len(in.PDBs)),
				strconv.Itoa(len(r.Findings)), shown, target})
		}
		printTable("sluice doctor over a whole cluster (30 pods a node, Deployments of 100 with budgets)", rows)
	}
	if !slices.Contains(sizes, judged) {
		sc.skip(doctorThousandNodes, "SLUICE_DOCTOR_BENCH_NODES has no 1000")
	}
	sc.judge()
}

// doctorCluster is a cluster of n nodes and 30 pods a node: n*30/100
// Deployments of 100 replicas, pod i on node i mod n, so replicas of one
// Deployment sit on distinct nodes. One Deployment in ten keeps its replicas
// on distinct hosts (required anti-affinity), one in ten spreads evenly over
// zones, one in fifty has a budget that can never allow an eviction.
func doctorCluster(n int) doctor.Input {
	in := doctor.Input{Now: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
	zones := fixture.Zones("zone-a", "zone-b", "zone-c")
	size := fixture.InstanceType("Standard_D16s_v5", "16", "64Gi")
	pools := []fixture.Pool{
		fixture.AKSPool("user", n-2*(n/3), zones, size, fixture.MaxPods(110)),
		fixture.EKSNodeGroup("ng", n/3, zones, size, fixture.MaxPods(110)),
		fixture.KarpenterPool("kp", n/3, zones, size, fixture.MaxPods(110)),
	}
	for _, p := range pools {
		for _, node := range p.Nodes() {
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			in.Nodes = append(in.Nodes, *node)
		}
	}
	const replicas = 100
	for w := range n * 30 / replicas {
		app := fmt.Sprintf("app%04d", w)
		hash := fmt.Sprintf("%08x", w*2654435761%(1<<32))
		opts := []fixture.PodOption{fixture.Label("pod-template-hash", hash),
			fixture.Requests(fmt.Sprintf("%dm", 100+(w%5)*100), fmt.Sprintf("%dMi", 128*(1+w%4)))}
		selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
		switch w % 10 {
		case 3:
			opts = append(opts, func(t *corev1.PodTemplateSpec) {
				t.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: selector, TopologyKey: fixture.LabelHostname}}}}
			})
		case 7:
			opts = append(opts, func(t *corev1.PodTemplateSpec) {
				t.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: fixture.LabelZone,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: selector}}
			})
		}
		rs := app + "-" + hash
		for r := range replicas {
			i := w*replicas + r
			p := fixture.Pod("shop", fmt.Sprintf("%s-%05d", rs, r), append(opts, fixture.Label("app", app))...)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: "rs", Controller: ptr.To(true)}}
			p.Spec.NodeName = in.Nodes[i%n].Name
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			in.Pods = append(in.Pods, *p)
		}
		pdb := fixture.PDB("shop", app, app, fixture.MaxUnavailable("10%"))
		desired := int32(replicas - 10)
		if w%50 == 0 {
			pdb = fixture.PDB("shop", app, app, fixture.MinAvailable("100%"))
			desired = replicas
		}
		pdb.Generation = 1
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: replicas, CurrentHealthy: replicas,
			DesiredHealthy: desired, DisruptionsAllowed: replicas - desired}
		in.PDBs = append(in.PDBs, *pdb)
	}
	in.DaemonSets = []appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "node-exporter"}}}
	return in
}
