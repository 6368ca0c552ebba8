package consolidation

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

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/catalog"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func testPool(edit ...func(*v1alpha1.NodePool)) *v1alpha1.NodePool {
	p := &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "pool"},
		Spec: v1alpha1.NodePoolSpec{
			Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok},
			Template: &v1alpha1.NodeTemplate{Labels: map[string]string{"pool": "yes"},
				InstanceTypes: []string{"Standard_D2s_v5", "Standard_D4s_v5", "Standard_D8s_v5"}},
			Disruption: &v1alpha1.DisruptionSpec{ConsolidateAfter: "30s"},
		},
	}
	for _, e := range edit {
		e(p)
	}
	return p
}

func testNode(name, typ string, capacity v1alpha1.CapacityType) *corev1.Node {
	ty, ok := catalog.Lookup(typ)
	if !ok {
		panic(typ)
	}
	alloc := ty.Allocatable.DeepCopy()
	alloc[corev1.ResourcePods] = resource.MustParse("110")
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			Labels: map[string]string{"pool": "yes", provider.LabelInstanceType: typ, provider.LabelCapacityType: string(capacity),
				provider.LabelNodePool: "pool", corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func testPod(name, node, cpu, mem string, edit ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", Labels: map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1", Controller: ptr.To(true), APIVersion: "apps/v1"}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, e := range edit {
		e(p)
	}
	return p
}

func input(pool *v1alpha1.NodePool, nodes []*corev1.Node, pods []*corev1.Pod) Input {
	return Input{Pool: pool, Members: nodes, Nodes: nodes, Pods: pods, Now: t0,
		Allowed: map[v1alpha1.DisruptionReason]int{v1alpha1.ReasonEmpty: 10, v1alpha1.ReasonUnderutilized: 10}}
}

func TestEmptyNodesGoFirstWithinTheBudget(t *testing.T) {
	nodes := []*corev1.Node{testNode("a", "Standard_D4s_v5", "on-demand"), testNode("b", "Standard_D8s_v5", "on-demand"),
		testNode("c", "Standard_D4s_v5", "on-demand"), testNode("busy", "Standard_D4s_v5", "on-demand")}
	pods := []*corev1.Pod{testPod("w", "busy", "3", "4Gi"),
		testPod("ds", "a", "100m", "64Mi", func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "DaemonSet" })}
	in := input(testPool(), nodes, pods)
	in.Allowed[v1alpha1.ReasonEmpty] = 2
	plan := Decide(in)
	c := plan.Command
	if c == nil || c.Kind != KindEmpty || c.Reason != v1alpha1.ReasonEmpty {
		t.Fatalf("command %+v, want an Empty one", c)
	}
	// The priciest empty node first; a DaemonSet pod does not make a node busy.
	if !slices.Equal(c.Nodes, []string{"b", "a"}) || len(c.Moves) != 0 {
		t.Fatalf("took %v moving %d pods, want [b a] moving none", c.Nodes, len(c.Moves))
	}
	if b, ok := plan.Blocker("c"); !ok || b.Reason != BlockedBudget {
		t.Fatalf("node c: %+v, want blocked by the budget", b)
	}
}

func TestMultiNodeTakesSeveralUnderutilizedNodesAtOnce(t *testing.T) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 4 {
		n := fmt.Sprintf("n%d", i)
		nodes = append(nodes, testNode(n, "Standard_D4s_v5", "on-demand"))
		pods = append(pods, testPod("p"+n, n, "900m", "2Gi"))
	}
	plan := Decide(input(testPool(), nodes, pods))
	c := plan.Command
	if c == nil || c.Kind != KindMulti || len(c.Nodes) != 3 || c.Replacement != nil {
		t.Fatalf("command %+v, want three nodes removed at once, no replacement", c)
	}
	if len(c.Moves) != 3 || c.Savings() < 3*0.192-1e-9 {
		t.Fatalf("moves %v savings %.4f, want 3 moves saving 3 nodes' price", c.Moves, c.Savings())
	}
	for _, m := range c.Moves {
		if slices.Contains(c.Nodes, m.To) {
			t.Fatalf("move %+v lands on a node the command takes away", m)
		}
	}
}

