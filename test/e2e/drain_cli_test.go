package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
	sluice := sandboxtest.Sluice(t)
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

// TestDrainWaitsForSlowReplacements: a rollout's replacements take 20 s to
// become Ready and the budget (minAvailable 2 of 3) is at zero meanwhile.
// sluice drain waits, as kubectl drain does, says why while it waits, and
// exits 0 with no budget broken.
func TestDrainWaitsForSlowReplacements(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the sandbox")
	}
	t.Parallel()
	sluice := sandboxtest.Sluice(t)
	env := sandboxtest.New(t)
	kubeconfig := writeKubeconfig(t, env)
	pool := fixture.AKSPool(sandboxtest.UniqueName("slow"), 2)
	nodes := env.CreateNodes(t, pool)
	ns := env.Namespace
	// All three pods start on the first node (the second is cordoned until
	// they have); their replacements can only go to the second.
	setUnschedulable(t, env, nodes[1].Name, true)
	env.Create(t,
		fixture.Deployment(ns, "web", 3, fixture.NodeSelector(pool.Selector()), fixture.StartsAfter(20), fixture.GracePeriod(5), fixture.ExitsAfter(1)),
		fixture.PDB(ns, "web", "web", fixture.MinAvailable("2"), fixture.UnhealthyPodEvictionPolicy(policyv1.IfHealthyBudget)),
	)
	env.WaitForPods(t, "app=web", 3)
	waitForBudget(t, env, "web")
	setUnschedulable(t, env, nodes[1].Name, false)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	low := make(chan int, 1)
	go func() { low <- lowestHealthy(ctx, env, "web") }()

	out, errOut, code := run(t, sluice, "drain", nodes[0].Name, "--kubeconfig", kubeconfig, "--ignore-daemonsets")
	stop()
	if code != 0 {
		t.Fatalf("exit %d; want 0\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, string(drain.ReasonPDBWaitingForPods)) || !strings.Contains(errOut, "to become Ready") {
		t.Errorf("progress never said the drain was waiting for replacements:\n%s", errOut)
	}
	if strings.Contains(errOut, string(drain.ReasonPDBDeadlock)) {
		t.Errorf("progress called a rollout a deadlock:\n%s", errOut)
	}
	if h := <-low; h < 2 {
		t.Errorf("the budget's healthy count fell to %d; minAvailable is 2", h)
	}
}

// lowestHealthy watches a budget until ctx ends and returns the lowest
// currentHealthy its status reported.
func lowestHealthy(ctx context.Context, env *sandboxtest.Env, name string) int {
	lowest := -1
	for ctx.Err() == nil {
		if p, err := env.Client.PolicyV1().PodDisruptionBudgets(env.Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			if h := int(p.Status.CurrentHealthy); lowest < 0 || h < lowest {
				lowest = h
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return lowest
}

func setUnschedulable(t *testing.T, env *sandboxtest.Env, node string, on bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := env.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
