package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

func run(t *testing.T, name string, args ...string) (string, string, int) {
	t.Helper()
	return runWith(t, "", name, args...)
}

// runWith is run with stdin.
func runWith(t *testing.T, stdin, name string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...) //nolint:gosec // test binaries
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			t.Fatalf("running %s %v: %v", name, args, err)
		}
		code = exitErr.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

func TestSandboxUpKubectlStatusDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	tools, err := sandbox.FindBinaries(context.Background(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	sluice := sandboxtest.Sluice(t)
	dir := filepath.Join(t.TempDir(), "sb")
	common := []string{"--name", "e2e", "--dir", dir}

	out, errOut, code := run(t, sluice, append([]string{"sandbox", "up", "--tools-bin", tools}, common...)...)
	if code != 0 {
		t.Fatalf("sandbox up exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	t.Cleanup(func() { run(t, sluice, append([]string{"sandbox", "down"}, common...)...) })
	m := regexp.MustCompile(`(?m)^\s*kubeconfig: (\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("sandbox up did not print the kubeconfig path:\n%s", out)
	}
	kubeconfig := m[1]

	// A second `up` of the same sandbox is refused and leaves the first alone.
	_, errOut, code = run(t, sluice, append([]string{"sandbox", "up", "--tools-bin", tools}, common...)...)
	if code != 1 || !strings.Contains(errOut, "already running") {
		t.Errorf("second sandbox up: exit %d, stderr %q; want 1 and 'already running'", code, errOut)
	}

	kubectl := filepath.Join(tools, "kubectl")
	out, errOut, code = run(t, kubectl, "--kubeconfig", kubeconfig, "get", "nodes,pods", "-A", "--no-headers")
	if code != 0 {
		t.Fatalf("kubectl get: exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "node/aks-"); n != 7 {
		t.Errorf("kubectl get nodes shows %d sample nodes, want 7:\n%s", n, out)
	}
	if !strings.Contains(out, "pod/debug") || !strings.Contains(out, "Running") {
		t.Errorf("kubectl get pods does not show the sample workloads running:\n%s", out)
	}

	// The simulated cloud: a Preempt announced through the spot node's own
	// metadata emulator is drained, approved, and carried out (the node goes).
	spot := regexp.MustCompile(`node/(aks-spot-\S+)`).FindStringSubmatch(out)
	if spot == nil {
		t.Fatalf("no spot node in:\n%s", out)
	}
	_, errOut, code = run(t, sluice, append([]string{"sandbox", "event", "--node", "no-such-node", "--type", "Preempt"}, common...)...)
	if code != 1 || !strings.Contains(errOut, "no simulated machine for node") || !strings.Contains(errOut, spot[1]) {
		t.Errorf("event on an unknown node: exit %d, stderr %q; want 1 and the nodes that exist", code, errOut)
	}
	_, errOut, code = run(t, sluice, append([]string{"sandbox", "event", "--node", spot[1], "--type", "Explode"}, common...)...)
	if code != 1 || !strings.Contains(errOut, "use Freeze, Reboot, Redeploy, Preempt, Terminate or Rebalance") {
		t.Errorf("event of an unknown type: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code = run(t, sluice, append([]string{"sandbox", "event", "--node", spot[1], "--type", "Preempt", "--in", "15s"}, common...)...)
	if code != 0 || !strings.Contains(out, "azure Preempt event") {
		t.Fatalf("sandbox event: exit %d\n%s%s", code, out, errOut)
	}
	_, errOut, code = run(t, kubectl, "--kubeconfig", kubeconfig, "wait", "--for=delete", "node/"+spot[1], "--timeout=60s")
	if code != 0 {
		t.Fatalf("the preempted node was not deleted: %s", errOut)
	}
	out, _, _ = run(t, kubectl, "--kubeconfig", kubeconfig, "get", "events", "--field-selector", "involvedObject.name="+spot[1], "-o", "custom-columns=R:.reason", "--no-headers")
	for _, want := range []string{"MaintenanceScheduled", "CordonStarted", "DrainStarted", "DrainCompleted", "EventApproved"} {
		if !strings.Contains(out, want) {
			t.Errorf("the preempted node's events lack %s:\n%s", want, out)
		}
	}

	out, _, code = run(t, kubectl, "version", "--client", "-o", "json")
	var v struct {
		ClientVersion struct{ GitVersion string } `json:"clientVersion"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || !strings.HasPrefix(v.ClientVersion.GitVersion, "v1.34.") {
		t.Errorf("kubectl version: want the pinned v1.34.x, got %q (exit %d)", v.ClientVersion.GitVersion, code)
	}

	out, _, code = run(t, sluice, append([]string{"sandbox", "status", "-o", "json"}, common...)...)
	var status struct {
		Running    bool
		Nodes      int
		Components []struct {
			Name string
			PID  int
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &status) != nil {
		t.Fatalf("sandbox status -o json: exit %d: %s", code, out)
	}
	if !status.Running || status.Nodes != 10 || len(status.Components) != 5 {
		t.Errorf("status: running=%v nodes=%d components=%d; want true, 10 (7 sample nodes less one preempted, 4 in the batch pool), 5", status.Running, status.Nodes, len(status.Components))
	}

	out, errOut, code = run(t, sluice, append([]string{"sandbox", "down"}, common...)...)
	if code != 0 {
		t.Fatalf("sandbox down: exit %d: %s%s", code, out, errOut)
	}
	for _, c := range status.Components {
		if sandbox.Alive(c.PID, c.Name) {
			t.Errorf("%s (pid %d) still runs after sandbox down", c.Name, c.PID)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox down left %s behind (%v)", dir, err)
	}
}
