package bench

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/simulate"
)

// BenchmarkSimulatePlacement places 30,000 pods on 1,000 nodes with the
// placement simulation doctor and consolidation use: 300 workloads of 100
// replicas with varied requests; one in ten keeps its replicas on distinct
// hosts (required anti-affinity), one in ten spreads evenly over zones (hard
// topology spread). Each iteration places them three times and judges the
// median against its target (targets_bench_test.go).
func BenchmarkSimulatePlacement(b *testing.B) {
	const runs = 3
	var nodes []*corev1.Node
	for i := range 10 {
		p := fixture.AKSPool(fmt.Sprintf("pool%d", i), 100, fixture.InstanceType("Standard_D16s_v5", "16", "64Gi"), fixture.MaxPods(110))
		nodes = append(nodes, p.Nodes()...)
	}
	var pods []*corev1.Pod
	for w := range 300 {
		app := fmt.Sprintf("app%03d", w)
		opts := []fixture.PodOption{fixture.Label("app", app), fixture.Requests(fmt.Sprintf("%dm", 100+(w%5)*100), fmt.Sprintf("%dMi", 128*(1+w%4)))}
		switch w % 10 {
		case 3:
			opts = append(opts, func(t *corev1.PodTemplateSpec) {
				t.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: fixture.LabelHostname}}}}
			})
		case 7:
			opts = append(opts, func(t *corev1.PodTemplateSpec) {
				t.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: fixture.LabelZone,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
			})
		}
		for r := range 100 {
			pods = append(pods, fixture.Pod("default", fmt.Sprintf("%s-%d", app, r), opts...))
		}
	}
	sc := newScorecard(b)
	b.ResetTimer()
	for range b.N {
		var took []float64
		placed := 0
		for range runs {
			start := time.Now()
			c := simulate.NewCluster(nodes, nil)
			placed = 0
			for _, p := range pods {
				if n, _ := c.Place(p); n != "" {
					placed++
				}
			}
			took = append(took, time.Since(start).Seconds())
		}
		med := median(took)
		sc.add(placeThirtyThousandPods, took...)
		b.ReportMetric(med, "place-s")
		b.ReportMetric(float64(placed), "placed")
		printTable(fmt.Sprintf("placement simulation: 30,000 pods onto 1,000 nodes, median of %d runs", runs), [][]string{
			{"pods placed", "time", "pods/s", "target"},
			{fmt.Sprintf("%d/%d", placed, len(pods)), fmt.Sprintf("%.2fs", med), fmt.Sprintf("%.0f", float64(placed)/med), sc.want(placeThirtyThousandPods)},
		})
	}
	sc.judge()
}
