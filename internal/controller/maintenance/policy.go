package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"

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
func (p Policy) Action(t maintenance.Type) Action { return p.spec.ActionFor(t) }

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

// Policies finds the policy for a node.
type Policies interface {
	PolicyFor(ctx context.Context, node *corev1.Node) (Policy, error)
}

// Defaults is the policy of a cluster with no NodePools.
type Defaults struct{}

// PolicyFor returns the defaults.
func (Defaults) PolicyFor(context.Context, *corev1.Node) (Policy, error) { return PolicyOf(nil), nil }

// PoolPolicies reads NodePools from the cluster. A cluster without the
// NodePool CRD gets the defaults, so sluice works with no configuration.
type PoolPolicies struct {
	client dynamic.Interface
	log    *slog.Logger
}

// NewPoolPolicies returns policies read through client.
func NewPoolPolicies(client dynamic.Interface, log *slog.Logger) *PoolPolicies {
	return &PoolPolicies{client: client, log: log}
}

// PolicyFor resolves the node's pool; two pools selecting one node is logged
// and resolved to the oldest.
func (p *PoolPolicies) PolicyFor(ctx context.Context, node *corev1.Node) (Policy, error) {
	pools, err := nodepool.List(ctx, p.client)
	if apierrors.IsNotFound(err) {
		return PolicyOf(nil), nil
	}
	if err != nil {
		return Policy{}, fmt.Errorf("listing NodePools: %w", err)
	}
	pool, err := nodepool.For(node, pools)
	var ambiguous *nodepool.AmbiguousError
	if errors.As(err, &ambiguous) {
		p.log.Warn("several NodePools select the node; using the oldest", "node", node.Name, "err", err)
	} else if err != nil {
		return Policy{}, err
	}
	return PolicyOf(pool), nil
}
