package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestPlanConsolidation: the plan names what it would do per pool and why
// each other node stays, in text and in JSON, and refuses a pool that does
// not exist.
func TestPlanConsolidation(t *testing.T) {
	kc, dyn := cluster(t)
	var out bytes.Buffer
	if err := runPlan(context.Background(), &out, kc, dyn, nil, outputText, now); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"NodePool spot: 2 nodes",
		"Would do: Empty consolidation: delete node spot-2; 0 pod(s) move",
		"spot-1  DoNotDisrupt  pod shop/db is annotated sluice.dev/do-not-disrupt=true",
		"NodePool gpu: 2 nodes",
		"(pool)  Disabled      NodePool gpu has no provider sluice runs",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("plan does not show %q:\n%s", s, out.String())
		}
	}

	out.Reset()
	if err := runPlan(context.Background(), &out, kc, dyn, []string{"spot"}, outputJSON, now); err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Pool    string `json:"pool"`
		Command *struct {
			Kind  string   `json:"kind"`
			Nodes []string `json:"nodes"`
		} `json:"command"`
		Blocked []struct {
			Node, Reason string
		} `json:"blocked"`
	}
	if err := json.Unmarshal(out.Bytes(), &plans); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out.String())
	}
	if len(plans) != 1 || plans[0].Pool != "spot" || plans[0].Command == nil || plans[0].Command.Kind != "Empty" ||
		strings.Join(plans[0].Command.Nodes, ",") != "spot-2" {
		t.Fatalf("plan for spot = %+v; want one Empty command deleting spot-2", plans)
	}
	if len(plans[0].Blocked) != 1 || plans[0].Blocked[0].Node != "spot-1" || plans[0].Blocked[0].Reason != "DoNotDisrupt" {
		t.Errorf("blocked = %+v; want spot-1 DoNotDisrupt", plans[0].Blocked)
	}

	err := runPlan(context.Background(), &out, kc, dyn, []string{"nope"}, outputText, now)
	if err == nil || !strings.Contains(err.Error(), "node pool nope not found") {
		t.Errorf("plan of a missing pool: error %v; want one naming it", err)
	}
}

// TestPlanArgumentsBeforeTheCluster: disruption, consolidation and upgrades
// are planned, an upgrade of one pool, and that is said before any
// kubeconfig is read.
func TestPlanArgumentsBeforeTheCluster(t *testing.T) {
	for _, args := range [][]string{{"plan", "expiry"}, {"plan", "upgrade"}, {"plan", "upgrade", "a", "b"}} {
		cmd := NewRootCommand()
		cmd.SetArgs(append(args, "--kubeconfig", "/nonexistent"))
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "sluice plan upgrade POOL --image IMAGE") {
			t.Errorf("%q: error %v; want the usage", args, err)
		}
	}
}
