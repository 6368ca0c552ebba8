package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

// TestStatusWatchPrintsEachChange: `sluice status -w -o json` on a pool of
// two nodes prints the pool once, then a line when a person cordons one of
// its nodes (one more out of service, one fewer allowed), and a line when
// the node is uncordoned again: what the watches delivered, as it happened.
func TestStatusWatchPrintsEachChange(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the sandbox")
	}
	sluice := sandboxtest.Sluice(t)
	env := sandboxtest.New(t)
	kubeconfig := writeKubeconfig(t, env)
	aks := fixture.AKSPool(sandboxtest.UniqueName("watch"), 2)
	nodes := env.CreateNodes(t, aks)
	selector := map[string]any{}
	for k, v := range aks.Selector() {
		selector[k] = v
	}
	createNodePool(t, env, aks.Name, map[string]any{
		"nodeSelector": map[string]any{"matchLabels": selector},
		"provider":     map[string]any{"name": "none"},
		"disruption":   map[string]any{"budgets": []any{map[string]any{"nodes": "50%"}}},
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sluice, "status", "-w", "-o", "json", "--kubeconfig", kubeconfig, aks.Name) //nolint:gosec // the binary under test
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	type line struct {
		Event   string `json:"event"`
		Pool    string `json:"pool"`
		Changes []struct {
			Field string `json:"field"`
			From  any    `json:"from"`
			To    any    `json:"to"`
		} `json:"changes"`
		Status struct {
			Nodes      int `json:"nodes"`
			Disrupting int `json:"disrupting"`
			Budgets    []struct {
				Reason  string `json:"reason"`
				Allowed int    `json:"allowed"`
			} `json:"budgets"`
		} `json:"status"`
	}
	// next reads lines until one is of event, within a minute.
	next := func(event string) line {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case raw, ok := <-lines:
				if !ok {
					t.Fatalf("status -w ended before a %s line: %s", event, stderr.String())
				}
				var l line
				if err := json.Unmarshal([]byte(raw), &l); err != nil {
					t.Fatalf("not one JSON object per line: %q: %v", raw, err)
				}
				if l.Event == event {
					return l
				}
			case <-timeout:
				t.Fatalf("no %s line within a minute; stderr: %s", event, stderr.String())
			}
		}
	}
	allowed := func(l line, reason string) int {
		for _, b := range l.Status.Budgets {
			if b.Reason == reason {
				return b.Allowed
			}
		}
		return -1
	}

	first := next("initial")
	if first.Pool != aks.Name || first.Status.Nodes != 2 || first.Status.Disrupting != 0 || allowed(first, "Drifted") != 1 {
		t.Fatalf("initial line %+v; want %s, 2 nodes, none disrupting, Drifted 1 allowed", first, aks.Name)
	}
	setUnschedulable(t, env, nodes[0].Name, true)
	changed := next("changed")
	if changed.Status.Disrupting != 1 || allowed(changed, "Drifted") != 0 || len(changed.Changes) == 0 || changed.Changes[0].Field != "disrupting" {
		t.Fatalf("after a cordon: %+v; want disrupting 1, Drifted 0 allowed", changed)
	}
	setUnschedulable(t, env, nodes[0].Name, false)
	back := next("changed")
	if back.Status.Disrupting != 0 || allowed(back, "Drifted") != 1 {
		t.Fatalf("after the uncordon: %+v; want disrupting 0, Drifted 1 allowed", back)
	}
	cancel()
	_, _ = io.Copy(io.Discard, stdout)
}
