package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

func TestFileSentinel(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "reboot-required")
	if err := os.WriteFile(present, []byte("*** System restart required ***\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       bool
		cannotTell bool
	}{
		{"present", present, true, false},
		{"absent", filepath.Join(dir, "absent"), false, false},
		{"a path through a file", filepath.Join(present, "reboot-required"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FileSentinel{Path: tc.path}.RebootRequired(t.Context())
			if got != tc.want || (err != nil) != tc.cannotTell {
				t.Errorf("RebootRequired() = %v, %v; want %v, cannot tell: %v", got, err, tc.want, tc.cannotTell)
			}
		})
	}
}

// As kured's --reboot-sentinel-command: exit 0 asks for a reboot, any other
// exit code does not, and a command that does not run to an exit cannot
// tell.
func TestCommandSentinel(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		timeout    time.Duration
		want       bool
		cannotTell string // in the error
	}{
		{name: "exit 0", args: []string{"true"}, want: true},
		{name: "exit 1", args: []string{"false"}},
		{name: "exit 3", args: []string{"sh", "-c", "exit 3"}},
		{name: "not found", args: []string{"/nonexistent/check-reboot"}, cannotTell: "no such file"},
		{name: "timeout", args: []string{"sleep", "30"}, timeout: 200 * time.Millisecond, cannotTell: "no exit within 200ms"},
		{name: "killed", args: []string{"sh", "-c", "kill -9 $$"}, cannotTell: "signal: killed"},
		{name: "no command", cannotTell: "no command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			begin := time.Now()
			got, err := CommandSentinel{Args: tc.args, Timeout: tc.timeout}.RebootRequired(t.Context())
			if got != tc.want {
				t.Errorf("RebootRequired() = %v; want %v", got, tc.want)
			}
			switch {
			case tc.cannotTell == "" && err != nil:
				t.Errorf("RebootRequired() error %v; want an answer", err)
			case tc.cannotTell != "" && (err == nil || !strings.Contains(err.Error(), tc.cannotTell)):
				t.Errorf("RebootRequired() error %v; want one saying %q", err, tc.cannotTell)
			}
			if took := time.Since(begin); took > 5*time.Second {
				t.Errorf("took %s", took)
			}
		})
	}
}

// stubSentinel answers what the test sets.
type stubSentinel struct {
	required bool
	err      error
}

func (s *stubSentinel) RebootRequired(context.Context) (bool, error) { return s.required, s.err }
func (s *stubSentinel) String() string                               { return "stub" }

