package drain

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Cordon marks the node unschedulable in memory, for a caller that writes the
// node back with its own changes in one update. It records that sluice did
// so only when the node was schedulable before, so a node a person cordoned
// stays theirs. It reports whether it cordoned the node.
func Cordon(node *corev1.Node) bool {
	if node.Spec.Unschedulable {
		return false
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[AnnotationCordonedBy] = cordonedBySluice
	node.Spec.Unschedulable = true
	return true
}

// Uncordon puts the node back into service in memory, but only if sluice
// cordoned it (AnnotationCordonedBy) and no drain holds a live claim on it; a
// node a person cordoned is left alone. It reports whether it uncordoned it.
func Uncordon(node *corev1.Node, now time.Time) (bool, error) {
	if node.Annotations[AnnotationCordonedBy] == "" {
		return false, nil
	}
	if other, held := heldByOther(node, "", now); held {
		return false, fmt.Errorf("node %s is being drained by %s (drain %s); not uncordoning it", node.Name, other.Holder, other.ID)
	}
	delete(node.Annotations, AnnotationCordonedBy)
	was := node.Spec.Unschedulable
	node.Spec.Unschedulable = false
	return was, nil
}
