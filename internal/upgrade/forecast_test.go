package upgrade

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func node(name, image string, age time.Duration) corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "p"}, CreationTimestamp: metav1.NewTime(now.Add(-age)),
		Annotations: map[string]string{contract.AnnotationImage: image}},
		Status: corev1.NodeStatus{Allocatable: res, Capacity: res, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func pod(name, app, node string, grace int64) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": app},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To(grace),
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

func pdb(app string, minAvailable intstr.IntOrString, expected, healthy, allowed int32) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: app, Generation: 1},
		Spec:   policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: expected, CurrentHealthy: healthy, DesiredHealthy: expected - allowed, DisruptionsAllowed: allowed}}
}

func input(nodes []corev1.Node, pods []corev1.Pod, pdbs []policyv1.PodDisruptionBudget, u v1alpha1.UpgradeSpec, budget string) Input {
	pool := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.NodePoolSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "p"}}, Upgrade: &u,
		Disruption: &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: budget}}}}}
	in := Input{Pool: pool, Nodes: nodes, Pods: pods, PDBs: pdbs, Image: "img-2", Boot: 10 * time.Second, Now: now}
	for i := range nodes {
		in.Members = append(in.Members, &nodes[i])
	}
	return in
}

// Four nodes, maxSurge 2: two batches, oldest first. Each batch's four pods
// of one budget allowing 2 go in two waves: one wave's readiness wait, then
// the last pods' 30 s grace.
func TestPredictTimesBatchesByBudgetWaves(t *testing.T) {
	var nodes []corev1.Node
	var pods []corev1.Pod
	for i := range 4 {
		n := fmt.Sprintf("n%d", i)
		nodes = append(nodes, node(n, "img-1", time.Duration(10-i)*time.Hour))
		pods = append(pods, pod(n+"-a", "web", n, 30), pod(n+"-b", "web", n, 30))
	}
	f, err := Predict(input(nodes, pods, []policyv1.PodDisruptionBudget{pdb("web", intstr.FromInt32(6), 8, 8, 2)},
		v1alpha1.UpgradeSpec{MaxSurge: ptr.To(intstr.FromInt32(2)), NodeSoakDuration: &metav1.Duration{Duration: 5 * time.Second}}, "100%"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Batches) != 2 || strings.Join(f.Batches[0].Nodes, ",") != "n0,n1" || len(f.Blockers) != 0 {
		t.Fatalf("forecast %+v; want 2 batches, n0 and n1 first, no blockers", f)
	}
	b := f.Batches[0]
	wantDrain := (podStart + evictionLag) + 30*time.Second + evictionLag // 2 waves: one wait, then the grace
	if b.Drain != wantDrain || b.Boot != 10*time.Second+registration || b.Total != b.Boot+b.Drain+5*time.Second+deletion {
		t.Errorf("batch %+v; want drain %s", b, wantDrain)
	}
	if f.Total != 2*b.Total {
		t.Errorf("total %s; want two batches of %s", f.Total, b.Total)
	}
}

// A budget that can never allow holds one node's pod: that node is named,
// with what the upgrade will do, and its batch costs the drainTimeout; a
// do-not-disrupt node is named and never chosen. A budget for Upgrade
// smaller than maxSurge sizes the batches, and says so.
func TestPredictNamesBlockersAndTheBindingBudget(t *testing.T) {
	nodes := []corev1.Node{node("old", "img-1", 3*time.Hour), node("held", "img-1", 2*time.Hour), node("young", "img-1", time.Hour), node("new", "img-2", time.Hour)}
	nodes[1].Annotations[contract.AnnotationDoNotDisrupt] = "true"
	pods := []corev1.Pod{pod("db-0", "db", "old", 10)}
	f, err := Predict(input(nodes, pods, []policyv1.PodDisruptionBudget{pdb("db", intstr.FromInt32(1), 1, 1, 0)},
		v1alpha1.UpgradeSpec{MaxSurge: ptr.To(intstr.FromInt32(3)), DrainTimeout: &metav1.Duration{Duration: time.Minute}, UndrainableNodeBehavior: v1alpha1.UndrainableCordon}, "1"))
	if err != nil {
		t.Fatal(err)
	}
	if f.BatchSize != 1 || !strings.Contains(f.CappedBy, "nodes 1") {
		t.Errorf("batch size %d capped by %q; want 1, by the budget of 1 node", f.BatchSize, f.CappedBy)
	}
	got := map[string]Blocker{}
	for _, b := range f.Blockers {
		got[b.Node] = b
	}
	if b := got["old"]; b.Reason != "PDBDeadlock" || b.Outcome != "Cordon after drainTimeout 1m0s" {
		t.Errorf("blocker of old: %+v; want a PDB deadlock, then Cordon", b)
	}
	if b := got["held"]; b.Reason != "NodeDoNotDisrupt" || !strings.HasPrefix(b.Outcome, "wait") {
		t.Errorf("blocker of held: %+v; want do-not-disrupt, never chosen", b)
	}
	if len(f.Nodes) != 3 || len(f.Batches) != 2 || f.Batches[0].Drain != time.Minute {
		t.Errorf("nodes %v, batches %+v; want old and young timed (held never chosen), old's batch costing the 1m drainTimeout", f.Nodes, f.Batches)
	}
}

// Boot times sluice noted on the pool's nodes (sluice.dev/boot-time) win
// over the provider's setting: their median is each batch's boot, and the
// forecast says where it came from. A value that is not a duration is
// skipped.
func TestPredictUsesObservedBootTimes(t *testing.T) {
	var nodes []corev1.Node
	for i, boot := range []string{"40s", "25s", "1m", "not a duration"} {
		n := node(fmt.Sprintf("n%d", i), "img-1", time.Duration(10-i)*time.Hour)
		n.Annotations[contract.AnnotationBootTime] = boot
		nodes = append(nodes, n)
	}
	f, err := Predict(input(nodes, nil, nil, v1alpha1.UpgradeSpec{MaxSurge: ptr.To(intstr.FromInt32(2))}, "100%"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Batches) != 2 || f.Batches[0].Boot != 40*time.Second {
		t.Fatalf("batches %+v; want 2, each booting in 40s (the median of 25s, 40s, 1m)", f.Batches)
	}
	if !strings.Contains(f.Assumptions[0], "median of the 3 boot time(s)") {
		t.Errorf("assumption %q does not say the boot time was observed", f.Assumptions[0])
	}
	f, err = Predict(input(nodes[3:], nil, nil, v1alpha1.UpgradeSpec{MaxSurge: ptr.To(intstr.FromInt32(2))}, "100%"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Batches[0].Boot != 10*time.Second+registration || !strings.Contains(f.Assumptions[0], "no boot observed") {
		t.Errorf("with nothing observed: boot %s, assumption %q; want the provider's 10s + registration", f.Batches[0].Boot, f.Assumptions[0])
	}
}

// The rollout is timed as the controller runs it: a place in flight takes
// the next node as soon as its node is gone, so a node that cannot drain
// holds only its own place for its boot and drainTimeout while the others
// go on; a pod its budget never lets go makes no wave of the drain.
func TestPredictSchedulesEachPlaceAsItFrees(t *testing.T) {
	const boot = 10*time.Second + registration
	wave := podStart + evictionLag // a wave's wait for the last one's replacements
	for _, c := range []struct {
		name    string
		stuck   bool // n0 holds the only pod of a budget that never allows (grace 60 s)
		starts  []time.Duration
		batches []string
		total   time.Duration
		givenUp time.Duration // when n0 is given up; 0: not a blocker
	}{{
		name:    "every node drains: batches of two, each after the last",
		starts:  []time.Duration{0, boot + wave + 10*time.Second + evictionLag + deletion},
		batches: []string{"n0,n1", "n2,n3"},
		total:   2 * (boot + wave + 10*time.Second + evictionLag + deletion),
	}, {
		// n0 and n1's four web pods go in two waves, n0's db pod in none;
		// n1's place then takes n2, and n3 after it, while n0 waits out its
		// drainTimeout.
		name:    "n0 cannot drain: it holds one place, n1's takes n2 and n3",
		stuck:   true,
		starts:  []time.Duration{0, boot + wave + 10*time.Second + evictionLag + deletion, 2*boot + wave + 2*(10*time.Second+evictionLag+deletion)},
		batches: []string{"n0,n1", "n2", "n3"},
		total:   boot + time.Minute + deletion,
		givenUp: boot + time.Minute,
	}} {
		t.Run(c.name, func(t *testing.T) {
			var nodes []corev1.Node
			var pods []corev1.Pod
			for i := range 4 {
				n := fmt.Sprintf("n%d", i)
				nodes = append(nodes, node(n, "img-1", time.Duration(10-i)*time.Hour))
				pods = append(pods, pod(n+"-a", "web", n, 10), pod(n+"-b", "web", n, 10))
			}
			pdbs := []policyv1.PodDisruptionBudget{pdb("web", intstr.FromInt32(6), 8, 8, 2)}
			if c.stuck {
				pods = append(pods, pod("db-0", "db", "n0", 60))
				pdbs = append(pdbs, pdb("db", intstr.FromInt32(1), 1, 1, 0))
			}
			f, err := Predict(input(nodes, pods, pdbs, v1alpha1.UpgradeSpec{MaxSurge: ptr.To(intstr.FromInt32(2)),
				DrainTimeout: &metav1.Duration{Duration: time.Minute}}, "100%"))
			if err != nil {
				t.Fatal(err)
			}
			var starts []time.Duration
			var batches []string
			for _, b := range f.Batches {
				starts, batches = append(starts, b.Start), append(batches, strings.Join(b.Nodes, ","))
			}
			if !slices.Equal(starts, c.starts) || !slices.Equal(batches, c.batches) || f.Total != c.total {
				t.Errorf("batches %v starting at %v, total %s; want %v at %v, total %s", batches, starts, f.Total, c.batches, c.starts, c.total)
			}
			var at time.Duration
			for _, b := range f.Blockers {
				if b.Node == "n0" {
					at = b.At
				}
			}
			if at != c.givenUp || len(f.Blockers) != map[bool]int{false: 0, true: 1}[c.stuck] {
				t.Errorf("blockers %+v; want n0 given up at %s", f.Blockers, c.givenUp)
			}
		})
	}
}
