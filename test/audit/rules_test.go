package audit

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func TestBudgetLimit(t *testing.T) {
	// Monday 2026-11-23 10:30 UTC.
	now := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)
	window := func(nodes, schedule, dur string, reasons ...v1alpha1.DisruptionReason) v1alpha1.Budget {
		d, _ := time.ParseDuration(dur)
		return v1alpha1.Budget{Nodes: nodes, Schedule: ptr.To(schedule), Duration: &metav1.Duration{Duration: d}, Reasons: reasons}
	}
	cases := []struct {
		name    string
		budgets []v1alpha1.Budget
		size    int
		reason  string
		want    int
	}{
		{"default is 10% rounded up", nil, 8, "Drifted", 1},
		{"percent rounds up", []v1alpha1.Budget{{Nodes: "20%"}}, 6, "Drifted", 2},
		{"count", []v1alpha1.Budget{{Nodes: "3"}}, 6, "Expired", 3},
		{"most restrictive wins", []v1alpha1.Budget{{Nodes: "50%"}, {Nodes: "1"}}, 10, "Drifted", 1},
		{"reason-limited budget skips other reasons", []v1alpha1.Budget{{Nodes: "50%"}, {Nodes: "0", Reasons: []v1alpha1.DisruptionReason{"Drifted"}}}, 10, "Expired", 5},
		{"reason-limited budget binds its reason", []v1alpha1.Budget{{Nodes: "50%"}, {Nodes: "0", Reasons: []v1alpha1.DisruptionReason{"Drifted"}}}, 10, "Drifted", 0},
		{"a person's deletion meets reason-less budgets only", []v1alpha1.Budget{{Nodes: "2"}, {Nodes: "0", Reasons: []v1alpha1.DisruptionReason{"Drifted"}}}, 10, "Deleted", 2},
		{"open window binds", []v1alpha1.Budget{{Nodes: "5"}, window("0", "0 9 * * 1-5", "8h")}, 10, "Drifted", 0},
		{"closed window does not", []v1alpha1.Budget{{Nodes: "5"}, window("0", "0 9 * * 1-5", "1h")}, 10, "Drifted", 5},
		{"window fired this minute", []v1alpha1.Budget{{Nodes: "5"}, window("0", "30 10 * * *", "1h")}, 10, "Drifted", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why, ok := budgetLimit(c.budgets, c.size, c.reason, now)
			if !ok || got != c.want {
				t.Errorf("budgetLimit = %d (%s, ok %v), want %d", got, why, ok, c.want)
			}
		})
	}
	if _, _, ok := budgetLimit([]v1alpha1.Budget{{Nodes: "5", Schedule: ptr.To("not cron"), Duration: &metav1.Duration{Duration: time.Hour}}}, 10, "Drifted", now); ok {
		t.Error("an unreadable schedule was judged")
	}
}

func TestPDBFloor(t *testing.T) {
	pdb := func(minAvail, maxUnavail *intstr.IntOrString, expected int32) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			Spec:   policyv1.PodDisruptionBudgetSpec{MinAvailable: minAvail, MaxUnavailable: maxUnavail},
			Status: policyv1.PodDisruptionBudgetStatus{ExpectedPods: expected},
		}
	}
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }
	cases := []struct {
		name string
		pdb  *policyv1.PodDisruptionBudget
		want int
		ok   bool
	}{
		{"minAvailable count", pdb(num(2), nil, 3), 2, true},
		{"minAvailable 90% of 3 rounds up", pdb(pct("90%"), nil, 3), 3, true},
		{"maxUnavailable 25% of 10 rounds up", pdb(nil, pct("25%"), 10), 7, true},
		{"maxUnavailable count", pdb(nil, num(1), 4), 3, true},
		{"not counted yet", pdb(num(1), nil, 0), 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := pdbFloor(c.pdb)
			if got != c.want || ok != c.ok {
				t.Errorf("pdbFloor = %d, %v; want %d, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

func TestProtected(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		annotations map[string]string
		age         time.Duration
		want        bool
	}{
		{map[string]string{"sluice.dev/do-not-disrupt": "true"}, time.Hour, true},
		{map[string]string{"karpenter.sh/do-not-disrupt": "true"}, time.Hour, true},
		{map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, time.Hour, true},
		{map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}, time.Hour, false},
		{map[string]string{"sluice.dev/do-not-disrupt": "30m"}, 10 * time.Minute, true},
		{map[string]string{"sluice.dev/do-not-disrupt": "30m"}, time.Hour, false},
		{map[string]string{"sluice.dev/do-not-disrupt": "false"}, time.Hour, false},
		{nil, time.Hour, false},
	}
	for _, c := range cases {
		if got := protected(c.annotations, now.Add(-c.age), now) != ""; got != c.want {
			t.Errorf("protected(%v, age %s) = %v, want %v", c.annotations, c.age, got, c.want)
		}
	}
}

// TestANodeThatFellNotReadyAfterTheChoiceIsNotCountedForIt: a budget is
// judged as of the moment the controller chose (its record's since). A node
// NotReady since before then counts; one that fell NotReady after does not,
// unless something else (a mark, a cordon, a deletion) holds it too.
func TestANodeThatFellNotReadyAfterTheChoiceIsNotCountedForIt(t *testing.T) {
	chose := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	node := func(status corev1.ConditionStatus, at time.Time) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(at)}}}}
	}
	cases := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"NotReady before the choice", node(corev1.ConditionFalse, chose.Add(-time.Second)), false},
		{"NotReady after the choice", node(corev1.ConditionFalse, chose.Add(time.Second)), true},
		{"Unknown after the choice", node(corev1.ConditionUnknown, chose.Add(time.Second)), true},
		{"Ready", node(corev1.ConditionTrue, chose.Add(time.Second)), false},
	}
	cordoned := node(corev1.ConditionFalse, chose.Add(time.Second))
	cordoned.Spec.Unschedulable = true
	cases = append(cases, struct {
		name string
		node *corev1.Node
		want bool
	}{"cordoned too", cordoned, false})
	for _, tc := range cases {
		if got := fellNotReadyAfter(tc.node, chose); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if fellNotReadyAfter(node(corev1.ConditionFalse, chose.Add(time.Second)), time.Time{}) {
		t.Error("a record without since judged against no moment: must count every NotReady node")
	}
}
