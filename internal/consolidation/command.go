package consolidation

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Kind is which of the three consolidations a command is.
type Kind string

// Kinds, in the order a pass considers them.
const (
	KindEmpty  Kind = "Empty"
	KindMulti  Kind = "MultiNode"
	KindSingle Kind = "SingleNode"
)

// Command is one consolidation: nodes taken away, at most one node made, and
// the pods that move.
type Command struct {
	Kind Kind `json:"kind"`
	// Reason is what the ledger counts the nodes under: Empty or
	// Underutilized.
	Reason v1alpha1.DisruptionReason `json:"reason"`
	// Nodes are taken away, in the order they were chosen.
	Nodes []string `json:"nodes"`
	// Replacement is the node made first; nil when the pods fit on the
	// nodes that stay.
	Replacement *Replacement `json:"replacement,omitempty"`
	// Moves say where the simulation put each pod that leaves.
	Moves []Move `json:"moves,omitempty"`
	// CostBefore is what the nodes taken away cost per hour (USD);
	// CostAfter what the replacement costs (0 without one).
	CostBefore float64 `json:"costBefore"`
	CostAfter  float64 `json:"costAfter"`
	// DisruptionCost weighs the pods that move (see podCost).
	DisruptionCost float64 `json:"disruptionCost"`
}

// Replacement is the node a command makes.
type Replacement struct {
	InstanceType string                `json:"instanceType"`
	Capacity     v1alpha1.CapacityType `json:"capacity"`
	Price        float64               `json:"price"`
}

// Move is one pod's new place; To is NewNode for the replacement.
type Move struct {
	Pod  string `json:"pod"` // namespace/name
	From string `json:"from"`
	To   string `json:"to"`
}

// NewNode is the name a Move gives the command's replacement.
const NewNode = "(new node)"

// Savings is what the command saves per hour.
func (c *Command) Savings() float64 { return c.CostBefore - c.CostAfter }

// Key identifies the command for revalidation: the same nodes and the same
// new type. Where the pods land may differ between two passes.
func (c *Command) Key() string {
	nodes := slices.Clone(c.Nodes)
	slices.Sort(nodes)
	k := string(c.Kind) + ":" + strings.Join(nodes, ",")
	if c.Replacement != nil {
		k += "->" + c.Replacement.InstanceType + "/" + string(c.Replacement.Capacity)
	}
	return k
}

// String says what the command does, for an Event or a log.
func (c *Command) String() string {
	verb := "delete"
	if c.Replacement != nil {
		verb = fmt.Sprintf("replace with one %s %s ($%.4f/h)", c.Replacement.Capacity, c.Replacement.InstanceType, c.Replacement.Price)
	}
	what := fmt.Sprintf("%d node(s) %s", len(c.Nodes), strings.Join(c.Nodes, ", "))
	if len(c.Nodes) == 1 {
		what = "node " + c.Nodes[0]
	}
	return fmt.Sprintf("%s consolidation: %s %s; %d pod(s) move; saves $%.4f/h of $%.4f/h",
		c.Kind, verb, what, len(c.Moves), c.Savings(), c.CostBefore)
}

// Blocker is why one node of the pool is not consolidated now.
type Blocker struct {
	Node    string     `json:"node"`
	Reason  BlockerKey `json:"reason"`
	Message string     `json:"message"`
	// Until is when the reason lapses by itself; zero when only a change
	// will lift it.
	Until time.Time `json:"until,omitzero"`
}

// BlockerKey is a stable code for why a node is not consolidated.
type BlockerKey string

// Blocker reasons.
const (
	BlockedDisabled        BlockerKey = "Disabled"        // consolidateAfter Never, or no provider
	BlockedPaused          BlockerKey = "Paused"          // the pool is paused or do-not-disrupt
	BlockedDoNotDisrupt    BlockerKey = "DoNotDisrupt"    // the node or a pod on it
	BlockedRecent          BlockerKey = "RecentlyChanged" // created, or a pod came or went, within consolidateAfter
	BlockedOutOfService    BlockerKey = "OutOfService"    // cordoned, deleted, NotReady, being disrupted
	BlockedNotEmpty        BlockerKey = "NotEmpty"        // policy WhenEmpty
	BlockedAboveThreshold  BlockerKey = "AboveThreshold"  // utilizationThreshold
	BlockedUnmovablePod    BlockerKey = "UnmovablePod"    // a pod no controller would recreate
	BlockedPDB             BlockerKey = "PDB"             // a budget allows no disruption now
	BlockedNoCheaperFit    BlockerKey = "NoCheaperFit"    // its pods fit nowhere cheaper
	BlockedBelowMinSavings BlockerKey = "BelowMinSavings" // a cheaper fit saves less than minSavings
	BlockedBudget          BlockerKey = "Budget"          // the pool's disruption budget
)
