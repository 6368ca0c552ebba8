package drain

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func selecting(namespace, name string, sel *metav1.LabelSelector) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: sel}}
}

func names(pdbs []*policyv1.PodDisruptionBudget) string {
	var out []string
	for _, p := range pdbs {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

func TestBudgetsFor(t *testing.T) {
	web := map[string]string{"app": "web"}
	all := []*policyv1.PodDisruptionBudget{
		selecting("shop", "z-by-app", &metav1.LabelSelector{MatchLabels: web}),
		selecting("shop", "a-by-tier", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front", "edge"}}}}),
		selecting("shop", "everything", &metav1.LabelSelector{}),
		selecting("shop", "nil-selects-nothing", nil),
		selecting("shop", "other-app", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}),
		selecting("other", "same-labels-other-namespace", &metav1.LabelSelector{MatchLabels: web}),
		selecting("shop", "invalid", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}),
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"app and tier, sorted by name", map[string]string{"app": "web", "tier": "edge"}, "a-by-tier,everything,z-by-app"},
		{"app only", web, "everything,z-by-app"},
		{"no labels", nil, "everything"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Labels: tc.labels}}
			if got := names(budgetsFor(pod, all)); got != tc.want {
				t.Errorf("budgets %q, want %q", got, tc.want)
			}
			if got := names(BudgetsFor(pod, all)); got != tc.want {
				t.Errorf("BudgetsFor %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMultipleBudgets(t *testing.T) {
	c := multipleBudgets([]*policyv1.PodDisruptionBudget{selecting("shop", "a", nil), selecting("shop", "b", nil)})
	want := "selected by 2 PodDisruptionBudgets (a, b); the eviction API refuses such pods. Make the budgets' selectors disjoint, or delete one"
	if c.verdict != hold || c.reason != ReasonMultiplePDBs || c.message != want {
		t.Errorf("got %v %s %q", c.verdict, c.reason, c.message)
	}
}

// A budget is a static deadlock only once the disruption controller has
// judged its current spec and found desired healthy at or above expected.
func TestStaticDeadlockOnlyWhenJudgedAndStuck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*policyv1.PodDisruptionBudget)
		dead   bool
	}{
		{"judged and stuck", func(*policyv1.PodDisruptionBudget) {}, true},
		{"spec changed since judged", func(p *policyv1.PodDisruptionBudget) { p.Generation = 3 }, false},
		{"expects no pods", func(p *policyv1.PodDisruptionBudget) { p.Status.ExpectedPods = 0 }, false},
		{"allows a disruption", func(p *policyv1.PodDisruptionBudget) { p.Status.DisruptionsAllowed = 1 }, false},
		{"desired below expected (a pod is merely unhealthy)", func(p *policyv1.PodDisruptionBudget) {
			p.Status.DesiredHealthy = 2
			p.Status.CurrentHealthy = 2
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pdb := judged("web", "3", "", 3, 3)
			tc.change(pdb)
			c, dead := staticDeadlock(pdb, replicaOf("web"))
			if dead != tc.dead {
				t.Fatalf("deadlock %v, want %v (%q)", dead, tc.dead, c.message)
			}
			msg, ok := BudgetDeadlock(pdb, replicaOf("web"))
			if ok != dead || msg != c.message {
				t.Errorf("BudgetDeadlock %q %v disagrees with staticDeadlock %q %v", msg, ok, c.message, dead)
			}
			if !dead && c != (classification{}) {
				t.Errorf("no deadlock but a classification %+v", c)
			}
		})
	}
}

// A budget with neither rule never deadlocks in the controller's arithmetic,
// but a status that says otherwise still gets a fix that makes sense.
func TestRemedyWithNoRule(t *testing.T) {
	rule, fix := remedy(policyv1.PodDisruptionBudgetSpec{}, 2, "web", "deployment web")
	if rule != "no minAvailable or maxUnavailable" || fix != "give PodDisruptionBudget web a maxUnavailable of at least 1" {
		t.Errorf("rule %q fix %q", rule, fix)
	}
}

func TestWorkloadOf(t *testing.T) {
	owned := func(kind, name string, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-1", Labels: labels}}
		if kind != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, Controller: ptr.To(true)}}
		}
		return p
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{owned("", "", nil), "pod p-1"},
		{owned("ReplicaSet", "web-5d9c7b", map[string]string{"pod-template-hash": "5d9c7b"}), "deployment web"},
		{owned("ReplicaSet", "web-5d9c7b", nil), "replicaset web-5d9c7b"},
		{owned("ReplicaSet", "web-5d9c7b", map[string]string{"pod-template-hash": "other"}), "replicaset web-5d9c7b"},
		{owned("StatefulSet", "db", nil), "statefulset db"},
		{owned("Job", "backup-29150", nil), "job backup-29150"},
	} {
		if got := workloadOf(tc.pod); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.pod.OwnerReferences, got, tc.want)
		}
	}
}

// budgetApplies mirrors the eviction API: budgets guard only running pods,
// and an unready pod under AlwaysAllow goes regardless.
func TestBudgetApplies(t *testing.T) {
	ready := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	unready := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	}
	policy := func(pol policyv1.UnhealthyPodEvictionPolicyType) *policyv1.PodDisruptionBudget {
		p := selecting("shop", string(pol), &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}})
		if pol != "" {
			p.Spec.UnhealthyPodEvictionPolicy = ptr.To(pol)
		}
		return p
	}
	for _, tc := range []struct {
		pod    *corev1.Pod
		budget *policyv1.PodDisruptionBudget
		want   bool
	}{
		{podWith(inPhase(corev1.PodPending)), policy(""), false},
		{podWith(inPhase(corev1.PodSucceeded)), policy(""), false},
		{podWith(inPhase(corev1.PodFailed)), policy(""), false},
		{podWith(ready), policy(policyv1.AlwaysAllow), true},
		{podWith(unready), policy(""), true},
		{podWith(unready), policy(policyv1.IfHealthyBudget), true},
		{podWith(unready), policy(policyv1.AlwaysAllow), false},
		{podWith(), policy(policyv1.AlwaysAllow), false}, // no Ready condition yet
	} {
		name := fmt.Sprintf("%s ready=%v policy=%q", tc.pod.Status.Phase, podReady(tc.pod), tc.budget.Name)
		if got := budgetApplies(tc.pod, []*policyv1.PodDisruptionBudget{tc.budget}); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