// When the budget holds the pool to fewer nodes than could go, the plan
// names the nodes later rounds are expected to take (the controller steers
// pods away from them); when it does not, there are no later rounds.
func TestNextNamesTheNodesLaterRoundsTake(t *testing.T) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 5 {
		n := fmt.Sprintf("n%d", i)
		nodes = append(nodes, testNode(n, "Standard_D4s_v5", "on-demand"))
		pods = append(pods, testPod("p"+n, n, "900m", "2Gi"))
	}
	in := input(testPool(), nodes, pods)
	// Four 900m pods fit on a Standard_D4s_v5: three of the five nodes can go.
	if plan := Decide(in); plan.Command == nil || len(plan.Command.Nodes) != 3 || len(plan.Next) != 0 {
		t.Fatalf("budget 10: command %v, next %v; want three nodes at once and no later rounds", plan.Command, plan.Next)
	}
	in.Allowed[v1alpha1.ReasonUnderutilized] = 2
	plan := Decide(in)
	if plan.Command == nil || len(plan.Command.Nodes) != 2 {
		t.Fatalf("budget 2: command %v; want two nodes", plan.Command)
	}
	if len(plan.Next) != 1 {
		t.Fatalf("budget 2: next %v; want the third node the largest set takes", plan.Next)
	}
	kept := 0
	for _, n := range nodes {
		in, next := slices.Contains(plan.Command.Nodes, n.Name), slices.Contains(plan.Next, n.Name)
		if in && next {
			t.Errorf("%s is both taken now and named for later", n.Name)
		}
		if !in && !next {
			kept++
		}
	}
	if kept != 2 {
		t.Errorf("%d nodes neither taken nor named for later; want the two that hold every pod", kept)
	}
	in.Allowed[v1alpha1.ReasonUnderutilized] = 3
	if plan := Decide(in); len(plan.Next) != 0 {
		t.Errorf("budget 3, all that can go: next %v; want none", plan.Next)
	}
}

func TestSingleNodeIsReplacedByACheaperTypeNeverTheSame(t *testing.T) {
	nodes := []*corev1.Node{testNode("big", "Standard_D8s_v5", "on-demand")}
	pods := []*corev1.Pod{testPod("a", "big", "1", "2Gi"), testPod("b", "big", "500m", "1Gi")}
	plan := Decide(input(testPool(), nodes, pods))
	c := plan.Command
	if c == nil || c.Kind != KindSingle || c.Replacement == nil || c.Replacement.InstanceType != "Standard_D2s_v5" {
		t.Fatalf("command %+v, want big replaced by the cheapest type that fits (D2s_v5)", c)
	}
	if c.CostAfter >= c.CostBefore || len(c.Moves) != 2 || c.Moves[0].To != NewNode {
		t.Fatalf("command %s: want both pods on the new, cheaper node", c)
	}

	// Already the cheapest type that fits: the same type is never a command.
	nodes = []*corev1.Node{testNode("small", "Standard_D2s_v5", "on-demand")}
	pods = []*corev1.Pod{testPod("a", "small", "1", "2Gi")}
	plan = Decide(input(testPool(), nodes, pods))
	if plan.Command != nil {
		t.Fatalf("command %s, want none", plan.Command)
	}
	if b, ok := plan.Blocker("small"); !ok || b.Reason != BlockedNoCheaperFit {
		t.Fatalf("blocker %+v, want NoCheaperFit", b)
	}
}

func TestMinSavingsHoldsBackASmallSaving(t *testing.T) {
	// D4s_v5 ($0.192) to D4as_v5 ($0.172) saves 10.4%.
	pool := testPool(func(p *v1alpha1.NodePool) {
		p.Spec.Template.InstanceTypes = []string{"Standard_D4s_v5", "Standard_D4as_v5"}
	})
	nodes := []*corev1.Node{testNode("n", "Standard_D4s_v5", "on-demand")}
	pods := []*corev1.Pod{testPod("a", "n", "3", "8Gi")}
	if c := Decide(input(pool, nodes, pods)).Command; c == nil || c.Replacement == nil || c.Replacement.InstanceType != "Standard_D4as_v5" {
		t.Fatalf("command %+v, want a D4as_v5 at the default minSavings (10%%)", c)
	}
	pool.Spec.Disruption.Consolidation = &v1alpha1.ConsolidationSpec{MinSavings: "20%"}
	plan := Decide(input(pool, nodes, pods))
	if plan.Command != nil {
		t.Fatalf("command %s, want none: 10.4%% is below minSavings 20%%", plan.Command)
	}
	if b, ok := plan.Blocker("n"); !ok || b.Reason != BlockedBelowMinSavings || !strings.Contains(b.Message, "minSavings is 20%") {
		t.Fatalf("blocker %+v, want BelowMinSavings naming 20%%", b)
	}
}

