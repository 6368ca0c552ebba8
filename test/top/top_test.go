// Package top tests `sluice top` as a person uses it: the built binary in a
// terminal (a detached tmux session), on a sandbox it starts itself, with
// the cloud and the cluster changing under it, asserting on what the screen
// shows at each step.
package top

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/internal/testenv"
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	sandboxtest.RemoveBinary()
	os.Exit(code)
}

// TestTopInTmux: on the sample cluster, sluice top shows the batch pool and
// its budgets; a Preempt of a spot node whose workers' PDB allows no
// disruption shows the node blocked, naming the PDB, and the event counting
// down; the node's detail (enter) says what explain says and which pods the
// drain cannot move, and the pods leaving as its deadline nears;
// a drift of the batch pool spends its budget (it counts down) and gives it
// back once the nodes are replaced; q quits.
func TestTopInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		testenv.Missing(t, "tmux", "the test of sluice top runs it in a detached tmux session: apt-get install tmux")
	}
	tools, err := sandbox.FindBinaries(context.Background(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	sluice := sandboxtest.Sluice(t)
	dir := filepath.Join(t.TempDir(), "sb")
	common := []string{"--name", "top-e2e", "--dir", dir}
	out, errOut, code := run(t, sluice, append([]string{"sandbox", "up", "--tools-bin", tools}, common...)...)
	if code != 0 {
		t.Fatalf("sandbox up exited %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() { run(t, sluice, append([]string{"sandbox", "down"}, common...)...) })
	m := regexp.MustCompile(`(?m)^\s*kubeconfig: (\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("sandbox up did not print the kubeconfig path:\n%s", out)
	}
	kubeconfig := m[1]
	kubectl := func(args ...string) string {
		t.Helper()
		out, errOut, code := run(t, filepath.Join(tools, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		if code != 0 {
			t.Fatalf("kubectl %v: exit %d: %s", args, code, errOut)
		}
		return out
	}

	// Not a terminal: refused, pointing to the watch that prints lines.
	if out, errOut, code := run(t, sluice, "top", "--kubeconfig", kubeconfig); code != 1 || !strings.Contains(errOut, "stdout is not a terminal") ||
		!strings.Contains(errOut, "sluice status -w") {
		t.Errorf("sluice top into a pipe: exit %d\n%s%s; want 1, pointing to sluice status -w", code, out, errOut)
	}

	term := &pane{t: t, tmux: tmux, socket: "sluice-top-" + utilrand.String(6), session: "live"}
	t.Cleanup(term.kill)
	// Colour as on a developer's terminal, whatever the test's own
	// environment says (CI, NO_COLOR, a plain TERM turn it off).
	term.start(fmt.Sprintf("env -u CI -u NO_COLOR TERM=xterm-256color %s top --kubeconfig %s; echo \"sluice top exited $?\"; sleep 600", sluice, kubeconfig))

	// The sample's pool: 4 nodes, none out of service, 50 % = 2 allowed
	// for drift; the nodes of the AKS pools, in no pool.
	term.waitFor("the batch pool, 4 nodes, Drifted 2/2", time.Minute, func(s string) bool {
		return strings.Contains(s, "POOL batch  kwok (True)  4 nodes, 0 out of service") && strings.Contains(s, "Drifted 2/2") &&
			strings.Contains(s, "NO POOL  7 node(s)")
	})

	// A Preempt of the spot node with the most workers, whose PDB now
	// allows no disruption.
	spot := busiestNode(t, kubectl("get", "pods", "-n", "shop", "-l", "app=worker", "-o", "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}"))
	kubectl("patch", "pdb", "worker", "-n", "shop", "--type", "merge", "-p", `{"spec":{"maxUnavailable":0}}`)
	if out, errOut, code := run(t, sluice, append([]string{"sandbox", "event", "--node", spot, "--type", "Preempt", "--in", "60s"}, common...)...); code != 0 {
		t.Fatalf("sandbox event: exit %d\n%s%s", code, out, errOut)
	}
	blocked := regexp.MustCompile(regexp.QuoteMeta(spot) + `\s+blocked\s+\d+ pod\(s\) cannot leave: shop/worker-\S+: PDB\w+: PodDisruptionBudget worker`)
	countdown := regexp.MustCompile(`Preempt \S+ on ` + regexp.QuoteMeta(spot) + `: in (\d+):(\d\d)`)
	screen := term.waitFor("the spot node blocked by PDB worker, the Preempt counting down", time.Minute, func(s string) bool {
		return blocked.MatchString(s) && countdown.MatchString(s)
	})
	t.Logf("the screen of a blocked drain (docs/images/top.png is drawn from it):\n%s", screen)
	first := seconds(countdown.FindStringSubmatch(screen))
	term.waitFor("the Preempt's countdown to tick", 10*time.Second, func(s string) bool {
		m := countdown.FindStringSubmatch(s)
		return m != nil && seconds(m) < first
	})

	// Enter on the node: explain's words, and the drain as it happens.
	term.keys("/")
	term.keys("-l", spot)
	term.keys("Enter")
	term.keys("Enter")
	left := regexp.MustCompile(`Pods: (\d+) of (\d+) left`)
	screen = term.waitFor("the node's explanation and its refused pods", 15*time.Second, func(s string) bool {
		return strings.Contains(s, "Verdict:") && strings.Contains(s, "Maintenance:") && left.MatchString(s) &&
			regexp.MustCompile(`shop/worker-\S+\s+refused: PDB\w+: PodDisruptionBudget worker`).MatchString(s)
	})
	// The PDB never allows an eviction (a deadlock, the drain says), so
	// the drain deletes the workers when only their grace is left before
	// the deadline: they leave.
	before, _ := strconv.Atoi(left.FindStringSubmatch(screen)[1])
	term.waitFor("the workers to leave as the deadline nears", 45*time.Second, func(s string) bool {
		if strings.Contains(s, "leaving (terminating)") || strings.Contains(s, "is gone") {
			return true
		}
		m := left.FindStringSubmatch(s)
		n := before
		if m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		return n < before
	})
	term.keys("Escape")
	term.keys("Escape") // and the filter
	term.waitFor("the list again", 10*time.Second, func(s string) bool { return strings.Contains(s, "POOL batch") })

	// Drift: the pool's image changes; its budget is spent (it counts down)
	// and given back once the replacements are Ready and the old nodes gone.
	kubectl("patch", "nodepool", "batch", "--type", "merge", "-p", `{"spec":{"template":{"image":"AKSUbuntu-2204gen2containerd-202612.01.0"}}}`)
	spent := regexp.MustCompile(`Drifted [01]/2`)
	term.waitFor("the drift budget spent", time.Minute, func(s string) bool {
		return spent.MatchString(s) && regexp.MustCompile(`POOL batch  kwok \(True\)  \d+ nodes, [12] out of service`).MatchString(s)
	})
	term.waitFor("the drift budget given back, no node drifted", 2*time.Minute, func(s string) bool {
		return strings.Contains(s, "POOL batch  kwok (True)  4 nodes, 0 out of service: serving 4") && strings.Contains(s, "Drifted 2/2") &&
			!strings.Contains(s, "drifted]")
	})

	// NO_COLOR on a narrow terminal: the same pools, in plain text.
	plain := &pane{t: t, tmux: tmux, socket: term.socket, session: "nocolor"}
	plain.startSized(fmt.Sprintf("NO_COLOR=1 %s top --kubeconfig %s; echo \"sluice top exited $?\"; sleep 600", sluice, kubeconfig), 72, 24)
	plain.waitFor("the batch pool at 72 columns", time.Minute, func(s string) bool { return strings.Contains(s, "POOL batch") })
	styled := regexp.MustCompile(`\x1b\[[0-9;]*[1-9][0-9;]*m`) // an SGR other than a reset
	if esc := term.cmd("capture-pane", "-p", "-e", "-t", term.session); !styled.MatchString(esc) {
		t.Errorf("the coloured screen has no colour or emphasis escapes, so the NO_COLOR check below cannot fail:\n%q", esc)
	}
	if esc := plain.cmd("capture-pane", "-p", "-e", "-t", plain.session); styled.MatchString(esc) {
		t.Errorf("NO_COLOR: the screen has colour or emphasis escapes:\n%q", esc)
	}
	plain.keys("q")
	plain.waitFor("the plain sluice top to quit with 0", 10*time.Second, func(s string) bool { return strings.Contains(s, "sluice top exited 0") })

	// The API server goes away: the screen says so, and every row is
	// marked as not live.
	if out, errOut, code := run(t, sluice, append([]string{"sandbox", "down"}, common...)...); code != 0 {
		t.Fatalf("sandbox down: exit %d\n%s%s", code, out, errOut)
	}
	term.waitFor("the connection lost, the rows marked stale", time.Minute, func(s string) bool {
		return strings.Contains(s, "connection lost") && strings.Contains(s, "  STALE  ") && strings.Contains(s, "~POOL batch")
	})

	term.keys("q")
	term.waitFor("sluice top to quit with 0", 10*time.Second, func(s string) bool { return strings.Contains(s, "sluice top exited 0") })
}

// pane is a detached tmux session of its own server. (Name sessions so
// tmux cannot read them as a pane token: "-t top" is the top pane of the
// current window, whichever session that is.)
type pane struct {
	t               *testing.T
	tmux            string
	socket, session string
}

func (p *pane) cmd(args ...string) string {
	p.t.Helper()
	var out, errOut bytes.Buffer
	c := exec.Command(p.tmux, append([]string{"-L", p.socket}, args...)...) //nolint:gosec // tmux, found on the PATH
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Run(); err != nil {
		p.t.Fatalf("tmux %v: %v: %s", args, err, errOut.String())
	}
	return out.String()
}

// start runs shell in a 160x50 session.
func (p *pane) start(shell string) { p.startSized(shell, 160, 50) }

// startSized runs shell in a session of width x height cells.
func (p *pane) startSized(shell string, width, height int) {
	p.cmd("new-session", "-d", "-s", p.session, "-x", strconv.Itoa(width), "-y", strconv.Itoa(height), shell)
}

func (p *pane) keys(keys ...string) {
	p.cmd(append([]string{"send-keys", "-t", p.session}, keys...)...)
}

func (p *pane) capture() string { return p.cmd("capture-pane", "-p", "-t", p.session) }

func (p *pane) kill() {
	_ = exec.Command(p.tmux, "-L", p.socket, "kill-server").Run() //nolint:gosec // tmux, found on the PATH
}

// waitFor captures the pane until ok holds, and returns that screen; after
// timeout it fails with the last screen.
func (p *pane) waitFor(what string, timeout time.Duration, ok func(string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := p.capture()
		if ok(s) {
			p.t.Logf("on screen: %s", what)
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("waited %s for %s; the screen:\n%s", timeout, what, s)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// busiestNode is the node named most often in lines.
func busiestNode(t *testing.T, lines string) string {
	count := map[string]int{}
	best := ""
	for _, n := range strings.Fields(lines) {
		count[n]++
		if count[n] > count[best] {
			best = n
		}
	}
	if best == "" {
		t.Fatal("no worker pod is bound to a node")
	}
	return best
}

func seconds(m []string) int {
	minutes, _ := strconv.Atoi(m[1])
	secs, _ := strconv.Atoi(m[2])
	return minutes*60 + secs
}

func run(t *testing.T, name string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...) //nolint:gosec // test binaries
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
