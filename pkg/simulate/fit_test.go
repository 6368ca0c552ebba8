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

// TestPlaceAnswersAsReadingEveryNodeDoes places pods one after another on a
// cluster that fills up, with removals, cordons and snapshots in between,
// and compares each answer with a reading of every node in order by the
// filters themselves: the first node with no failure takes the pod, and
// when none does the summary counts each node's first failure. Pods of a
// few shapes fail in a row once the pools are full, which is when Place
// reuses one reading of the nodes for the next pod alike; a change in
// between must end that.
func TestPlaceAnswersAsReadingEveryNodeDoes(t *testing.T) {
	var all []*corev1.Node
	for i, name := range []string{"alpha", "beta", "gamma"} {
		all = append(all, fixture.AKSPool(name, 3+i, fixture.InstanceType("Standard_D4s_v5", "4", "16Gi"), fixture.MaxPods(6)).Nodes()...)
	}
	rng := rand.New(rand.NewPCG(38, 7))
	selectors := []map[string]string{nil, {fixture.LabelAKSAgentPool: "beta"}, {fixture.LabelAKSAgentPool: "gamma"}}
	c := NewCluster(all, nil)
	c.Cordon(all[2].Name)
	var placed []*corev1.Pod
	fails := 0
	for i := range 400 {
		size := 1 + rng.IntN(3)
		p := pod(fmt.Sprintf("p%03d", i), fixture.Requests(fmt.Sprintf("%dm", 300*size), fmt.Sprintf("%dMi", 700*size)))
		p.Spec.NodeName = ""
		p.Spec.NodeSelector = selectors[rng.IntN(len(selectors))]
		wantNode, wantWhy := readEveryNode(c, p)
		gotNode, gotWhy := c.Place(p)
		if gotNode != wantNode || gotWhy != wantWhy {
			t.Fatalf("pod %d (%v, nodeSelector %v): Place said %q %q; reading every node says %q %q", i, p.Spec.Containers[0].Resources.Requests, p.Spec.NodeSelector, gotNode, gotWhy, wantNode, wantWhy)
		}
		if gotNode == "" {
			fails++
		} else {
			placed = append(placed, p)
		}
		switch r := rng.IntN(20); {
		case r == 0 && len(placed) > 0:
			// Room made: a pod alike that failed before may fit now.
			k := rng.IntN(len(placed))
			c.Remove(placed[k].Namespace, placed[k].Name)
			placed = append(placed[:k], placed[k+1:]...)
		case r == 1:
			c.Uncordon(all[2].Name)
		case r == 2:
			c.Cordon(all[rng.IntN(len(all))].Name)
		case r == 3 && len(placed) > 0:
			restore := c.Snapshot()
			c.Remove(placed[0].Namespace, placed[0].Name)
			c.Cordon(all[0].Name)
			if n, _ := c.Place(p); n == "" && len(readEveryNodeFits(c, p)) > 0 {
				t.Fatalf("pod %d within a snapshot: Place found no node, but %v take it", i, readEveryNodeFits(c, p))
			}
			restore()
		}
	}
	if fails < 50 {
		t.Fatalf("only %d of 400 pods failed to place: the test does not reach full pools, where Place reuses its reading", fails)
	}
}

// readEveryNode is Place by the filters alone, node after node.
func readEveryNode(c *Cluster, p *corev1.Pod) (string, string) {
	tally := map[string]int{}
	for _, name := range c.Nodes() {
		failures := c.Check(p, name)
		if len(failures) == 0 {
			return name, ""
		}
		tally[failures[0].Detail]++
	}
	return "", summarize(len(c.Nodes()), tally)
}

func readEveryNodeFits(c *Cluster, p *corev1.Pod) []string {
	var out []string
	for _, name := range c.Nodes() {
		if len(c.Check(p, name)) == 0 {
			out = append(out, name)
		}
	}
	return out
}

// TestAPodsFactsAreKeptByUIDAndNode: a cluster keeps what it learnt of a pod
// (infoOf) by the pod's UID and the node its spec names. The same pod,
// bound to a node by name, fits only there; asked again with the name
// cleared, as a drain's what-if asks, it fits anywhere: the kept facts of the
// first must not answer for the second. Pods without a UID are read afresh.
func TestAPodsFactsAreKeptByUIDAndNode(t *testing.T) {
	nodes := fixture.AKSPool("alpha", 3, fixture.InstanceType("Standard_D4s_v5", "4", "16Gi"), fixture.MaxPods(8)).Nodes()
	c := NewCluster(nodes, nil)
	p := pod("web", fixture.Requests("100m", "128Mi"))
	p.UID = "uid-web"
	p.Spec.NodeName = nodes[2].Name
	c.Cordon(nodes[0].Name)
	if got := c.Fit(p); got != nodes[2].Name {
		t.Fatalf("bound by name to %s: Fit chose %q", nodes[2].Name, got)
	}
	c.Remove(p.Namespace, p.Name)
	again := *p
	again.Spec.NodeName = ""
	if got := c.Fit(&again); got != nodes[1].Name {
		t.Fatalf("the same pod, unbound: Fit chose %q, want the first node that is not cordoned (%s)", got, nodes[1].Name)
	}
	if len(c.infos) != 2 {
		t.Errorf("%d pods' facts kept, want 2 (one per UID and node name)", len(c.infos))
	}
	anonymous := pod("anon", fixture.Requests("100m", "128Mi"))
	anonymous.Spec.NodeName = ""
	c.Fit(anonymous)
	if len(c.infos) != 2 {
		t.Errorf("%d pods' facts kept after a pod without a UID, want still 2", len(c.infos))
	}
}
