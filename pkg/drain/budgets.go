package drain

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// The budget arithmetic the drain uses, for tools that judge budgets without
// draining (sluice doctor). One definition of "deadlock" serves both.

// BudgetsFor returns the PodDisruptionBudgets that select pod.
func BudgetsFor(pod *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) []*policyv1.PodDisruptionBudget {
	return budgetsFor(pod, pdbs)
}

// BudgetDeadlock explains a budget that can never allow an eviction of pod as
// things stand (its desired healthy count is at or above the pods it expects),
// with the fix; ok is false when the budget can allow one.
func BudgetDeadlock(pdb *policyv1.PodDisruptionBudget, pod *corev1.Pod) (message string, ok bool) {
	c, ok := staticDeadlock(pdb, pod)
	return c.message, ok
}

// DiagnoseBudget explains a budget that allows no disruption right now, from
// the pods it selects, as of now: PDBDeadlock when waiting will not help
// (replacements unschedulable, pods stuck not Ready under IfHealthyBudget),
// PDBBlocked otherwise (pods still starting included).
func DiagnoseBudget(pdb *policyv1.PodDisruptionBudget, selected []corev1.Pod, now time.Time) (Reason, string) {
	return diagnoseBlocked(pdb, selected, now)
}
