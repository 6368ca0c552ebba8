package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The bad-input table: every command of the tree (walked, so a command added
// later is covered with no edit here) run as a user would run it, as its own
// process (this test binary, re-executed as sluice), against bad input: an
// API server that is down, one that never answers, one that fails every
// request, no kubeconfig at all, a malformed one, a malformed --server, and
// bad flag values. Each case must end within its bound with exit status 1 and
// one line naming the problem, having asked a cluster for nothing when the
// input alone was wrong and written nothing when it asked. The services
// (controller, agent) must instead retry at a slowing pace, one line per
// attempt, and stop cleanly on SIGTERM.

// runAsCLI, set in a child's environment, makes this test binary run sluice.
const runAsCLI = "SLUICE_TEST_RUN_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(runAsCLI) == "1" {
		os.Args = append([]string{"sluice"}, os.Args[1:]...)
		os.Exit(Execute())
	}
	os.Exit(m.Run())
}

// services are the commands that run until stopped: they wait for the API
// server instead of failing.
var services = []string{"sluice agent", "sluice controller"}

// sampleFlags are what a command needs besides the arguments its Use line
// names, to get as far as calling the cluster. A new command whose Use line
// says it all needs nothing here; one that needs more is told so by the test.
var sampleFlags = map[string][]string{
	"sluice agent":        {"--node", "node-a"},
	"sluice upgrade pool": {"--image", "AKSUbuntu-2204gen2containerd-202612.01.0"},
	"sluice import aks":   {"--dry-run"}, // the diff is what reads the cluster
}

// worksOffline are the commands that read a cluster only when one is
// configured (an import: the pool its settings go into, the other side of its
// diff) and otherwise work from their input alone, saying so. With no cluster
// configured they get as far as their input (here the Use line's FILE, which
// does not exist); any other bad configuration is refused as for the rest.
var worksOffline = map[string]bool{"sluice import kured": true, "sluice import aks": true}

