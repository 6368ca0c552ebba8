package bench

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
)

// The planned scale-down keeps exactly its plan's pods per node and each
// Deployment's share, whatever mix of Deployments the scheduler put where.
func TestPlannedScaleDownKeepsThePlannedLayout(t *testing.T) {
	const left = sideNodes * sidePerNode / sideDeployments * (100 - sideScaleDown) / 100
	keep := keepPlan(sideNodes, sidePerNode, left*sideDeployments)
	if again := keepPlan(sideNodes, sidePerNode, left*sideDeployments); fmt.Sprint(again) != fmt.Sprint(keep) {
		t.Fatalf("two draws differ: %v and %v", keep, again)
	}
	for seed := range uint64(200) {
		// A scheduler's mix: the Deployments' replicas shuffled over the slots.
		r := rand.New(rand.NewPCG(seed, 1))
		apps := make([]string, 0, sideNodes*sidePerNode)
		for d := range sideDeployments {
			for range sideNodes * sidePerNode / sideDeployments {
				apps = append(apps, fmt.Sprintf("app%d", d))
			}
		}
		r.Shuffle(len(apps), func(i, j int) { apps[i], apps[j] = apps[j], apps[i] })
		nodes := make([]string, sideNodes)
		var pods []corev1.Pod
		for i := range nodes {
			nodes[i] = fmt.Sprintf("node-%02d", i)
			for s := range sidePerNode {
				app := apps[i*sidePerNode+s]
				pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-%d", app, i, s), Labels: map[string]string{fixture.LabelApp: app}},
					Spec: corev1.PodSpec{NodeName: nodes[i]}})
			}
		}
		victims, short := chooseVictims(nodes, pods, keep, left)
		gone := map[string]bool{}
		for _, v := range victims {
			gone[v.Name] = true
		}
		perNode, perApp := map[string]int{}, map[string]int{}
		for _, p := range pods {
			if !gone[p.Name] {
				perNode[p.Spec.NodeName]++
				perApp[p.Labels[fixture.LabelApp]]++
			}
		}
		for app, n := range perApp {
			if n > left {
				t.Errorf("mix %d: %s keeps %d pods; want at most %d", seed, app, n, left)
			}
		}
		off := 0
		for i, n := range nodes {
			off += abs(perNode[n] - keep[i])
		}
		if off != short {
			t.Errorf("mix %d: %d pods off the plan, but %d reported short", seed, off, short)
		}
		if short > 0 {
			t.Errorf("mix %d: %d pods short of the plan; want it held exactly", seed, short)
		}
		if len(victims) != len(pods)-left*sideDeployments {
			t.Errorf("mix %d: %d victims; want %d", seed, len(victims), len(pods)-left*sideDeployments)
		}
	}
}

func abs(n int) int { return max(n, -n) }
