package simulate

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
)

// TestFitChoosesAsPlaceDoes places the same pods, in the same order, with
// Place on one copy of a cluster of several pools and with Fit on another:
// every pod must land on the same node (or on none with both), and a
// snapshot's restore must leave Fit choosing as Place does again. Pods with
// and without a nodeSelector, some naming labels no node has, and some
// nodes cordoned.
func TestFitChoosesAsPlaceDoes(t *testing.T) {
	var all []*corev1.Node
	for i, name := range []string{"alpha", "beta", "gamma", "delta"} {
		all = append(all, fixture.AKSPool(name, 4+i, fixture.InstanceType("Standard_D4s_v5", "4", "16Gi"), fixture.MaxPods(8)).Nodes()...)
	}
	rng := rand.New(rand.NewPCG(7, 38))
	selectors := []map[string]string{nil,
		{fixture.LabelAKSAgentPool: "beta"},
		{fixture.LabelAKSAgentPool: "gamma", "kubernetes.io/os": "linux"},
		{fixture.LabelAKSAgentPool: "nowhere"},
		{"kubernetes.io/os": "linux"}}
	var pods []*corev1.Pod
	for i := range 300 {
		// A few sizes, so pods share shapes and Fit's cursors are reused.
		size := 1 + rng.IntN(4)
		p := pod(fmt.Sprintf("p%03d", i), fixture.Requests(fmt.Sprintf("%dm", 250*size), fmt.Sprintf("%dMi", 512*size)))
		p.Spec.NodeName = ""
		p.Spec.NodeSelector = selectors[rng.IntN(len(selectors))]
		pods = append(pods, p)
	}
	placed, fitted := NewCluster(all, nil), NewCluster(all, nil)
	for _, c := range []*Cluster{placed, fitted} {
		c.Cordon(all[1].Name)
		c.Cordon(all[9].Name)
	}
	landed, fits := 0, 0
	for i, p := range pods {
		if i == 150 {
			// What-ifs in between: a removal and a restore must not leave
			// Fit's index or cursors out of step with Place's.
			for _, c := range []*Cluster{placed, fitted} {
				restore := c.Snapshot()
				c.Uncordon(all[1].Name)
				c.Remove(pods[3].Namespace, pods[3].Name)
				restore()
			}
		}
		want, _ := placed.Place(p)
		got := fitted.Fit(p)
		if got != want {
			t.Fatalf("pod %d (nodeSelector %v): Fit chose %q, Place %q", i, p.Spec.NodeSelector, got, want)
		}
		if want != "" {
			landed++
		}
		if p.Spec.NodeSelector != nil {
			fits++
		}
	}
	if landed < 50 || landed == len(pods) {
		t.Fatalf("%d of %d pods landed: the cluster should take some and refuse others", landed, len(pods))
	}
	t.Logf("%d of %d pods landed, %d of them with a nodeSelector", landed, len(pods), fits)
}