// badFlags are each command's own bad values, and the text the refusal must
// hold. Flags every command of a kind shares are in commonBadFlags.
var badFlags = map[string][]badFlag{
	"sluice drain": {
		{[]string{"--parallel", "0"}, "--parallel 0: must be at least 1"},
		{[]string{"--parallel", "-1"}, "--parallel -1: must be at least 1"},
		{[]string{"--max-in-flight", "0"}, "--max-in-flight 0: must be at least 1"},
		{[]string{"--max-in-flight", "-1"}, "--max-in-flight -1: must be at least 1"},
		{[]string{"--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"--timeout", "soon"}, `invalid argument "soon" for "--timeout"`},
		{[]string{"--deadline", "yesterday"}, `--deadline "yesterday"`},
		{[]string{"--deadline", "-5s"}, "--deadline -5s"},
		{[]string{"--on-deadline", "panic"}, `--on-deadline "panic"`},
		{[]string{"--dry-run=maybe"}, `--dry-run "maybe"`},
		{[]string{"--chunk-size", "-1"}, "--chunk-size -1"},
		{[]string{"--grace-period", "-2"}, "--grace-period -2"},
		{[]string{"--skip-wait-for-delete-timeout", "-1"}, "--skip-wait-for-delete-timeout -1"},
		{[]string{"--pod-selector", "a in (b"}, "--pod-selector"},
	},
	"sluice doctor": {
		{[]string{"--stuck-after", "0s"}, "--stuck-after 0s"},
	},
	"sluice upgrade pool": {
		{[]string{"--max-surge", "150%"}, `--max-surge "150%"`},
		{[]string{"--max-surge", "-3"}, "--max-surge -3"},
		{[]string{"--max-unavailable", "lots"}, `--max-unavailable "lots"`},
		{[]string{"--undrainable-node-behavior", "Nope"}, `--undrainable-node-behavior "Nope"`},
		{[]string{"--drain-timeout", "1s"}, "--drain-timeout 1s"},
		{[]string{"--node-soak-duration", "2h"}, "--node-soak-duration 2h"},
		{[]string{"--max-blocked-nodes", "-1"}, "--max-blocked-nodes -1"},
	},
	"sluice upgrade status": {
		{[]string{"--interval", "0s"}, "--interval 0s"},
	},
	"sluice controller": {
		{[]string{"--metrics-bind-address", "nope:nope"}, `--metrics-bind-address "nope:nope"`},
		{[]string{"--health-probe-bind-address", "8081"}, `--health-probe-bind-address "8081"`},
		{[]string{"--request-timeout", "0s"}, "--request-timeout 0s"},
		{[]string{"--timeline-retention", "-1h"}, "--timeline-retention -1h"},
	},
	"sluice agent": {
		{[]string{"--imds-endpoint", "not a url"}, `--imds-endpoint "not a url"`},
		{[]string{"--cloud", "mars"}, `--cloud "mars"`},
		{[]string{"--poll-interval", "1ms"}, "--poll-interval 1ms"},
		{[]string{"--metrics-bind-address", "nope:nope"}, `--metrics-bind-address "nope:nope"`},
		{[]string{"--reboot-check-period", "1s"}, "--reboot-check-period 1s: use 5s or more"},
		{[]string{"--reboot-sentinel", "reboot-required"}, `--reboot-sentinel "reboot-required": give an absolute path`},
		{[]string{"--reboot-sentinel-command", "needs-reboot", "--reboot-sentinel", "/run/reboot-required"},
			`--reboot-sentinel-command "needs-reboot" and --reboot-sentinel "/run/reboot-required": give one`},
		{[]string{"--reboot-sentinel-command", " "}, `--reboot-sentinel-command " ": give a command`},
	},
	"sluice sandbox event": {
		{[]string{"--node", "node-a", "--type", "Explode"}, `--type "Explode"`},
		{[]string{"--node", "node-a", "--type", "Preempt", "--in", "-1s"}, "--in -1s"},
	},
	"sluice sandbox fault": {
		{[]string{"--node", "node-a"}, "say what breaks"},
		{[]string{"--node", "node-a", "--not-ready", "-1m"}, "duration -1m0s must be positive"},
		{[]string{"--node", "node-a", "--not-ready", "1m", "--condition", "KernelDeadlock"}, "not both"},
		{[]string{"--node", "node-a", "--condition", "KernelDeadlock"}, "--condition needs --for"},
		{[]string{"--node", "node-a", "--condition", "no spaces allowed", "--for", "1m"}, `--condition "no spaces allowed" is not a condition type`},
		{[]string{"--node", "node-a", "--condition", "Ready", "--for", "1m"}, "use --not-ready"},
		{[]string{"--node", "node-a", "--clear", "--not-ready", "1m"}, "give it alone"},
	},
}

type badFlag struct {
	args []string
	want string
}

// commonBadFlags are the bad values of flags shared by many commands, for the
// commands that have them.
var commonBadFlags = []struct {
	flag string
	badFlag
}{
	{"output", badFlag{[]string{"-o", "xml"}, `"xml"`}},
	{"kube-api-qps", badFlag{[]string{"--kube-api-qps", "-1"}, "--kube-api-qps -1"}},
	{"v", badFlag{[]string{"-v", "-1"}, "-v -1"}},
	{"selector", badFlag{[]string{"-l", "a in (b"}, "--selector"}},
}

func TestBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice as a process many times")
	}
	commands := leafCommands(NewRootCommand())
	if len(commands) < 10 {
		t.Fatalf("found %d commands in the tree; the walk is broken", len(commands))
	}
	for path := range badFlags {
		if !slices.ContainsFunc(commands, func(c *cobra.Command) bool { return c.CommandPath() == path }) {
			t.Errorf("badFlags names %q, which is no command: update the table", path)
		}
	}
	for _, cmd := range commands {
		path := cmd.CommandPath()
		// What the cases need from the command is read before they run in
		// parallel: cobra merges a parent's flags on the first look.
		cmd := describe(cmd)
		t.Run(strings.ReplaceAll(strings.TrimPrefix(path, "sluice "), " ", "_"), func(t *testing.T) {
			t.Parallel()
			base := cmd.invocation
			// Bad flag values: refused by name before the cluster is asked
			// anything, with a server that would answer as a cluster does.
			var cases []badFlag
			for _, c := range commonBadFlags {
				if hasFlag(cmd, c.flag) {
					cases = append(cases, c.badFlag)
				}
			}
			cases = append(cases, badFlag{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"})
			cases = append(cases, badFlags[path]...)
			for _, c := range cases {
				api := newRecordingAPI(t)
				args := append(append(slices.Clone(base), connectTo(cmd, api.URL)...), c.args...)
				res := runCLI(t, args, nil, 10*time.Second)
				res.wantRefusal(t, c.want)
				if n := api.requests(); len(n) > 0 {
					t.Errorf("%s: refused, but asked the cluster first: %v", res.cmdline, n)
				}
			}
			if !hasFlag(cmd, "kubeconfig") {
				return
			}
			if slices.Contains(services, path) {
				testServiceWaits(t, base)
			} else {
				testCommandBounded(t, cmd, base)
			}
			testConfiguration(t, path, base)
		})
	}
}

// TestFlagUsage: pflag reads a back-quoted word in a flag's usage as the
// value's name, so `sluice explain node NODE` in a usage text would print as
// the flag's type in --help.
func TestFlagUsage(t *testing.T) {
	for _, cmd := range leafCommands(NewRootCommand()) {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.ContainsAny(name, " \t") {
				t.Errorf("%s --%s: its usage's back-quoted %q would be shown as the value's name", cmd.CommandPath(), f.Name, name)
			}
		})
	}
}

