package ownership

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/contract"
	corev1 "k8s.io/api/core/v1"
)

// Owners recorded in contract.AnnotationCordonedBy. A cordon has one owner,
// and only that owner takes it back: a person's `sluice drain` leaves the
// node to the person, and the maintenance controller uncordons only the nodes
// it cordoned for the event it is finishing.
const (
	// OwnerCLI is a drain a person ran (`sluice drain`, or a program using
	// pkg/drain without naming itself).
	OwnerCLI = "cli"
	// ownerMaintenancePrefix starts the owner of a cordon placed for a
	// maintenance event: "maintenance/<event id>".
	ownerMaintenancePrefix = "maintenance/"
)

// MaintenanceOwner is the cordon owner for a maintenance event.
func MaintenanceOwner(eventID string) string { return ownerMaintenancePrefix + eventID }

// CordonedBy returns who cordoned the node through sluice, or "" when sluice
// did not (a person with kubectl, another tool, or nobody).
func CordonedBy(node *corev1.Node) string {
	if !node.Spec.Unschedulable {
		return ""
	}
	return node.Annotations[contract.AnnotationCordonedBy]
}

// IsMaintenanceOwner reports whether owner is a maintenance event's.
func IsMaintenanceOwner(owner string) bool { return strings.HasPrefix(owner, ownerMaintenancePrefix) }

// MaintenanceEventOf returns the event a maintenance owner names; ok is
// false for any other owner.
func MaintenanceEventOf(owner string) (id string, ok bool) {
	return strings.CutPrefix(owner, ownerMaintenancePrefix)
}

// Cordon marks the node unschedulable in memory, for a caller that writes the
// node back with its own changes in one update. It records owner as the one
// who cordoned it only when the node was schedulable before, so a node a
// person cordoned stays theirs. It reports whether it cordoned the node.
func Cordon(node *corev1.Node, owner string) bool {
	if node.Spec.Unschedulable {
		return false
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[contract.AnnotationCordonedBy] = owner
	node.Spec.Unschedulable = true
	return true
}

// Uncordon puts the node back into service in memory, but only if owner
// cordoned it (contract.AnnotationCordonedBy says so) and no drain holds a live claim
// on it; a node cordoned by a person, by `sluice drain` or for another event
// is left alone. It reports whether it uncordoned the node.
func Uncordon(node *corev1.Node, owner string, now time.Time) (bool, error) {
	if owner == "" || node.Annotations[contract.AnnotationCordonedBy] != owner {
		return false, nil
	}
	if other, held := HeldByOther(node, "", now); held {
		return false, fmt.Errorf("node %s is being drained by %s (drain %s); not uncordoning it", node.Name, other.Holder, other.ID)
	}
	delete(node.Annotations, contract.AnnotationCordonedBy)
	was := node.Spec.Unschedulable
	node.Spec.Unschedulable = false
	return was, nil
}
