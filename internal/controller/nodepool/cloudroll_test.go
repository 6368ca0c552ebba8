package nodepool_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// rollSize is how many nodes a cloud pool rolls in driftAndExpire.
const rollSize = 6

// driftAndExpire turns a cloud pool of rollSize nodes over twice, through
// its provider, with a workload of 12 pods (a PDB keeps 10) and the auditor
// watching: the template's labels drift (a second label mid-rollout, so
// that the replacements that join after it must not be drifted at birth),
// then every node expires. Each time every node is replaced, one at a time
// as the pool's budget says, the PDB holds and no pod waits unschedulable.
// held is how many machines the cloud holds for the pool, whoever asked:
// after both rollouts it must be rollSize, so nothing leaked.
func (s *scene) driftAndExpire(t *testing.T, before []string, held func(context.Context) (int, error)) {
	t.Helper()
	// The controller first: a cloud's first nodes may join with the
	// unregistered taint too, and take pods once it registered them.
	s.start(t)
	s.env.WaitFor(t, 2*time.Minute, "the first nodes registered", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		return !slices.ContainsFunc(nodes, provider.Tainted), nil
	})
	s.workload(t, 12, "10")
	a := s.audit(t)
	s.driftMidRollout(t, before)
	drifted, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range drifted {
		names = append(names, n.Name)
	}

	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Disruption.ExpireAfter = "1m" })
	s.env.WaitFor(t, 6*time.Minute, "every node of the drift expired and replaced", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil || len(nodes) != rollSize {
			return false, err
		}
		for _, n := range nodes {
			if slices.Contains(names, n.Name) || !ready(n) || !n.DeletionTimestamp.IsZero() || provider.Tainted(n) {
				return false, nil
			}
		}
		return true, nil
	})
	// The replacements expire in their turn: stop the turnover, and let
	// what is in flight finish before counting.
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Disruption.ExpireAfter = v1alpha1.Never })
	s.env.WaitFor(t, 2*time.Minute, "the pool settled at its size", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil || len(nodes) != rollSize {
			return false, err
		}
		for _, n := range nodes {
			if !ready(n) || !n.DeletionTimestamp.IsZero() || n.Spec.Unschedulable || provider.Tainted(n) {
				return false, nil
			}
		}
		got, err := held(ctx)
		return got == rollSize, err
	})
	a.check(t, 1)
	s.env.WaitForPods(t, "app=web", 12)
	for _, n := range s.nodesOrFail(t) {
		if n.Labels["sluice.dev/test-tier"] != "gold" {
			t.Errorf("node %s lacks the template's label sluice.dev/test-tier=gold after expiry: labels %v", n.Name, n.Labels)
		}
	}
}

func (s *scene) nodesOrFail(t *testing.T) []*corev1.Node {
	t.Helper()
	nodes, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}
