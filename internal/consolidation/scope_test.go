package consolidation

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/simulate"
)

// scopeCluster is three pools of two D4s_v5 nodes, one per zone, each pool's pods
// selecting their pool and half full, so a pass has work; another's node
// holds a pod with a required zone-wide anti-affinity against the pool's
// pods.
func scopeCluster() (members, all []*corev1.Node, pods []*corev1.Pod) {
	for _, pool := range []string{"a", "b", "c"} {
		for i := range 2 {
			n := testNode(fmt.Sprintf("%s-%d", pool, i), "Standard_D4s_v5", v1alpha1.CapacityOnDemand)
			n.Labels["pool"], n.Labels[provider.LabelNodePool], n.Labels[corev1.LabelTopologyZone] = pool, pool, fmt.Sprintf("z%d", i%2)
			all = append(all, n)
			if pool == "a" {
				members = append(members, n)
			}
			// Pool a: a full node in zone z0 and a nearly empty one in z1,
			// whose pod may not move to z0.
			count, cpu := 3, "500m"
			if pool == "a" && i == 0 {
				cpu = "1000m"
			} else if pool == "a" {
				count = 1
			}
			for j := range count {
				pods = append(pods, testPod(fmt.Sprintf("%s-%d-%d", pool, i, j), n.Name, cpu, "1Gi", func(p *corev1.Pod) {
					p.Spec.NodeSelector = map[string]string{"pool": pool}
					p.Labels = map[string]string{"app": "web-" + pool}
				}))
			}
		}
	}
	// On pool c's node in zone z0: no web-a pod may share its zone.
	pods = append(pods, testPod("guard", "c-0", "100m", "128Mi", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"pool": "c"}
		p.Labels = map[string]string{"app": "guard"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-a"}}}}}}
	}))
	return members, all, pods
}

func podsOnFrom(pods []*corev1.Pod) func(string) ([]*corev1.Pod, error) {
	return func(node string) ([]*corev1.Pod, error) {
		var out []*corev1.Pod
		for _, p := range pods {
			if p.Spec.NodeName == node {
				out = append(out, p)
			}
		}
		return out, nil
	}
}

func names(nodes []*corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

func TestScopeKeepsWhatAPassOverThePoolCanSee(t *testing.T) {
	members, all, pods := scopeCluster()
	nodes, scoped, err := Scope(members, all, podsOnFrom(pods))
	if err != nil {
		t.Fatal(err)
	}
	// Pool a's nodes, and the node whose pod's anti-affinity reaches across
	// the zone; not pool b's, nor pool c's other nodes.
	if got, want := names(nodes), []string{"a-0", "a-1", "c-0"}; !slices.Equal(got, want) {
		t.Fatalf("scope = %v, want %v", got, want)
	}
	if len(scoped) != 3+1+3+1 {
		t.Fatalf("scope holds %d pods, want the 8 on its nodes", len(scoped))
	}

	// The pass over the scope decides as the pass over the whole cluster.
	pool := testPool(func(p *v1alpha1.NodePool) { p.Name = "a"; p.Spec.Template.Labels = map[string]string{"pool": "a"} })
	whole := input(pool, members, pods)
	whole.Nodes = all
	part := whole
	part.Nodes, part.Pods = nodes, scoped
	want, got := Decide(whole), Decide(part)
	if want.Command == nil {
		t.Fatal("the whole cluster's pass found nothing: the test needs a pool with work")
	}
	if got.Command == nil || got.Command.Key() != want.Command.Key() || fmt.Sprint(got.Command.Moves) != fmt.Sprint(want.Command.Moves) {
		t.Fatalf("over the scope: %v\nover the whole cluster: %v", got.Command, want.Command)
	}

	// A pod that may go anywhere makes the scope the whole cluster.
	pods[0].Spec.NodeSelector = nil
	if nodes, _, _ := Scope(members, all, podsOnFrom(pods)); len(nodes) != len(all) {
		t.Fatalf("with a pod free to go anywhere the scope is %v, want every node", names(nodes))
	}
}

// TestScopeWithAnIndexReadsOnlyTheNodesItKeeps: told which nodes hold
// inter-pod terms (the controller's index), the scope is Scope's, and the
// pods of a node out of it are never read.
func TestScopeWithAnIndexReadsOnlyTheNodesItKeeps(t *testing.T) {
	members, all, pods := scopeCluster()
	want, wantPods, err := Scope(members, all, podsOnFrom(pods))
	if err != nil {
		t.Fatal(err)
	}
	holding := map[string]bool{}
	for _, p := range pods {
		if simulate.HasRequiredPodAffinity(p) {
			holding[p.Spec.NodeName] = true
		}
	}
	read := map[string]bool{}
	podsOn := func(node string) ([]*corev1.Pod, error) {
		read[node] = true
		return podsOnFrom(pods)(node)
	}
	got, gotPods, err := ScopeWith(members, all, podsOn, func(node string) (bool, error) { return holding[node], nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names(got), names(want)) || len(gotPods) != len(wantPods) {
		t.Fatalf("with the index: %v (%d pods), without: %v (%d pods)", names(got), len(gotPods), names(want), len(wantPods))
	}
	for _, n := range all {
		if read[n.Name] && !slices.Contains(names(got), n.Name) {
			t.Errorf("node %s is out of the scope, and its pods were read", n.Name)
		}
	}
}