// The agent writes the reboot annotation with the time it first found the
// sentinel, keeps that time while the sentinel stays (across a restart
// too), removes it when the sentinel goes, leaves it alone when the sentinel
// cannot tell, and writes nothing when nothing changed. (The fake clientset
// stands in for the agent's own writes; the admission policy's part is
// TestLeastPrivilege's.)
func TestRebootAnnotationFollowsTheSentinel(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "reboot-required")
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"}})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	logs := &records{msg: map[string]int{}}
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	ctx := t.Context()
	stub := &stubSentinel{}
	cfg := Config{Node: "n1", Source: maintenance.SourceAzure, Clock: clk, Metrics: m, Reboot: RebootCheck{Sentinel: FileSentinel{Path: file}}}
	a := New(client, slog.New(logs), cfg)
	first := "2026-11-21T10:02:00Z" // the clock at the second step

	for _, step := range []struct {
		name       string
		change     func(t *testing.T)
		want       string // the annotation; "" absent
		wantWrites int
		gauge      float64
	}{
		{name: "no sentinel", want: "", wantWrites: 0, gauge: 0},
		{name: "the sentinel appears", change: func(t *testing.T) { touch(t, file) }, want: first, wantWrites: 1, gauge: 1},
		{name: "the sentinel stays", want: first, wantWrites: 0, gauge: 1},
		{name: "a restarted agent", change: func(*testing.T) { a = New(client, slog.New(logs), cfg) }, want: first, wantWrites: 0, gauge: 1},
		{name: "cannot tell", change: func(*testing.T) {
			stub.err = errors.New("exec: sentinel: not found")
			c := cfg
			c.Reboot.Sentinel = stub
			a = New(client, slog.New(logs), c)
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
		}, want: first, wantWrites: 0, gauge: 1},
		{name: "the sentinel is gone", change: func(*testing.T) { a = New(client, slog.New(logs), cfg) }, want: "", wantWrites: 1, gauge: 0},
		{name: "still gone", want: "", wantWrites: 0, gauge: 0},
	} {
		if step.change != nil {
			step.change(t)
		}
		clk.Step(time.Minute)
		before := countPatches(client)
		node := getFakeNode(t, client)
		required, err := a.cfg.Reboot.Sentinel.RebootRequired(ctx)
		a.takeReboot(node, sentinelReading{required: required, err: err})
		a.publishReboot(ctx, node)
		// Again over the same node, as when the cache does not show the
		// write yet: no second write.
		a.publishReboot(ctx, node)
		got, ok := getFakeNode(t, client).Annotations[contract.AnnotationRebootRequired]
		if got != step.want || ok != (step.want != "") {
			t.Errorf("%s: annotation %q (present %v); want %q", step.name, got, ok, step.want)
		}
		if writes := countPatches(client) - before; writes != step.wantWrites {
			t.Errorf("%s: %d writes; want %d", step.name, writes, step.wantWrites)
		}
		if g := testutil.ToFloat64(m.RebootRequired); g != step.gauge {
			t.Errorf("%s: %s = %v; want %v", step.name, "sluice_agent_reboot_required", g, step.gauge)
		}
	}
	for msg, want := range map[string]int{
		"the node needs a reboot":           1, // written once; the restarted agent keeps the time
		"the node no longer needs a reboot": 1,
		"cannot tell whether the node needs a reboot; leaving its annotation as it is": 1,
	} {
		if got := logs.count(msg); got != want {
			t.Errorf("%q logged %d times; want %d", msg, got, want)
		}
	}
}

// One agent, the sentinel going: logged once, as the annotation goes.
func TestRebootNoLongerRequiredIsLoggedOnce(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	logs := &records{msg: map[string]int{}}
	stub := &stubSentinel{required: true}
	a := New(client, slog.New(logs), Config{Node: "n1", Reboot: RebootCheck{Sentinel: stub}})
	for _, required := range []bool{true, true, false, false} {
		stub.required = required
		node := getFakeNode(t, client)
		a.takeReboot(node, sentinelReading{required: required})
		a.publishReboot(t.Context(), node)
	}
	if _, ok := getFakeNode(t, client).Annotations[contract.AnnotationRebootRequired]; ok {
		t.Error("the annotation is still there")
	}
	for msg, want := range map[string]int{"the node needs a reboot": 1, "the node no longer needs a reboot": 1} {
		if got := logs.count(msg); got != want {
			t.Errorf("%q logged %d times; want %d", msg, got, want)
		}
	}
}

// A value that is no time (written by hand, or garbled) is replaced by the
// time the agent found the sentinel.
func TestRebootAnnotationThatIsNoTimeIsRewritten(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Annotations: map[string]string{contract.AnnotationRebootRequired: "yes please"}}})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	a := New(client, slog.New(slog.DiscardHandler), Config{Node: "n1", Clock: clk, Reboot: RebootCheck{Sentinel: &stubSentinel{required: true}}})
	node := getFakeNode(t, client)
	a.takeReboot(node, sentinelReading{required: true})
	a.publishReboot(t.Context(), node)
	if got, want := getFakeNode(t, client).Annotations[contract.AnnotationRebootRequired], "2026-11-21T10:00:00Z"; got != want {
		t.Errorf("annotation %q; want %q", got, want)
	}
}

