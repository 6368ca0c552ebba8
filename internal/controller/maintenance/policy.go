package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Action is what the controller does about an event (the NodePool's
// spec.maintenance.actions values).
type Action = v1alpha1.MaintenanceAction

// Actions.
const (
	ActionNone   = v1alpha1.ActionNone
	ActionCordon = v1alpha1.ActionCordon
	ActionDrain  = v1alpha1.ActionDrain
)

// rank orders actions, weakest first.
func rank(a Action) int {
	switch a {
	case ActionDrain:
		return 2
	case ActionCordon:
		return 1
	}
	return 0
}

// Policy is what a node's NodePool (or, for a node no pool selects, the
// defaults) says to do about maintenance.
type Policy struct {
	// Pool names the NodePool; empty for the defaults.
	Pool string
	spec *v1alpha1.MaintenanceSpec
}

// PolicyOf is the policy of pool (nil: the defaults).
func PolicyOf(pool *v1alpha1.NodePool) Policy {
	p := Policy{spec: pool.MaintenanceSpec()}
	if pool != nil {
		p.Pool = pool.Name
	}
	return p
}

// Action is what to do about an event of type t.
func (p Policy) Action(t maintenance.Type) Action { return nodepool.ActionFor(p.spec, t) }

// ActionOf is what to do about e: its type's action, or nothing for an event
// the VM's owner asked for when the pool approves those at once.
func (p Policy) ActionOf(e maintenance.Event) Action {
	if p.ApproveAtOnce(e) {
		return ActionNone
	}
	return p.Action(e.Type)
}

// ApproveAtOnce says whether e is approved as soon as it is seen: an event
// the VM's owner asked for, in a pool whose userInitiated is Approve.
func (p Policy) ApproveAtOnce(e maintenance.Event) bool {
	return e.UserInitiated() && p.spec.ApproveUserInitiated()
}

// ApproveEarly says whether to approve an event once the node is drained.
func (p Policy) ApproveEarly() bool { return p.spec.ApproveEarlyOrDefault() }

// DeadlineMargin is how long before the event's deadline the drain must end.
func (p Policy) DeadlineMargin() time.Duration { return p.spec.DeadlineMarginOrDefault() }

// OnDeadline is the drain engine's deadline mode.
func (p Policy) OnDeadline() drain.DeadlineAction {
	if p.spec.OnDeadlineOrDefault() == v1alpha1.OnDeadlineStop {
		return drain.OnDeadlineStop
	}
	return drain.OnDeadlineDelete
}

// ForceEvict says whether a drain for an event of type t evicts pods without
// a controller and pods with emptyDir data.
func (p Policy) ForceEvict(t maintenance.Type) bool { return nodepool.ForceEvictFor(p.spec, t) }

// Policies finds the policy for a node. It always answers: a NodePool that
// cannot be read or applied affects only the nodes it would have selected,
// which get the defaults, and is reported on the pool itself (see
// internal/controller/nodepool).
type Policies interface {
	PolicyFor(ctx context.Context, node *corev1.Node) Policy
}

// Defaults is the policy of a cluster with no NodePools.
type Defaults struct{}

// PolicyFor returns the defaults.
func (Defaults) PolicyFor(context.Context, *corev1.Node) Policy { return PolicyOf(nil) }

// PoolPolicies reads NodePools from the shared cache.
type PoolPolicies struct {
	reader client.Reader
	log    *slog.Logger
}

// NewPoolPolicies returns policies read through reader (the manager's cache).
func NewPoolPolicies(reader client.Reader, log *slog.Logger) *PoolPolicies {
	return &PoolPolicies{reader: reader, log: log}
}

// PolicyFor resolves the node's pool. Two pools selecting one node resolve
// to the oldest, with a warning; a pool whose selector does not parse selects
// nothing; a failure to read pools at all falls back to the defaults.
func (p *PoolPolicies) PolicyFor(ctx context.Context, node *corev1.Node) Policy {
	var list v1alpha1.NodePoolList
	if err := p.reader.List(ctx, &list); err != nil {
		p.log.Error("listing NodePools from the cache; using the default policy", "node", node.Name, "err", err)
		return PolicyOf(nil)
	}
	pool, err := nodepool.For(node, list.Items)
	var ambiguous *nodepool.AmbiguousError
	if errors.As(err, &ambiguous) {
		p.log.Warn("several NodePools select the node; using the oldest", "node", node.Name, "err", ambiguous)
	}
	return PolicyOf(pool)
}
