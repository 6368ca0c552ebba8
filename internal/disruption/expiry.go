package disruption

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Expiry says when node expires under the pool's disruption settings d
// (expireAfter after its creation) and whether it has at now. ok is false when
// it never expires: expireAfter is Never, unset or unreadable, or the node
// has no creation time to count from.
func Expiry(node *corev1.Node, d *v1alpha1.DisruptionSpec, now time.Time) (at time.Time, expired bool, ok bool) {
	after, ok := d.ExpireAfterDuration()
	if !ok || node == nil || node.CreationTimestamp.IsZero() {
		return time.Time{}, false, false
	}
	at = node.CreationTimestamp.Add(after)
	return at, !now.Before(at), true
}
