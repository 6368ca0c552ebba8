package nodepool

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// TestOnlyAMembershipChangeQueuesEveryPool: a pool's edit queues every
// other pool only when it can move nodes between pools (its selector), not
// for a budget, a limit or a status write; a pool made or deleted always
// does.
func TestOnlyAMembershipChangeQueuesEveryPool(t *testing.T) {
	pool := func(edit func(*v1alpha1.NodePool)) *v1alpha1.NodePool {
		p := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1}}
		p.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "web"}}
		edit(p)
		return p
	}
	old := pool(func(*v1alpha1.NodePool) {})
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.NodePool)
		want bool
	}{
		{"a limit", func(p *v1alpha1.NodePool) { p.Spec.Limits = &v1alpha1.Limits{Nodes: ptr.To(int32(9))} }, false},
		{"a status write", func(p *v1alpha1.NodePool) { p.Status.ObservedGeneration = 1 }, false},
		{"a selector's label", func(p *v1alpha1.NodePool) { p.Spec.NodeSelector.MatchLabels["pool"] = "api" }, true},
		{"a selector's expression", func(p *v1alpha1.NodePool) {
			p.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpExists}}
		}, true},
	} {
		if got := membershipChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: pool(tc.edit)}); got != tc.want {
			t.Errorf("%s: every pool queued = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !membershipChanged.Create(event.CreateEvent{Object: old}) || !membershipChanged.Delete(event.DeleteEvent{Object: old}) {
		t.Error("a pool made or deleted must queue every pool: the oldest pool selecting a node owns it")
	}
}

// TestCandidatesAreTheRarestLabelsNodes: a pool's members are looked for
// among the nodes carrying the rarest of its selector's labels; a selector
// of expressions only, or no index, reads every node. MembersOf then keeps
// those the whole selector and the oldest-pool rule give the pool.
func TestCandidatesAreTheRarestLabelsNodes(t *testing.T) {
	node := func(name string, l map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	all := []*corev1.Node{
		node("a1", map[string]string{"pool": "a", "os": "linux"}),
		node("a2", map[string]string{"pool": "a", "os": "linux", "zone": "1"}),
		node("b1", map[string]string{"pool": "b", "os": "linux"}),
		node("w1", map[string]string{"os": "windows"}),
	}
	byLabel := func(k, v string) ([]*corev1.Node, bool) {
		var out []*corev1.Node
		for _, n := range all {
			if n.Labels[k] == v {
				out = append(out, n)
			}
		}
		return out, true
	}
	pool := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	pool.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"os": "linux", "pool": "a"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpDoesNotExist}}}
	c := &Controller{labelled: byLabel}
	if got := nodeNames(c.candidates(pool, all)); got != "a1,a2" {
		t.Errorf("candidates = %s, want a1,a2 (pool=a, the rarer label)", got)
	}
	if got := nodeNames(MembersOf(pool, c.candidates(pool, all), []v1alpha1.NodePool{*pool})); got != "a1" {
		t.Errorf("members = %s, want a1 (a2 has a zone)", got)
	}
	exprOnly := pool.DeepCopy()
	exprOnly.Spec.NodeSelector.MatchLabels = nil
	if got := nodeNames(c.candidates(exprOnly, all)); got != "a1,a2,b1,w1" {
		t.Errorf("candidates of a selector of expressions only = %s, want every node", got)
	}
	if got := nodeNames((&Controller{}).candidates(pool, all)); got != "a1,a2,b1,w1" {
		t.Errorf("candidates without the index = %s, want every node", got)
	}
}

func nodeNames(nodes []*corev1.Node) string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// TestMembersOfEachIsMembers: the grouped reading status uses gives every
// pool the members Members does, overlapping selectors (the oldest pool
// wins) and a selector of expressions only included.
func TestMembersOfEachIsMembers(t *testing.T) {
	var nodes []corev1.Node
	for i := range 40 {
		l := map[string]string{"pool": fmt.Sprint("p", i%4), "zone": fmt.Sprint("z", i%3)}
		if i%5 == 0 {
			l["gpu"] = "yes"
		}
		nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("n", i), Labels: l}})
	}
	mk := func(name string, age int, sel metav1.LabelSelector) v1alpha1.NodePool {
		return v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(int64(1000+age), 0)}, Spec: v1alpha1.NodePoolSpec{NodeSelector: sel}}
	}
	all := []v1alpha1.NodePool{
		mk("p0", 2, metav1.LabelSelector{MatchLabels: map[string]string{"pool": "p0"}}),
		mk("p1-z1", 3, metav1.LabelSelector{MatchLabels: map[string]string{"pool": "p1", "zone": "z1"}}),
		mk("gpu", 1, metav1.LabelSelector{MatchLabels: map[string]string{"gpu": "yes"}}),
		mk("z2", 4, metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"z2"}}}}),
		mk("none", 5, metav1.LabelSelector{MatchLabels: map[string]string{"pool": "nowhere"}}),
	}
	var chosen []*v1alpha1.NodePool
	for i := range all {
		chosen = append(chosen, &all[i])
	}
	grouped := MembersOfEach(chosen, nodes, all)
	total := 0
	for _, p := range chosen {
		want, got := nodeNames(Members(p, nodes, all)), nodeNames(grouped[p.Name])
		if got != want {
			t.Errorf("pool %s: grouped members %s, Members %s", p.Name, got, want)
		}
		total += len(grouped[p.Name])
	}
	if total == 0 || len(grouped["gpu"]) == 0 {
		t.Fatalf("the pools have %d members in all, gpu %d: the case compares nothing", total, len(grouped["gpu"]))
	}
}
