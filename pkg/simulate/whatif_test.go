package simulate

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
)

// on binds a pod to a node, as the listed pods of a cluster are.
func on(p *corev1.Pod, node *corev1.Node) *corev1.Pod {
	p.Spec.NodeName = node.Name
	return p
}

func antiOn(app, key string) fixture.PodOption {
	return withAffinity(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term(app, key)}}})
}

func spreadOver(app, key string) fixture.PodOption {
	return func(t *corev1.PodTemplateSpec) {
		t.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: key,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	}
}

// Whatever a pod held on its node, removing it gives it back.
func TestRemoveFreesWhatThePodHeld(t *testing.T) {
	small := fixture.InstanceType("small", "1", "2Gi")
	for _, tc := range []struct {
		name   string
		pool   fixture.Pool
		held   func(n []*corev1.Node) []*corev1.Pod // the first is removed
		probe  *corev1.Pod
		before string // the probe's first failure on node 0 while the pod is there
	}{
		{"cpu", fixture.AKSPool("p", 1, small),
			func(n []*corev1.Node) []*corev1.Pod {
				return []*corev1.Pod{on(pod("big", fixture.Requests("800m", "1Mi")), n[0])}
			},
			pod("probe", fixture.Requests("500m", "1Mi")), "Insufficient cpu"},
		{"pod count", fixture.AKSPool("p", 1, fixture.MaxPods(1)),
			func(n []*corev1.Node) []*corev1.Pod { return []*corev1.Pod{on(pod("only"), n[0])} },
			pod("probe"), "Too many pods"},
		{"host port", fixture.AKSPool("p", 1),
			func(n []*corev1.Node) []*corev1.Pod {
				return []*corev1.Pod{on(pod("a", hostPort(80, "")), n[0]), on(pod("b", hostPort(81, "")), n[0])}
			},
			pod("probe", hostPort(80, "")), "node(s) didn't have free ports for the requested pod ports"},
		{"its anti-affinity repels the probe", fixture.AKSPool("p", 1),
			func(n []*corev1.Node) []*corev1.Pod {
				return []*corev1.Pod{on(pod("loner", antiOn("noisy", fixture.LabelHostname)), n[0])}
			},
			pod("probe", fixture.Label("app", "noisy")), "node(s) didn't satisfy existing pods anti-affinity rules"},
		{"the probe's anti-affinity shuns it", fixture.AKSPool("p", 2, fixture.Zones("z1")),
			func(n []*corev1.Node) []*corev1.Pod {
				return []*corev1.Pod{on(pod("web-1", fixture.Label("app", "web")), n[1])}
			},
			pod("probe", fixture.Label("app", "web"), antiOn("web", fixture.LabelZone)), "node(s) didn't match pod anti-affinity rules"},
		{"spread", fixture.AKSPool("p", 2, fixture.Zones("z1", "z2")),
			func(n []*corev1.Node) []*corev1.Pod {
				return []*corev1.Pod{on(pod("web-0", fixture.Label("app", "web")), n[0]), on(pod("web-1", fixture.Label("app", "web")), n[0]),
					on(pod("web-2", fixture.Label("app", "web")), n[1])}
			},
			pod("probe", fixture.Label("app", "web"), spreadOver("web", fixture.LabelZone)), "node(s) didn't match pod topology spread constraints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.pool.Nodes()
			held := tc.held(ns)
			c := NewCluster(ns, held)
			// Ask first, so indexes exist and must be kept current.
			if f := c.Check(tc.probe, ns[0].Name); len(f) == 0 || f[0].Detail != tc.before {
				t.Fatalf("before: failures %+v, want %q", f, tc.before)
			}
			if !c.Remove(held[0].Namespace, held[0].Name) {
				t.Fatalf("Remove: the cluster does not hold %s", held[0].Name)
			}
			if f := c.Check(tc.probe, ns[0].Name); len(f) != 0 {
				t.Errorf("after Remove: failures %+v, want none", f)
			}
			if c.Remove(held[0].Namespace, held[0].Name) {
				t.Errorf("Remove twice: want false the second time")
			}
		})
	}
}

