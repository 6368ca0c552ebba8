package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// TestDrainCommandContract checks what scripts rely on: the JSON report's
// shape, exit 0 when drained, 3 when a pod could not leave, 1 on bad input.
func TestDrainCommandContract(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the sandbox")
	}
	sluice := buildSluice(t)
	env := sandboxtest.New(t)
	kubeconfig := writeKubeconfig(t, env)
	pool := fixture.AKSPool(sandboxtest.UniqueName("cli"), 2)
	nodes := env.CreateNodes(t, pool)
	ns := env.Namespace
	env.Create(t,
		fixture.Deployment(ns, "solo", 1, hostname(nodes[0].Name)),
		fixture.PDB(ns, "solo", "solo", fixture.MinAvailable("1")),
		fixture.Deployment(ns, "web", 1, hostname(nodes[1].Name), fixture.ExitsAfter(0.5)),
	)
	env.WaitForPods(t, "app in (solo,web)", 2)
	waitForBudget(t, env, "solo")

	out, _, code := run(t, sluice, "drain", nodes[0].Name, "--kubeconfig", kubeconfig, "-o", "json")
	if code != 3 {
		t.Errorf("drain of a node held by a budget: exit %d, want 3", code)
	}
	var report drain.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	pod := raw["nodes"].([]any)[0].(map[string]any)["pods"].([]any)[0].(map[string]any)
	for _, field := range []string{"namespace", "name", "outcome", "reason", "message", "pdb"} {
		if _, ok := pod[field]; !ok {
			t.Errorf("JSON pod entry lacks %q: %v", field, pod)
		}
	}
	if p := report.Nodes[0].Pods[0]; p.Reason != drain.ReasonPDBDeadlock || p.PDB != "solo" || report.Nodes[0].Outcome != drain.NodeBlocked {
		t.Errorf("report: %+v", report.Nodes[0])
	}

	out, errOut, code := run(t, sluice, "drain", nodes[1].Name, "--kubeconfig", kubeconfig)
	if code != 0 || !strings.Contains(out, "Drained") {
		t.Errorf("drain of a node that can empty: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "cordoned") || !strings.Contains(errOut, "evicted") {
		t.Errorf("progress on stderr should name the steps, got:\n%s", errOut)
	}

	for _, bad := range [][]string{
		{"drain", nodes[1].Name, "--kubeconfig", kubeconfig, "--deadline", "soon"},
		{"drain", nodes[1].Name, "--kubeconfig", kubeconfig, "--on-deadline", "panic"},
		{"drain", nodes[1].Name, "--kubeconfig", kubeconfig, "--grace-period", "-5"},
		{"drain", nodes[1].Name, "--kubeconfig", kubeconfig, "-l", "a=b"},
		{"drain", "--kubeconfig", kubeconfig},
		{"drain", "no-such-node", "--kubeconfig", kubeconfig},
	} {
		_, errOut, code := run(t, sluice, bad...)
		if code != 1 || !strings.Contains(errOut, "error:") {
			t.Errorf("sluice %v: exit %d, stderr %q; want 1 and an error saying what to fix", bad[1:], code, errOut)
		}
	}
}

func waitForBudget(t *testing.T, env *sandboxtest.Env, name string) {
	t.Helper()
	env.WaitFor(t, 30*time.Second, "budget "+name, func(ctx context.Context) (bool, error) {
		p, err := env.Client.PolicyV1().PodDisruptionBudgets(env.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods > 0, nil
	})
}
