package nodepool

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/consolidation"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func TestChangesCountWhatConsolidationSees(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Unix(1, 0)}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 1}, Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 3}}
	tests := []struct {
		name     string
		old, new any
		want     bool
	}{
		{"a node's heartbeat", node, with(node, func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.Unix(99, 0) }), false},
		{"a node's images", node, with(node, func(n *corev1.Node) { n.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}} }), false},
		{"a node going NotReady", node, with(node, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }), true},
		{"a node cordoned", node, with(node, func(n *corev1.Node) { n.Spec.Unschedulable = true }), true},
		{"a node relabelled", node, with(node, func(n *corev1.Node) { n.Labels = map[string]string{"a": "c"} }), true},
		{"a pod's restart count", pod, withPod(pod, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 3}}
		}), false},
		{"a pod no longer Ready", pod, withPod(pod, func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }), true},
		{"a pod finishing", pod, withPod(pod, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), true},
		{"a budget's healthy count alone", pdb, withPDB(pdb, func(b *policyv1.PodDisruptionBudget) { b.Status.CurrentHealthy = 2 }), false},
		{"a budget allowing less", pdb, withPDB(pdb, func(b *policyv1.PodDisruptionBudget) { b.Status.DisruptionsAllowed = 0 }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Changes{}
			h := c.Handler()
			h.OnUpdate(tt.old, tt.new)
			if got := c.Seq() == 1; got != tt.want {
				t.Fatalf("counted: %v, want %v", got, tt.want)
			}
		})
	}
	c := &Changes{}
	c.Handler().OnAdd(pod, false)
	c.Handler().OnDelete(pod)
	if c.Seq() != 2 {
		t.Fatalf("an add and a delete counted %d, want 2", c.Seq())
	}
}

func TestAQuietPassIsTrustedOnlyWhileNothingItReadChanged(t *testing.T) {
	now := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	allowed := map[v1alpha1.DisruptionReason]int{v1alpha1.ReasonUnderutilized: 2, v1alpha1.ReasonEmpty: 2}
	read := poolRead{disruption: &v1alpha1.DisruptionSpec{ConsolidateAfter: "30s"}, template: &v1alpha1.NodeTemplate{Image: "img-1"}}
	in := passInputs{seq: 7, pool: read, allowed: allowed, now: now}
	lapse := now.Add(90 * time.Second)
	q := in.quietUntil(&consolidation.Plan{Blocked: []consolidation.Blocker{{Node: "a"}, {Node: "b", Until: lapse}, {Node: "c", Until: now.Add(time.Hour)}}}, 15*time.Second)
	later := func(d time.Duration, change func(*passInputs)) passInputs {
		next := passInputs{seq: 7, pool: poolRead{disruption: &v1alpha1.DisruptionSpec{ConsolidateAfter: "30s"}, template: &v1alpha1.NodeTemplate{Image: "img-1"}}, allowed: map[v1alpha1.DisruptionReason]int{v1alpha1.ReasonUnderutilized: 2, v1alpha1.ReasonEmpty: 2}, now: now.Add(d)}
		if change != nil {
			change(&next)
		}
		return next
	}
	tests := []struct {
		name string
		in   passInputs
		want bool
	}{
		{"nothing changed", later(10*time.Second, nil), true},
		{"a change counted", later(10*time.Second, func(p *passInputs) { p.seq = 8 }), false},
		{"the pool's disruption settings edited", later(10*time.Second, func(p *passInputs) { p.pool.disruption = &v1alpha1.DisruptionSpec{ConsolidateAfter: "1m"} }), false},
		{"the pool's template edited", later(10*time.Second, func(p *passInputs) { p.pool.template = &v1alpha1.NodeTemplate{Image: "img-2"} }), false},
		{"the pool annotated do-not-disrupt", later(10*time.Second, func(p *passInputs) { p.pool.annotations = map[string]string{"sluice.dev/do-not-disrupt": "true"} }), false},
		{"a budget window closing", later(10*time.Second, func(p *passInputs) { p.allowed[v1alpha1.ReasonUnderutilized] = 0 }), false},
		{"a blocker lapsing by itself", later(91*time.Second, nil), false},
		{"changes not counted", later(10*time.Second, func(p *passInputs) { p.seq = 0 }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := q.holds(tt.in); got != tt.want {
				t.Fatalf("holds = %v, want %v", got, tt.want)
			}
		})
	}
	if q := in.quietUntil(&consolidation.Plan{}, 15*time.Second); !q.holds(later(quietRecheck-time.Second, nil)) || q.holds(later(quietRecheck, nil)) {
		t.Fatalf("with no blocker lapsing, a quiet pass should be trusted for %s and no longer", quietRecheck)
	}
}

// The passes a quiet pass stands in for are first looks, which count a node
// as a candidate the validation delay before its consolidateAfter runs out
// (consolidation.Input.QualifyBy): the quiet pass is trusted until then, not
// until the blocker's own lapse. Other blockers (a do-not-disrupt's end) are
// judged at the time a pass runs, and lapse when they say.
func TestAQuietPassEndsWhenAFirstLookWouldQualifyANode(t *testing.T) {
	const lookAhead = 15 * time.Second
	now := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	in := func(d time.Duration) passInputs { return passInputs{seq: 7, now: now.Add(d)} }
	recent := consolidation.Blocker{Node: "a", Reason: consolidation.BlockedRecent, Until: now.Add(90 * time.Second)}
	guarded := consolidation.Blocker{Node: "b", Reason: consolidation.BlockedDoNotDisrupt, Until: now.Add(60 * time.Second)}
	tests := []struct {
		name    string
		blocked []consolidation.Blocker
		trusted time.Duration // holds just before, not at
	}{
		{"consolidateAfter", []consolidation.Blocker{recent}, 75 * time.Second},
		{"do-not-disrupt", []consolidation.Blocker{guarded}, 60 * time.Second},
		{"both", []consolidation.Blocker{guarded, recent}, 60 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := in(0).quietUntil(&consolidation.Plan{Blocked: tt.blocked}, lookAhead)
			if !q.holds(in(tt.trusted-time.Second)) || q.holds(in(tt.trusted)) {
				t.Fatalf("the quiet pass is trusted until %s; want until %s", q.until.Sub(now), tt.trusted)
			}
		})
	}
}

func with(n *corev1.Node, change func(*corev1.Node)) *corev1.Node {
	out := n.DeepCopy()
	change(out)
	return out
}

func withPod(p *corev1.Pod, change func(*corev1.Pod)) *corev1.Pod {
	out := p.DeepCopy()
	change(out)
	return out
}

func withPDB(b *policyv1.PodDisruptionBudget, change func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
	out := b.DeepCopy()
	change(out)
	return out
}