func TestNodesThatStayAreExplained(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("guarded", "Standard_D4s_v5", "on-demand"),
		testNode("fresh", "Standard_D4s_v5", "on-demand"),
		testNode("budgeted", "Standard_D4s_v5", "on-demand"),
		testNode("bare", "Standard_D4s_v5", "on-demand"),
		testNode("churned", "Standard_D4s_v5", "on-demand"),
	}
	nodes[1].CreationTimestamp = metav1.NewTime(t0.Add(-10 * time.Second))
	pods := []*corev1.Pod{
		testPod("g", "guarded", "1", "1Gi", func(p *corev1.Pod) { p.Annotations = map[string]string{"sluice.dev/do-not-disrupt": "true"} }),
		testPod("f", "fresh", "1", "1Gi"),
		testPod("b", "budgeted", "1", "1Gi", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }),
		testPod("x", "bare", "1", "1Gi", func(p *corev1.Pod) { p.OwnerReferences = nil }),
		testPod("c", "churned", "1", "1Gi"),
	}
	in := input(testPool(), nodes, pods)
	in.PDBs = []*policyv1.PodDisruptionBudget{{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "app"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0},
	}}
	in.LastChurn = func(n string) time.Time {
		if n == "churned" {
			return t0.Add(-5 * time.Second)
		}
		return time.Time{}
	}
	plan := Decide(in)
	if plan.Command != nil {
		t.Fatalf("command %s, want none", plan.Command)
	}
	for node, want := range map[string]BlockerKey{"guarded": BlockedDoNotDisrupt, "fresh": BlockedRecent, "budgeted": BlockedPDB, "bare": BlockedUnmovablePod, "churned": BlockedRecent} {
		if b, ok := plan.Blocker(node); !ok || b.Reason != want {
			t.Errorf("node %s: %+v, want %s", node, b, want)
		}
	}
	if b, _ := plan.Blocker("churned"); !b.Until.Equal(t0.Add(25 * time.Second)) {
		t.Errorf("churned node eligible at %s, want 25s from now", b.Until)
	}
}

func TestPolicyThresholdAndSpotRules(t *testing.T) {
	nodes := []*corev1.Node{testNode("a", "Standard_D4s_v5", "on-demand"), testNode("b", "Standard_D4s_v5", "on-demand")}
	pods := []*corev1.Pod{testPod("x", "a", "1", "1Gi"), testPod("y", "b", "1", "1Gi")}
	whenEmpty := testPool(func(p *v1alpha1.NodePool) { p.Spec.Disruption.ConsolidationPolicy = v1alpha1.ConsolidateWhenEmpty })
	if plan := Decide(input(whenEmpty, nodes, pods)); plan.Command != nil || len(plan.Candidates) != 0 {
		t.Fatalf("WhenEmpty: command %v candidates %v, want none", plan.Command, plan.Candidates)
	}
	strict := testPool(func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Consolidation = &v1alpha1.ConsolidationSpec{UtilizationThreshold: ptr.To("20%")}
	})
	if plan := Decide(input(strict, nodes, pods)); plan.Command != nil {
		t.Fatalf("threshold 20%% with nodes at 25%% cpu: command %s, want none", plan.Command)
	}
	never := testPool(func(p *v1alpha1.NodePool) { p.Spec.Disruption.ConsolidateAfter = v1alpha1.Never })
	if plan := Decide(input(never, nodes, pods)); plan.Command != nil {
		t.Fatalf("consolidateAfter Never: command %s, want none", plan.Command)
	}

	spotPool := testPool(func(p *v1alpha1.NodePool) { p.Spec.Template.Capacity = v1alpha1.CapacitySpot })
	spot := []*corev1.Node{testNode("s", "Standard_D8s_v5", "spot")}
	spotPods := []*corev1.Pod{testPod("z", "s", "1", "1Gi")}
	if plan := Decide(input(spotPool, spot, spotPods)); plan.Command != nil {
		t.Fatalf("spot to spot without opting in: command %s, want none", plan.Command)
	}
	spotPool.Spec.Disruption.Consolidation = &v1alpha1.ConsolidationSpec{SpotToSpot: true}
	if c := Decide(input(spotPool, spot, spotPods)).Command; c == nil || c.Replacement == nil || c.Replacement.Capacity != v1alpha1.CapacitySpot {
		t.Fatalf("spot to spot opted in: command %+v, want a cheaper spot node", c)
	}
}