func TestCordonClosesTheNodeNotTheObject(t *testing.T) {
	ns := fixture.AKSPool("p", 1).Nodes()
	c := NewCluster(ns, nil)
	if !c.Cordon(ns[0].Name) || c.Cordon("nowhere") {
		t.Fatalf("Cordon: want true for the node, false for an unknown one")
	}
	if f := c.Check(pod("a"), ns[0].Name); len(f) != 1 || f[0].Reason != ReasonUnschedulable {
		t.Errorf("cordoned: failures %+v", f)
	}
	if f := c.Check(pod("b", fixture.Tolerate(corev1.TaintNodeUnschedulable)), ns[0].Name); len(f) != 0 {
		t.Errorf("a pod tolerating the cordon: failures %+v", f)
	}
	if ns[0].Spec.Unschedulable {
		t.Errorf("Cordon changed the caller's Node")
	}
}

// A placement that failed only because a node was cordoned must not keep the
// node out once the cordon is undone.
func TestUndoneCordonReopensTheNode(t *testing.T) {
	ns := fixture.AKSPool("p", 1).Nodes()
	c := NewCluster(ns, nil)
	restore := c.Snapshot()
	c.Cordon(ns[0].Name)
	if n, _ := c.Place(pod("a")); n != "" {
		t.Fatalf("placed on the cordoned node %s", n)
	}
	restore()
	if n, why := c.Place(pod("b")); n != ns[0].Name {
		t.Errorf("after the cordon is undone: %q (%s), want %s", n, why, ns[0].Name)
	}
}

// A cluster put back by a snapshot answers every later question as one that
// never changed: same placements, same reasons.
func TestSnapshotRestoresTheCluster(t *testing.T) {
	build := func() (*Cluster, []*corev1.Node) {
		ns := fixture.AKSPool("p", 4, fixture.Zones("z1", "z2"), fixture.InstanceType("m", "2", "4Gi")).Nodes()
		var pods []*corev1.Pod
		for i, n := range ns {
			pods = append(pods,
				on(pod(fmt.Sprintf("web-%d", i), fixture.Label("app", "web"), fixture.Requests("500m", "256Mi"), antiOn("web", fixture.LabelHostname)), n),
				on(pod(fmt.Sprintf("api-%d", i), fixture.Label("app", "api"), fixture.Requests("700m", "256Mi"), spreadOver("api", fixture.LabelZone)), n),
				on(pod(fmt.Sprintf("agent-%d", i), hostPort(9100, "")), n))
		}
		return NewCluster(ns, pods), ns
	}
	probes := func() []*corev1.Pod {
		return []*corev1.Pod{
			pod("web-x", fixture.Label("app", "web"), fixture.Requests("500m", "256Mi"), antiOn("web", fixture.LabelHostname)),
			pod("api-x", fixture.Label("app", "api"), fixture.Requests("700m", "256Mi"), spreadOver("api", fixture.LabelZone)),
			pod("agent-x", hostPort(9100, "")),
			pod("fill-1", fixture.Requests("600m", "1Mi")), pod("fill-2", fixture.Requests("600m", "1Mi")),
			pod("fill-3", fixture.Requests("600m", "1Mi")), pod("fill-4", fixture.Requests("600m", "1Mi")),
			pod("fill-5", fixture.Requests("600m", "1Mi")),
		}
	}
	answers := func(c *Cluster) []string {
		var out []string
		for _, p := range probes() {
			n, why := c.Place(p)
			out = append(out, n+why)
		}
		return out
	}

	fresh, _ := build()
	want := answers(fresh)
	c, ns := build()
	// Ask once so cursors and indexes exist before the snapshot, then undo
	// those placements too.
	outer := c.Snapshot()
	answers(c)
	inner := c.Snapshot()
	c.Cordon(ns[0].Name)
	for _, name := range []string{"web-0", "api-0", "agent-0"} {
		c.Remove("ns", name)
	}
	for _, p := range probes()[:3] {
		c.Place(p)
	}
	inner()
	c.Remove("ns", "web-3")
	outer()
	outer() // a second restore does nothing
	if got := answers(c); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after restore:\n%v\nwant, as on a fresh cluster:\n%v", got, want)
	}
}