// testCommandBounded: a one-shot command fails within its bound, in one
// line naming the server and the cause, whether the server is down, never
// answers, or fails every request; and writes nothing.
func testCommandBounded(t *testing.T, cmd command, base []string) {
	down := closedAddress(t)
	res := runCLI(t, append(slices.Clone(base), "--server", "https://"+down), nil, 10*time.Second)
	res.wantRefusal(t, "cannot reach the API server at https://"+down+" (--server): ", "connection refused")

	silent := silentServer(t)
	res = runCLI(t, append(slices.Clone(base), "--server", "https://"+silent, "--request-timeout", "1s"), nil, 6*time.Second)
	res.wantRefusal(t, "cannot reach the API server at https://"+silent+" (--server): no answer within 1s")

	// A server that answers /version and fails everything else: the command
	// fails within --request-timeout, and writes nothing.
	api := newRecordingAPI(t)
	api.failAll = true
	res = runCLI(t, append(slices.Clone(base), connectTo(cmd, api.URL)...), nil, 20*time.Second)
	if res.code != ExitError || res.timedOut {
		t.Errorf("%s against a failing API server: exit %d (timed out %v), want %d; stderr:\n%s", res.cmdline, res.code, res.timedOut, ExitError, res.stderr)
	}
	for _, r := range api.requests() {
		if !strings.HasPrefix(r, "GET ") {
			t.Errorf("%s against a failing API server wrote %s", res.cmdline, r)
		}
	}

	if cmd.path == "sluice drain" {
		// The issue's own case: --timeout bounds the drain's first contact.
		res = runCLI(t, append(slices.Clone(base), "--server", "https://"+silent, "--timeout", "2s"), nil, 6*time.Second)
		res.wantRefusal(t, "cannot reach the API server at https://"+silent+" (--server): no answer within 2s")
	}
}

// testServiceWaits: a service keeps trying a server that is down, one log
// line per attempt, each attempt waiting twice as long as the one before
// (read from the log's own times, so a slow machine cannot fake a flood or
// hide one), and stops cleanly on SIGTERM.
func testServiceWaits(t *testing.T, base []string) {
	down := closedAddress(t)
	args := append(slices.Clone(base), "--server", "https://"+down)
	cmdline := "sluice " + strings.Join(args, " ")
	c := cliCommand(t, args, nil)
	var out lockedBuffer
	c.Stderr, c.Stdout = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Three attempts come at 0, 1 and 3 s; wait for them, with a deadline.
	deadline := time.Now().Add(30 * time.Second)
	for len(retries(out.String())) < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	_ = c.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s: stopped with %v after SIGTERM, want exit 0; output:\n%s", cmdline, err, out.String())
		}
	case <-time.After(10 * time.Second):
		_ = c.Process.Kill()
		t.Fatalf("%s: still running 10s after SIGTERM; output:\n%s", cmdline, out.String())
	}
	attempts := retries(out.String())
	if len(attempts) < 3 {
		t.Fatalf("%s: %d attempts logged in 30s, want 3 (at 0, 1 and 3 s); output:\n%s", cmdline, len(attempts), out.String())
	}
	for i, a := range attempts {
		if a.Server != "https://"+down || !strings.Contains(a.Cause, "connection refused") {
			t.Errorf("attempt %d names server %q, cause %q; want the server and the refusal", i+1, a.Server, a.Cause)
		}
		if i == 0 {
			continue
		}
		prev := attempts[i-1]
		wait, err := time.ParseDuration(prev.RetryIn)
		if err != nil {
			t.Fatalf("attempt %d: retryIn %q: %v", i, prev.RetryIn, err)
		}
		if gap := a.Time.Sub(prev.Time); gap < wait*9/10 {
			t.Errorf("attempt %d came %s after the one before, which said it would wait %s: a flood", i+1, gap, wait)
		}
		if next, _ := time.ParseDuration(a.RetryIn); next != min(2*wait, time.Minute) {
			t.Errorf("attempt %d waits %s after one that waited %s; want twice as long (at most 1m)", i+1, next, wait)
		}
	}
	if lines := strings.Count(out.String(), "\n"); lines > len(attempts)+3 {
		t.Errorf("%s: %d lines of output for %d attempts: a flood; output:\n%s", cmdline, lines, len(attempts), out.String())
	}
}

