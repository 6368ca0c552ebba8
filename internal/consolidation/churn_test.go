package consolidation

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// world is a pool the test plays commands on, as the controller and the
// scheduler would: the nodes taken away go, the replacement joins, and each
// moved pod comes back as a new pod where the simulation put it.
type world struct {
	nodes []*corev1.Node
	pods  []*corev1.Pod
	made  int
}

func (w *world) apply(c *Command, now time.Time) {
	gone := map[string]bool{}
	for _, n := range c.Nodes {
		gone[n] = true
	}
	newName := ""
	if c.Replacement != nil {
		w.made++
		newName = fmt.Sprintf("new-%d", w.made)
		n := testNode(newName, c.Replacement.InstanceType, c.Replacement.Capacity)
		n.CreationTimestamp = metav1.NewTime(now)
		w.nodes = append(w.nodes, n)
	}
	to := map[string]string{}
	for _, m := range c.Moves {
		to[m.Pod] = m.To
	}
	var nodes []*corev1.Node
	for _, n := range w.nodes {
		if !gone[n.Name] {
			nodes = append(nodes, n)
		}
	}
	w.nodes = nodes
	for i, p := range w.pods {
		if !gone[p.Spec.NodeName] {
			continue
		}
		dest := to[p.Namespace+"/"+p.Name]
		if dest == NewNode {
			dest = newName
		}
		moved := p.DeepCopy()
		moved.Spec.NodeName, moved.CreationTimestamp = dest, metav1.NewTime(now)
		w.pods[i] = moved
	}
}

// TestSteadyWorkloadStopsChurningOnceConverged runs the planner every 10 s
// for 10 minutes of fake time over a steady workload, carrying out each
// command at once: after the first pass that finds nothing to do, no pass
// may find anything again.
func TestSteadyWorkloadStopsChurningOnceConverged(t *testing.T) {
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 1))
		w := &world{}
		types := []string{"Standard_D2s_v5", "Standard_D4s_v5", "Standard_D8s_v5"}
		for i := range 12 {
			name := fmt.Sprintf("n%d", i)
			w.nodes = append(w.nodes, testNode(name, types[rng.IntN(3)], v1alpha1.CapacityOnDemand))
			for j := range 1 + rng.IntN(4) {
				cpu := fmt.Sprintf("%dm", 100+rng.IntN(900))
				mem := fmt.Sprintf("%dMi", 256+rng.IntN(2048))
				w.pods = append(w.pods, testPod(fmt.Sprintf("%s-p%d", name, j), name, cpu, mem))
			}
		}
		pool := testPool()
		costBefore := Decide(Input{Pool: pool, Members: w.nodes, Nodes: w.nodes, Pods: w.pods, Now: t0}).CostPerHour
		converged, commands, after := time.Duration(-1), 0, 0
		for step := time.Duration(0); step <= 10*time.Minute; step += 10 * time.Second {
			now := t0.Add(step)
			in := input(pool, w.nodes, w.pods)
			in.Now = now
			in.Allowed = map[v1alpha1.DisruptionReason]int{v1alpha1.ReasonEmpty: 2, v1alpha1.ReasonUnderutilized: 2}
			plan := Decide(in)
			switch {
			case plan.Command != nil && converged >= 0:
				after++
				t.Errorf("seed %d: at %s, after converging at %s: %s", seed, step, converged, plan.Command)
			case plan.Command != nil:
				commands++
				w.apply(plan.Command, now)
			case converged < 0 && !recentChurn(plan):
				converged = step
			}
		}
		costAfter := Decide(Input{Pool: pool, Members: w.nodes, Nodes: w.nodes, Pods: w.pods, Now: t0.Add(time.Hour)}).CostPerHour
		if converged < 0 || commands == 0 || costAfter >= costBefore {
			t.Fatalf("seed %d: converged at %s after %d commands, $%.3f/h -> $%.3f/h; want a cheaper pool that settles", seed, converged, commands, costBefore, costAfter)
		}
		t.Logf("seed %d: %d commands, converged at %s, $%.3f/h -> $%.3f/h, %d nodes, %d disruptions after", seed, commands, converged, costBefore, costAfter, len(w.nodes), after)
	}
}

// recentChurn says whether a node waits only for consolidateAfter: the pool
// has not settled yet.
func recentChurn(p *Plan) bool {
	for _, b := range p.Blocked {
		if b.Reason == BlockedRecent {
			return true
		}
	}
	return false
}
