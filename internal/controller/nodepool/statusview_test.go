package nodepool_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// In the middle of a 10-node rollout at 10 %, with one old node out and its
// replacement beside it, `sluice status -o json` says what the controller
// holds to: the Drifted budget's limit is 1 and it allows 0 more. (The CLI
// once sized the pool with the replacement counted, 11 nodes: limit 2,
// allowed 1.)
func TestStatusMidRolloutSaysWhatTheControllerHolds(t *testing.T) {
	s := newScene(t, 10, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "10%"}}
	})
	// Pods to move make each old node stay a while beside its replacement.
	s.workload(t, 20, "16")
	before := s.waitNodes(t, 10, time.Minute)
	sluice := sandboxtest.Sluice(t)
	kubeconfig := s.env.Sandbox.Kubeconfig()
	s.start(t)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })

	type budget struct {
		Reason     string `json:"reason"`
		Limit      int    `json:"limit"`
		Allowed    int    `json:"allowed"`
		Disrupting int    `json:"disrupting"`
	}
	looks := 0
	names := func(ctx context.Context) ([]string, error) {
		nodes, err := s.nodes(ctx)
		var out []string
		for _, n := range nodes {
			out = append(out, n.Name)
		}
		slices.Sort(out)
		return out, err
	}
	s.env.WaitFor(t, 3*time.Minute, "status read while a replacement stands beside its node", func(ctx context.Context) (bool, error) {
		nodes, err := names(ctx)
		if err != nil || len(nodes) != 11 {
			return false, err // no replacement beside the node it replaces
		}
		out, err := exec.CommandContext(ctx, sluice, "status", s.name, "-o", "json", "--kubeconfig", kubeconfig).Output()
		if err != nil {
			return false, err
		}
		var report struct {
			Pools []struct {
				Nodes   int      `json:"nodes"`
				Budgets []budget `json:"budgets"`
			} `json:"pools"`
		}
		if err := json.Unmarshal(out, &report); err != nil || len(report.Pools) != 1 {
			t.Fatalf("status -o json: %v\n%s", err, out)
		}
		// The same nodes after the look: the look saw them.
		after, err := names(ctx)
		if err != nil || !slices.Equal(after, nodes) {
			return false, err
		}
		looks++
		for _, b := range report.Pools[0].Budgets {
			if b.Reason == string(v1alpha1.ReasonDrifted) {
				if b.Limit != 1 || b.Allowed != 0 || b.Disrupting != 1 {
					t.Fatalf("mid-rollout, %d nodes listed: status says the Drifted budget's limit is %d, %d allowed, %d disrupting; the controller holds to limit 1, 0 allowed, 1 disrupting",
						report.Pools[0].Nodes, b.Limit, b.Allowed, b.Disrupting)
				}
				return true, nil
			}
		}
		t.Fatalf("status gives no Drifted budget:\n%s", out)
		return false, nil
	})
	if looks == 0 {
		t.Fatal("status was never read mid-rollout")
	}
	// The rollout itself goes on to the end within the budget.
	s.env.WaitFor(t, 5*time.Minute, "every node replaced", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if slices.Contains(before, n.Name) || n.Annotations[contract.AnnotationImage] != "img-2" || !ready(n) {
				return false, nil
			}
		}
		return len(nodes) == 10, nil
	})
}