// retry is one logged attempt to reach the API server.
type retry struct {
	Time    time.Time `json:"time"`
	Msg     string    `json:"msg"`
	Server  string    `json:"server"`
	Cause   string    `json:"cause"`
	RetryIn string    `json:"retryIn"`
}

// retries reads the attempts from a service's JSON log.
func retries(log string) []retry {
	var out []retry
	for _, line := range strings.Split(log, "\n") {
		var r retry
		if json.Unmarshal([]byte(line), &r) == nil && r.Msg == "API server unreachable, retrying" {
			out = append(out, r)
		}
	}
	return out
}

// lockedBuffer is a buffer a child process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testConfiguration: no configuration at all, a malformed kubeconfig, a
// malformed --server and a kubeconfig pointing at a server that is down, each
// named at once.
func testConfiguration(t *testing.T, path string, base []string) {
	home := t.TempDir()
	res := runCLI(t, slices.Clone(base), []string{"HOME=" + home}, 5*time.Second)
	if worksOffline[path] {
		res.wantRefusal(t, "file-a")
	} else {
		res.wantRefusal(t, "no cluster to talk to: looked for --kubeconfig (not given), $KUBECONFIG (unset), "+filepath.Join(home, ".kube", "config")+" (not found)", "KUBERNETES_SERVICE_HOST is unset")
	}

	bad := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(bad, []byte("clusters: [this is not\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, append(slices.Clone(base), "--kubeconfig", bad), nil, 5*time.Second)
	res.wantRefusal(t, "loading kubeconfig", bad)

	res = runCLI(t, append(slices.Clone(base), "--kubeconfig", filepath.Join(home, "missing")), nil, 5*time.Second)
	res.wantRefusal(t, filepath.Join(home, "missing"))

	res = runCLI(t, append(slices.Clone(base), "--server", "::::"), nil, 5*time.Second)
	res.wantRefusal(t, `--server "::::": host ":::" is neither an IP address nor a DNS name`)

	down := closedAddress(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(kubeconfigFor("https://"+down)), 0o600); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(services, path) {
		return // a service waits for it: testServiceWaits
	}
	res = runCLI(t, append(slices.Clone(base), "--kubeconfig", kc), nil, 10*time.Second)
	res.wantRefusal(t, "cannot reach the API server at https://"+down+" (kubeconfig "+kc+", context ctx): ", "connection refused")
}

// result is one run of sluice.
type result struct {
	cmdline  string
	code     int
	stderr   string
	timedOut bool
}

// wantRefusal: exit 1 within the bound, and one line of error holding each
// of want.
func (r result) wantRefusal(t *testing.T, want ...string) {
	t.Helper()
	if r.timedOut {
		t.Errorf("%s: still running at its bound; stderr:\n%s", r.cmdline, r.stderr)
		return
	}
	if r.code != ExitError {
		t.Errorf("%s: exit %d, want %d; stderr:\n%s", r.cmdline, r.code, ExitError, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "error: ") {
		t.Errorf("%s: want one line of error, got %d:\n%s", r.cmdline, len(lines), r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("%s: the error does not say %q:\n%s", r.cmdline, w, r.stderr)
		}
	}
}

// runCLI runs sluice with args and env (over a clean environment: no
// KUBECONFIG, not in a cluster) and kills it at bound.
func runCLI(t *testing.T, args, env []string, bound time.Duration) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	c := cliCommand(t, args, env)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	c.Stdout = &bytes.Buffer{}
	err := c.Start()
	if err != nil {
		t.Fatal(err)
	}
	go func() { <-ctx.Done(); _ = c.Process.Kill() }()
	err = c.Wait()
	res := result{cmdline: "sluice " + strings.Join(args, " "), stderr: stderr.String(), timedOut: ctx.Err() != nil}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	default:
		t.Fatalf("running %s: %v", res.cmdline, err)
	}
	t.Logf("%s -> exit %d: %s", res.cmdline, res.code, strings.TrimSpace(res.stderr))
	return res
}

// cliCommand is this test binary run as sluice, in an environment with no
// cluster configuration but what the case gives.
func cliCommand(t *testing.T, args, env []string) *exec.Cmd {
	c := exec.Command(os.Args[0], args...)
	c.Env = []string{runAsCLI + "=1", "PATH=" + os.Getenv("PATH")}
	for _, kv := range env {
		c.Env = slices.DeleteFunc(c.Env, func(e string) bool { return strings.SplitN(e, "=", 2)[0] == strings.SplitN(kv, "=", 2)[0] })
		c.Env = append(c.Env, kv)
	}
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "HOME=") }) {
		// No ~/.kube/config: a home of its own, empty.
		c.Env = append(c.Env, "HOME="+t.TempDir())
	}
	return c
}

