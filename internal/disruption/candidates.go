package disruption

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Candidate is a node that should be replaced, the method that takes it,
// and why.
type Candidate struct {
	Node *corev1.Node
	// Reason is the method that takes the node (Owner): Upgrade, Drifted
	// or Expired, the first in Methods that would.
	Reason v1alpha1.DisruptionReason
	// Differences are how the node differs from the template, those that
	// replacing it would not remove included (marked Left).
	Differences []Difference
	// ExpiredAt is when the node expired, whatever the Reason; zero when it
	// has not.
	ExpiredAt time.Time
	// Why says why the node is taken, for the methods that choose their
	// nodes outside the drift and expiry candidates (repair, reboot).
	Why string
}

// Drifted says whether the node differs from the template in a way its
// replacement would not, whichever method takes it.
func (c Candidate) Drifted() bool { return Replaceable(c.Differences) }

// ImageDrifted says whether the node's image is one of those differences.
func (c Candidate) ImageDrifted() bool {
	return slices.ContainsFunc(c.Differences, func(d Difference) bool { return d.Field == "image" && d.Left == "" })
}

// Message says why the node is a candidate, for an Event or sluice explain.
func (c Candidate) Message() string {
	if c.Reason == v1alpha1.ReasonDrifted || c.Reason == v1alpha1.ReasonUpgrade {
		lines := make([]string, len(c.Differences))
		for i, d := range c.Differences {
			lines[i] = d.String()
		}
		return "drifted from its NodePool's template: " + strings.Join(lines, "; ")
	}
	return "expired at " + c.ExpiredAt.UTC().Format(time.RFC3339)
}

// Candidates returns the nodes of pool that a method takes (Owner, in the
// order of Methods): an upgrade's or drifted (PoolDrift finds a difference
// from the template that replacing the node would remove; hash as Drift
// takes it), else expired at now. Nodes already being deleted are passed
// over. The oldest
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
		at, expired, _ := Expiry(node, pool.DisruptionSpec(), now)
		c := Candidate{Node: node, Differences: PoolDrift(node, pool, hash), ExpiredAt: expiredAt(at, expired)}
		if c.Reason = Owner(pool, c); c.Reason != "" {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Candidate) int {
		return cmp.Or(a.Node.CreationTimestamp.Compare(b.Node.CreationTimestamp.Time), strings.Compare(a.Node.Name, b.Node.Name))
	})
	return out
}

// expiredAt is when the node expired, zero when it has not.
func expiredAt(at time.Time, expired bool) time.Time {
	if !expired {
		return time.Time{}
	}
	return at
}
