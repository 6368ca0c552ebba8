package disruption_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// explain says where a node is on the repair's ladder, and why a reboot
// waits, from the same functions the controller decides with.
func TestExplainHealth(t *testing.T) {
	now := t0.Add(time.Hour)
	repairPool := func(maxUnhealthy string) *v1alpha1.NodePool {
		p := nodePool()
		p.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}}
		p.Spec.Provider.Name = v1alpha1.ProviderKwok
		p.Spec.Repair = &v1alpha1.RepairSpec{MaxUnhealthy: maxUnhealthy, MaxUnhealthyPerZone: "100%"}
		return p
	}
	notReadySince := func(at time.Time) nodeOpt {
		return func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", LastTransitionTime: metav1.NewTime(at)}}
		}
	}
	ready := func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}
	healthy := func(name string) *corev1.Node { return node(name, ready) }
	rebootPool := func(windows ...v1alpha1.RebootWindow) *v1alpha1.NodePool {
		p := nodePool()
		p.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}}
		p.Spec.Provider.Name = v1alpha1.ProviderKwok
		p.Spec.Reboot = &v1alpha1.RebootSpec{Windows: windows}
		return p
	}
	asks := annotate(contract.AnnotationRebootRequired, t0.Format(time.RFC3339))
	for _, tc := range []struct {
		name    string
		pool    *v1alpha1.NodePool
		node    *corev1.Node
		others  []*corev1.Node
		code    disruption.VerdictCode
		says    []string
		step    v1alpha1.RepairStep
		protect bool
	}{
		{name: "broken, within its toleration", pool: repairPool("1"), node: node("n1", notReadySince(now.Add(-2*time.Minute))),
			others: []*corev1.Node{healthy("n2")}, code: disruption.VerdictUnhealthy, says: []string{"Ready=False (KubeletNotReady)", "repaired at"}},
		{name: "broken past its toleration", pool: repairPool("1"), node: node("n1", notReadySince(now.Add(-11*time.Minute))),
			others: []*corev1.Node{healthy("n2")}, code: disruption.VerdictRepairDue, says: []string{"first by a reboot in place"}, step: v1alpha1.RepairReboot},
		{name: "protected, and repaired anyway", pool: repairPool("1"), node: node("n1", notReadySince(now.Add(-11*time.Minute)), annotate(contract.AnnotationDoNotDisrupt, "true")),
			others: []*corev1.Node{healthy("n2")}, code: disruption.VerdictRepairDue, says: []string{"does not hold a repair: the node is broken"}},
		{name: "the breaker holds", pool: repairPool("1"), node: node("n1", notReadySince(now.Add(-11*time.Minute))),
			others: []*corev1.Node{node("n2", notReadySince(now.Add(-11*time.Minute)))}, code: disruption.VerdictRepairHalted, says: []string{"2 of the pool's 2 nodes are unhealthy", "maxUnhealthy"}},
		{name: "a reboot outside the windows", pool: rebootPool(v1alpha1.RebootWindow{Schedule: "0 22 * * *", Duration: metav1.Duration{Duration: time.Hour}}),
			node: node("n1", ready, asks), code: disruption.VerdictRebootPending, says: []string{"no reboot window is open", "the next opens at 2026-11-01T22:00:00Z"}},
		{name: "a reboot the budget allows", pool: rebootPool(), node: node("n1", ready, asks), others: []*corev1.Node{healthy("n2")},
			code: disruption.VerdictRebootPending, says: []string{"drained and rebooted at the controller's next pass"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := disruption.Explain(disruption.ExplainInput{Pool: tc.pool, Node: tc.node, Members: append([]*corev1.Node{tc.node}, tc.others...), Now: now})
			if e.Verdict.Code != tc.code {
				t.Fatalf("verdict %s: %s; want %s", e.Verdict.Code, e.Verdict.Message, tc.code)
			}
			for _, s := range tc.says {
				if !strings.Contains(e.Verdict.Message, s) {
					t.Errorf("verdict %q does not say %q", e.Verdict.Message, s)
				}
			}
			if tc.step != "" && (e.Health == nil || e.Health.NextStep != tc.step) {
				t.Errorf("health %+v: want next step %s", e.Health, tc.step)
			}
		})
	}
}
