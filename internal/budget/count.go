package budget

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// AnnotationDisruption marks a node the disruption controller is taking away;
// it is written before the replacement is created, so the node counts against
// its pool's budgets from that moment until it is gone.
const AnnotationDisruption = contract.AnnotationDisruption

// Disrupting says whether the node counts against its pool's budgets at now,
// being out of service for any reason, and why in a few words: being
// deleted, marked for disruption, held by a drain, cordoned by anyone, or not
// Ready. It reads only the node, so every reader counts the same.
func Disrupting(node *corev1.Node, now time.Time) (why string, counts bool) {
	if node == nil {
		return "", false
	}
	if node.DeletionTimestamp != nil {
		return "being deleted", true
	}
	if _, ok := node.Annotations[AnnotationDisruption]; ok {
		return "marked for disruption", true
	}
	if holder, _, ok := ownership.LiveClaim(node, now); ok {
		if holder == "" {
			return "being drained", true
		}
		return "being drained by " + holder, true
	}
	if node.Spec.Unschedulable {
		return "cordoned", true
	}
	switch status := readiness(node); status {
	case corev1.ConditionTrue:
		return "", false
	case corev1.ConditionFalse:
		return "NotReady", true
	case "":
		return "no Ready condition", true
	default:
		return "Ready " + string(status), true
	}
}

// NodeReady says whether the node's Ready condition is True: the one reading
// of "Ready" for every controller and command.
func NodeReady(node *corev1.Node) bool { return readiness(node) == corev1.ConditionTrue }

// readiness is the status of the node's Ready condition, empty when it has
// none.
func readiness(node *corev1.Node) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// Count is how many of a pool's nodes count against its budgets at now. A
// replacement on its way (a node named by another's record, not yet Ready)
// does not: the node it replaces already counts for both.
func Count(nodes []*corev1.Node, replacements map[string]bool, now time.Time) int {
	n := 0
	for _, node := range nodes {
		if _, counts := Disrupting(node, now); !counts {
			continue
		}
		if replacements[node.Name] && booting(node) {
			continue
		}
		n++
	}
	return n
}

// booting says whether the node counts only because it has not turned Ready
// yet: nothing else (a cordon, a deletion, a record, a drain) marks it.
func booting(node *corev1.Node) bool {
	if node.DeletionTimestamp != nil || node.Spec.Unschedulable || readiness(node) == corev1.ConditionTrue {
		return false
	}
	_, marked := node.Annotations[AnnotationDisruption]
	_, claimed := node.Annotations[contract.AnnotationDrain]
	return !marked && !claimed
}