// With the check off (as in the sandbox, whose agents read no OS) the agent
// leaves the annotation to whoever sets it: a person asking for a reboot by
// hand, or the sandbox.
func TestRebootCheckOffLeavesTheAnnotationAlone(t *testing.T) {
	const byHand = "2026-11-21T10:00:00Z"
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Annotations: map[string]string{contract.AnnotationRebootRequired: byHand}}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	w := make(scripted)
	done := make(chan error, 1)
	go func() {
		done <- New(client, slog.New(slog.DiscardHandler), Config{Node: "n1", Source: maintenance.SourceAzure, Watcher: w}).Run(ctx)
	}()
	// An answer of the metadata service turns the agent's loop once; its
	// report on the node says the turn is over.
	select {
	case w <- maintenance.Observation{Events: []maintenance.Event{{ID: "A1", Source: maintenance.SourceAzure, Type: maintenance.TypeFreeze, Status: maintenance.StatusScheduled}}}:
	case <-ctx.Done():
		t.Fatal("the agent never read the metadata service")
	}
	for {
		if r, _, _ := maintenance.ReportOf(getFakeNode(t, client)); len(r.Events) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the report never reached the node")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("agent: %v", err)
	}
	if got := getFakeNode(t, client).Annotations[contract.AnnotationRebootRequired]; got != byHand {
		t.Errorf("annotation %q with the check off; want %q, as set by hand", got, byHand)
	}
	if n := countPatches(client); n != 1 {
		t.Errorf("%d writes; want 1, the report", n)
	}
}

// Run reads the sentinel at start and then every period of its clock; a
// restarted agent keeps the time on its node, and removes it once the
// sentinel goes.
func TestRunReportsTheSentinel(t *testing.T) {
	file := filepath.Join(t.TempDir(), "reboot-required")
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// run starts an agent; each read of the sentinel is sent on the channel
	// it returns, so the test steps the clock only between reads.
	run := func(ctx context.Context) (chan bool, chan error) {
		reads, done := make(chan bool, 10), make(chan error, 1)
		sentinel := &tellingSentinel{Sentinel: FileSentinel{Path: file}, reads: reads}
		go func() {
			done <- New(client, slog.New(slog.DiscardHandler), Config{Node: "n1", Source: maintenance.SourceAzure, Watcher: make(scripted), Clock: clk,
				Reboot: RebootCheck{Sentinel: sentinel, Period: time.Hour, Clock: clk}}).Run(ctx)
		}()
		return reads, done
	}
	read := func(reads chan bool, want bool) {
		t.Helper()
		select {
		case got := <-reads:
			if got != want {
				t.Fatalf("the sentinel read %v; want %v", got, want)
			}
		case <-ctx.Done():
			t.Fatal("the agent never read the sentinel")
		}
	}

	first, stop := context.WithCancel(ctx)
	reads, done := run(first)
	read(reads, false)
	touch(t, file)
	clk.Step(time.Hour)
	read(reads, true)
	since := start.Add(time.Hour).Format(time.RFC3339)
	waitForAnnotation(ctx, t, client, since)
	stop()
	if err := <-done; err != nil {
		t.Errorf("agent: %v", err)
	}

	// (A fake clientset's informer may miss writes made while it starts,
	// so the restart, whose informer lists the node afresh, also makes
	// the removal below independent of that.)
	patches := countPatches(client)
	reads, done = run(ctx)
	read(reads, true)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	read(reads, false)
	waitForAnnotation(ctx, t, client, "")
	if n := countPatches(client) - patches; n != 1 {
		t.Errorf("the restarted agent wrote %d times; want once, the removal (the time %s kept)", n, since)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("agent: %v", err)
	}
}

// tellingSentinel sends each answer of its Sentinel on reads.
type tellingSentinel struct {
	Sentinel
	reads chan bool
}

func (s *tellingSentinel) RebootRequired(ctx context.Context) (bool, error) {
	required, err := s.Sentinel.RebootRequired(ctx)
	s.reads <- required
	return required, err
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func getFakeNode(t *testing.T, client *fake.Clientset) *corev1.Node {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func countPatches(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

// waitForAnnotation waits until the node's reboot annotation is want ("":
// absent).
func waitForAnnotation(ctx context.Context, t *testing.T, client *fake.Clientset, want string) {
	t.Helper()
	for ctx.Err() == nil {
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := n.Annotations[contract.AnnotationRebootRequired]; got == want && ok == (want != "") {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the node's %s never became %q", contract.AnnotationRebootRequired, want)
}
