package simulate

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
)

func nodes(pool fixture.Pool) []*corev1.Node { return pool.Nodes() }

func pod(name string, opts ...fixture.PodOption) *corev1.Pod {
	return fixture.Pod("ns", name, opts...)
}

func withAffinity(a *corev1.Affinity) fixture.PodOption {
	return func(t *corev1.PodTemplateSpec) { t.Spec.Affinity = a }
}

func hostPort(port int32, ip string) fixture.PodOption {
	return func(t *corev1.PodTemplateSpec) {
		t.Spec.Containers[0].Ports = append(t.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, HostIP: ip})
	}
}

func term(app, topologyKey string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: topologyKey}
}

// placeAll places pods in order and returns node name or "-" for each.
func placeAll(c *Cluster, pods ...*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		n, _ := c.Place(p)
		if n == "" {
			n = "-"
		}
		out[i] = n
	}
	return out
}

func TestResourcesAndPodCount(t *testing.T) {
	ns := nodes(fixture.AKSPool("p", 1, fixture.InstanceType("small", "1", "2Gi"), fixture.MaxPods(3)))
	c := NewCluster(ns, nil)
	big := fixture.Requests("600m", "256Mi")
	if got := placeAll(c, pod("a", big), pod("b", big)); got[0] != ns[0].Name || got[1] != "-" {
		t.Fatalf("placements %v: want the first 600m pod placed and the second refused", got)
	}
	if _, why := c.Place(pod("c", big)); why != "0/1 nodes are available: 1 Insufficient cpu." {
		t.Errorf("summary %q", why)
	}
	small := fixture.Requests("10m", "1Mi")
	got := placeAll(c, pod("d", small), pod("e", small), pod("f", small))
	if got[0] == "-" || got[1] == "-" || got[2] != "-" {
		t.Errorf("placements %v: the node holds 3 pods", got)
	}
	if f := c.Check(pod("g", small), ns[0].Name); len(f) != 1 || f[0].Detail != "Too many pods" {
		t.Errorf("failures %+v: want Too many pods", f)
	}
}

func TestInitContainersAndOverheadCount(t *testing.T) {
	ns := nodes(fixture.AKSPool("p", 1, fixture.InstanceType("small", "1", "2Gi")))
	c := NewCluster(ns, nil)
	p := pod("init", fixture.Requests("100m", "1Mi"))
	p.Spec.InitContainers = []corev1.Container{{Name: "setup", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resourceQ("2")}}}}
	if f := c.Check(p, ns[0].Name); len(f) == 0 || f[0].Detail != "Insufficient cpu" {
		t.Errorf("an init container asking 2 cpu on a 1-cpu node: failures %+v", f)
	}
}

func TestNodeFilters(t *testing.T) {
	spot := nodes(fixture.AKSPool("spot", 1, fixture.Spot()))[0]
	cordoned := nodes(fixture.AKSPool("cordoned", 1))[0]
	cordoned.Spec.Unschedulable = true
	user := nodes(fixture.AKSPool("user", 1))[0]
	c := NewCluster([]*corev1.Node{spot, cordoned, user}, nil)
	cases := []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		want string // "" fits
	}{
		{"untolerated spot taint", pod("a"), spot, "node(s) had untolerated taint {kubernetes.azure.com/scalesetpriority: spot}"},
		{"tolerated spot taint", pod("b", fixture.TolerateSpot()), spot, ""},
		{"cordoned", pod("c"), cordoned, "node(s) were unschedulable"},
		{"tolerates unschedulable", pod("d", fixture.Tolerate(corev1.TaintNodeUnschedulable)), cordoned, ""},
		{"selector mismatch", pod("e", fixture.NodeSelector(map[string]string{fixture.LabelAKSAgentPool: "other"})), user, "node(s) didn't match Pod's node affinity/selector"},
		{"selector match", pod("f", fixture.NodeSelector(map[string]string{fixture.LabelAKSAgentPool: "user"})), user, ""},
		{"required node affinity mismatch", pod("g", withAffinity(&corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: fixture.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"westus-9"}}}}}}}})),
			user, "node(s) didn't match Pod's node affinity/selector"},
		{"nodeName elsewhere", pod("h", fixture.OnNode("other")), user, "node(s) didn't match the requested node name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := c.Check(tc.pod, tc.node.Name)
			switch {
			case tc.want == "" && len(f) > 0:
				t.Errorf("want it to fit, got %+v", f)
			case tc.want != "" && (len(f) == 0 || f[0].Detail != tc.want):
				t.Errorf("failures %+v, want %q", f, tc.want)
			}
		})
	}
}

func TestHostPorts(t *testing.T) {
	ns := nodes(fixture.AKSPool("p", 1))
	c := NewCluster(ns, nil)
	got := placeAll(c,
		pod("a", hostPort(8080, "")),
		pod("b", hostPort(8080, "")),         // same port, wildcard: conflict
		pod("c", hostPort(9090, "10.0.0.1")), // another port
		pod("d", hostPort(9090, "10.0.0.2")), // same port, another address: fine
		pod("e", hostPort(9090, "")),         // wildcard over taken addresses: conflict
	)
	want := []string{ns[0].Name, "-", ns[0].Name, ns[0].Name, "-"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("placements %v, want %v", got, want)
	}
}

