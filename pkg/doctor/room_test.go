package doctor

import (
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/simulate"
)

// Two nodes, and only one has room for the other's pods: draining the small
// one is fine, draining the big one strands its big pod. The second check
// must not see the first one's cordon or placements.
func TestRoomForTwoNodesWhereOnlyOneFits(t *testing.T) {
	big := fixture.AKSPool("big", 1, fixture.InstanceType("Standard_D8s_v5", "8", "32Gi")).Nodes()[0]
	small := fixture.AKSPool("small", 1, fixture.InstanceType("Standard_B2s", "2", "4Gi")).Nodes()[0]
	r := Diagnose(Input{
		Nodes: []corev1.Node{*big, *small},
		Pods: []corev1.Pod{
			owned("db", big.Name, fixture.Requests("3", "1Gi")),
			owned("web", small.Name, fixture.Requests("1", "1Gi")),
		},
		Now: now,
	})
	got := find(r, CodeNoRoom)
	if len(got) != 1 || got[0].Object != "pod shop/db" || got[0].Node != big.Name {
		t.Fatalf("NoRoom findings %+v: want one, for shop/db on %s", got, big.Name)
	}
	if want := "if " + big.Name + " were drained now, this pod could not be placed elsewhere: 0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable."; got[0].Message != want {
		t.Errorf("message %q\nwant %q", got[0].Message, want)
	}
}

// The once-built cluster finds what a cluster built afresh for every node
// found, on a cluster where placements depend on each other: spread, anti-
// affinity, host ports and full nodes.
func TestRoomOnOneClusterMatchesAFreshClusterPerNode(t *testing.T) {
	var nodes []corev1.Node
	for _, n := range fixture.AKSPool("p", 6, fixture.Zones("z1", "z2", "z3"), fixture.InstanceType("Standard_D2s_v5", "2", "8Gi")).Nodes() {
		nodes = append(nodes, *n)
	}
	anti := func(app, key string) fixture.PodOption {
		return func(t *corev1.PodTemplateSpec) {
			t.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: key}}}}
		}
	}
	spread := func(t *corev1.PodTemplateSpec) {
		t.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: fixture.LabelZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}}
	}
	port := func(t *corev1.PodTemplateSpec) {
		t.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}
	}
	var pods []corev1.Pod
	for i, n := range nodes {
		pods = append(pods,
			owned(fmt.Sprintf("zonal-%d", i), n.Name, fixture.Label("app", "zonal"), fixture.Requests("100m", "64Mi"), anti("zonal", fixture.LabelZone)),
			owned(fmt.Sprintf("api-%d", i), n.Name, fixture.Label("app", "api"), fixture.Requests("400m", "64Mi"), spread),
			owned(fmt.Sprintf("exporter-%d", i), n.Name, fixture.Requests("50m", "64Mi"), port),
			owned(fmt.Sprintf("fill-%d", i), n.Name, fixture.Requests(fmt.Sprintf("%dm", 300+200*i), "64Mi")),
		)
	}
	in := Input{Nodes: nodes, Pods: pods, Now: now}
	var got []string
	for _, f := range find(Diagnose(in), CodeNoRoom) {
		got = append(got, f.Node+" "+f.Object+": "+f.Message)
	}
	sort.Strings(got)
	want := roomAfresh(in)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("once-built cluster:\n%v\nfresh cluster per node:\n%v", got, want)
	}
	if len(want) == 0 || len(want) == len(pods) {
		t.Errorf("%d of %d pods without room: the cluster tests nothing", len(want), len(pods))
	}
}

// roomAfresh is the room check as doctor ran it before it kept one cluster:
// for each node, a new cluster of every node (that one cordoned) and every
// pod but that node's movable ones, which are then placed.
func roomAfresh(in Input) []string {
	classes := classifyAll(in)
	var out []string
	for _, target := range in.Nodes {
		var rest []*corev1.Node
		for i := range in.Nodes {
			n := &in.Nodes[i]
			if n.Name == target.Name {
				n = n.DeepCopy()
				n.Spec.Unschedulable = true
			}
			rest = append(rest, n)
		}
		var stay, leave []*corev1.Pod
		for i := range in.Pods {
			p := &in.Pods[i]
			switch {
			case p.Spec.NodeName == "":
			case p.Spec.NodeName == target.Name && movable(p, classes[i]):
				leave = append(leave, p)
			default:
				stay = append(stay, p)
			}
		}
		cluster := simulate.NewCluster(rest, stay)
		for _, p := range leave {
			r := p.DeepCopy()
			r.Spec.NodeName = ""
			if where, why := cluster.Place(r); where == "" {
				out = append(out, target.Name+" pod "+p.Namespace+"/"+p.Name+": if "+target.Name+" were drained now, this pod could not be placed elsewhere: "+why)
			}
		}
	}
	sort.Strings(out)
	return out
}
