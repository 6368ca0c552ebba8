package top

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// fleetOf is n nodes in 20 pools, 30 pods each, and 500 Events: the
// sandbox's 1,000-node shape.
func fleetOf(n int) Snapshot {
	s := Snapshot{Now: now, PoolsInstalled: true}
	for p := range 20 {
		name := fmt.Sprintf("pool-%02d", p)
		s.Pools = append(s.Pools, v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}},
			Template:     &v1alpha1.NodeTemplate{Image: "img-2"},
			Disruption:   &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "10%"}}},
		}})
	}
	for i := range n {
		nd := node(fmt.Sprintf("node-%04d", i), fmt.Sprintf("pool-%02d", i%20), "img-2")
		if i%10 == 0 {
			nd = node(nd.Name, nd.Labels["pool"], "img-1", claimed(nil))
		}
		s.Nodes = append(s.Nodes, nd)
		for j := range 30 {
			s.Pods = append(s.Pods, pod("ns", fmt.Sprintf("p-%d-%d", i, j), nd.Name))
		}
	}
	for i := range 500 {
		s.Events = append(s.Events, event("DrainStarted", "Node", "", fmt.Sprintf("node-%04d", i), "sluice: draining 30 pods", now.Add(-time.Duration(i)*time.Second)))
	}
	return s
}

// BenchmarkBuildAndRender is what one screen costs at 1,000 nodes: the
// pools' views (the controller's functions), the node states, and the
// lines at 160 columns. It runs on every change and once a second.
func BenchmarkBuildAndRender(b *testing.B) {
	s := fleetOf(1000)
	b.ReportAllocs()
	for b.Loop() {
		_ = Lines(Build(s), 160, "")
	}
}