func TestInterPodAffinity(t *testing.T) {
	pool := nodes(fixture.AKSPool("p", 3, fixture.Zones("z1", "z2")))
	// pool[0] z1, pool[1] z2, pool[2] z1
	db := pod("db", fixture.OnNode(pool[1].Name), fixture.Label("app", "db"))
	db.Spec.NodeName = pool[1].Name
	c := NewCluster(pool, []*corev1.Pod{db})

	spreadOut := withAffinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("web", fixture.LabelHostname)}}})
	got := placeAll(c,
		pod("w1", fixture.Label("app", "web"), spreadOut), pod("w2", fixture.Label("app", "web"), spreadOut),
		pod("w3", fixture.Label("app", "web"), spreadOut), pod("w4", fixture.Label("app", "web"), spreadOut))
	if got[3] != "-" || got[0] == got[1] || got[1] == got[2] || got[0] == got[2] {
		t.Errorf("anti-affinity on hostname over 3 nodes: placements %v; want three distinct nodes, then none", got)
	}
	if _, why := c.Place(pod("w5", fixture.Label("app", "web"), spreadOut)); !strings.Contains(why, "didn't match pod anti-affinity rules") {
		t.Errorf("summary %q", why)
	}

	nearDB := withAffinity(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("db", fixture.LabelZone)}}})
	for _, n := range pool {
		f := c.Check(pod("cache", nearDB), n.Name)
		if inZ2 := n.Labels[fixture.LabelZone] == "z2"; inZ2 != (len(f) == 0) {
			t.Errorf("affinity to db's zone on %s (%s): failures %+v", n.Name, n.Labels[fixture.LabelZone], f)
		}
	}
	// The first of a self-affine group may go anywhere.
	self := withAffinity(&corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("batch", fixture.LabelZone)}}})
	if f := c.Check(pod("b1", fixture.Label("app", "batch"), self), pool[0].Name); len(f) != 0 {
		t.Errorf("first self-affine pod: %+v", f)
	}
	// Existing pods' anti-affinity keeps newcomers away (symmetry).
	loner := pod("loner", fixture.Label("app", "loner"), withAffinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("noisy", fixture.LabelHostname)}}}))
	lonerNode, _ := c.Place(loner)
	if f := c.Check(pod("noisy", fixture.Label("app", "noisy"), fixture.Requests("1m", "1Mi")), lonerNode); len(f) == 0 ||
		f[0].Detail != "node(s) didn't satisfy existing pods anti-affinity rules" {
		t.Errorf("noisy next to loner: failures %+v", f)
	}
}

func TestTopologySpread(t *testing.T) {
	zoneA := nodes(fixture.AKSPool("a", 1, fixture.Zones("za"), fixture.InstanceType("m", "2", "4Gi")))
	zoneB := nodes(fixture.AKSPool("b", 1, fixture.Zones("zb"), fixture.InstanceType("s", "1", "4Gi")))
	c := NewCluster(append(zoneA, zoneB...), nil)
	spread := func(t *corev1.PodTemplateSpec) {
		t.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: fixture.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	}
	var got []string
	for i := range 4 {
		n, _ := c.Place(pod(fmt.Sprintf("w%d", i), fixture.Label("app", "web"), fixture.Requests("500m", "1Mi"), spread))
		got = append(got, n)
	}
	inA := 0
	for _, n := range got {
		if n == zoneA[0].Name {
			inA++
		}
	}
	if inA != 2 {
		t.Fatalf("4 pods with maxSkew 1 over 2 zones: %v; want 2 per zone", got)
	}
	// Zone b (1 cpu) is now full: one more fits in a (skew 1), the next fits nowhere.
	if n, _ := c.Place(pod("w4", fixture.Label("app", "web"), fixture.Requests("500m", "1Mi"), spread)); n != zoneA[0].Name {
		t.Fatalf("5th pod went to %q; want zone a", n)
	}
	_, why := c.Place(pod("w5", fixture.Label("app", "web"), fixture.Requests("500m", "1Mi"), spread))
	if !strings.Contains(why, "didn't match pod topology spread constraints") || !strings.Contains(why, "Insufficient cpu") {
		t.Errorf("6th pod: %q; want spread refused in zone a and cpu in zone b", why)
	}
	// minDomains larger than the domains there are makes the minimum 0.
	strict := func(t *corev1.PodTemplateSpec) {
		spread(t)
		t.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](3)
		t.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app"] = "api"
	}
	c2 := NewCluster(append(nodes(fixture.AKSPool("c", 1, fixture.Zones("zc"))), nodes(fixture.AKSPool("d", 1, fixture.Zones("zd")))...), nil)
	placed := placeAll(c2, pod("a1", fixture.Label("app", "api"), strict), pod("a2", fixture.Label("app", "api"), strict), pod("a3", fixture.Label("app", "api"), strict))
	if placed[2] != "-" {
		t.Errorf("minDomains 3 over 2 zones, maxSkew 1: placements %v; want the third refused", placed)
	}
}

func resourceQ(s string) resourceQuantity { return mustParse(s) }