// leafCommands are the runnable commands of the tree, help and completion
// excepted.
func leafCommands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Name() != "help" && c.Name() != "completion" && c.HasParent() {
			out = append(out, c)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return out
}

// command is what the table needs of one command of the tree.
type command struct {
	path       string
	invocation []string
	flags      map[string]bool
}

func describe(c *cobra.Command) command {
	d := command{path: c.CommandPath(), invocation: invocation(c), flags: map[string]bool{}}
	for _, fs := range []*pflag.FlagSet{c.Flags(), c.InheritedFlags()} {
		fs.VisitAll(func(f *pflag.Flag) { d.flags[f.Name] = true })
	}
	return d
}

func hasFlag(cmd command, name string) bool { return cmd.flags[name] }

// invocation is a well-formed call of cmd: its path, the arguments its Use
// line names (the first alternative: literal words as they are, PLACEHOLDERS
// as sample values, --flag VALUE pairs kept), and sampleFlags.
func invocation(cmd *cobra.Command) []string {
	args := strings.Fields(cmd.CommandPath())[1:]
	use := strings.Fields(cmd.Use)[1:]
	for _, w := range use {
		if w == "|" || strings.HasPrefix(w, "[") {
			break
		}
		if placeholder.MatchString(w) {
			w = strings.ToLower(strings.TrimSuffix(w, "...")) + "-a"
		}
		args = append(args, w)
	}
	return append(args, sampleFlags[cmd.CommandPath()]...)
}

var placeholder = regexp.MustCompile(`^[A-Z][A-Z_]*(\.\.\.)?$`)

// connectTo are the flags pointing cmd at server with a short request
// timeout (a service's own --request-timeout is a duration of its own).
func connectTo(cmd command, server string) []string {
	if !hasFlag(cmd, "server") {
		return nil
	}
	return []string{"--server", server, "--insecure-skip-tls-verify", "--request-timeout", "2s"}
}

// recordingAPI answers /version as an API server does and records every
// other request; failAll makes it answer those with 500.
type recordingAPI struct {
	*httptest.Server
	failAll bool
	mu      sync.Mutex
	seen    []string
}

func newRecordingAPI(t *testing.T) *recordingAPI {
	a := &recordingAPI{}
	a.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Method+" "+r.URL.Path)
		a.mu.Unlock()
		if r.URL.Path == "/version" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"major":"1","minor":"34","gitVersion":"v1.34.4"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the test's server fails every request","code":500}`)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *recordingAPI) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// closedAddress is a loopback address nothing listens on.
func closedAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// silentServer accepts connections and never answers.
func silentServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func kubeconfigFor(server string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "` + server + `", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`
}
