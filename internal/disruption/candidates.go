package disruption

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Candidate is a node that should be replaced, why, and since when.
type Candidate struct {
	Node *corev1.Node
	// Reason is ReasonDrifted or ReasonExpired.
	Reason v1alpha1.DisruptionReason
	// Differences are how a drifted node differs from the template.
	Differences []Difference
	// ExpiredAt is when the node expired, whatever the Reason; zero when it
	// has not.
	ExpiredAt time.Time
}

// Message says why the node is a candidate, for an Event or sluice explain.
func (c Candidate) Message() string {
	if c.Reason == v1alpha1.ReasonDrifted {
		lines := make([]string, len(c.Differences))
		for i, d := range c.Differences {
			lines[i] = d.String()
		}
		return "drifted from its NodePool's template: " + strings.Join(lines, "; ")
	}
	return "expired at " + c.ExpiredAt.UTC().Format(time.RFC3339)
}

// Candidates returns the nodes of pool that should be replaced: drifted
// (PoolDrift finds a difference from the template that replacing the node
// would remove; hash as Drift takes it), else
// expired at now. Nodes already being deleted are passed over. The oldest
// node comes first (by creation, then name) whatever its reason, so a
// rollout takes nodes in an order a person can predict.
//
// Candidates does not ask whether a node may be disrupted now: Protected and
// the pool's budgets say that.
func Candidates(pool *v1alpha1.NodePool, nodes []*corev1.Node, hash string, now time.Time) []Candidate {
	if pool == nil {
		return nil
	}
	var out []Candidate
	for _, node := range nodes {
		if node == nil || node.DeletionTimestamp != nil {
			continue
		}
		c := Candidate{Node: node}
		if at, expired, _ := Expiry(node, pool.DisruptionSpec(), now); expired {
			c.Reason, c.ExpiredAt = v1alpha1.ReasonExpired, at
		}
		if diffs := PoolDrift(node, pool, hash); Replaceable(diffs) {
			c.Reason, c.Differences = v1alpha1.ReasonDrifted, diffs
		}
		if c.Reason != "" {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Candidate) int {
		return cmp.Or(a.Node.CreationTimestamp.Compare(b.Node.CreationTimestamp.Time), strings.Compare(a.Node.Name, b.Node.Name))
	})
	return out
}
