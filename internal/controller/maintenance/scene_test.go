package maintenance_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/agent"
	"github.com/sluice-dev/sluice/internal/controller"
	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/aws"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
	"github.com/sluice-dev/sluice/pkg/maintenance/gcp"
)

const labelPool = "sluice.dev/test-pool"

// scene is one test's cluster: a node with an emulated metadata service and
// an agent, spare nodes for the pods that move, and a running controller.
type scene struct {
	env       *sandboxtest.Env
	id        string
	node      string
	onPool    fixture.PodOption
	endpoint  string
	cloud     maintenance.Source
	azure     *azure.Server
	aws       *aws.Server
	gcp       *gcp.Server
	requests  atomic.Int64 // requests the metadata emulator has answered
	stopAgent func()
}

func logger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// newScene makes one node of the cloud's kind, serves its metadata emulator
// on loopback, and starts its agent; workloads created next land on it.
func newScene(t *testing.T, cloud maintenance.Source) *scene {
	t.Helper()
	env := sandboxtest.New(t)
	s := &scene{env: env, id: sandboxtest.UniqueName("m"), cloud: cloud}
	labels := fixture.WithLabels(map[string]string{labelPool: s.id})
	var pool fixture.Pool
	switch cloud {
	case maintenance.SourceAzure:
		pool = fixture.AKSPool(s.id, 1, labels)
		s.azure = azure.NewServer()
		s.serve(t, s.azure)
	case maintenance.SourceAWS:
		pool = fixture.EKSNodeGroup(s.id, 1, labels)
		s.aws = aws.NewServer(clock.RealClock{})
		s.serve(t, s.aws)
	case maintenance.SourceGCP:
		pool = fixture.KarpenterPool(s.id, 1, labels) // providerID only matters with --cloud auto
		s.gcp = gcp.NewServer(clock.RealClock{})
		s.serve(t, s.gcp)
	}
	s.onPool = fixture.NodeSelector(map[string]string{labelPool: s.id})
	s.node = env.CreateNodes(t, pool)[0].Name
	s.startAgent(t)
	return s
}

func (s *scene) serve(t *testing.T, h http.Handler) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // 127.0.0.1 only
		s.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.endpoint = srv.URL
}

// startAgent runs the node's agent until the test ends or stopAgent.
func (s *scene) startAgent(t *testing.T) {
	t.Helper()
	node, err := s.env.Client.CoreV1().Nodes().Get(context.Background(), s.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := agent.NewWatcher(s.cloud, s.endpoint, node.Spec.ProviderID, clock.RealClock{}, maintenance.DefaultPollInterval, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	approver, _ := w.(maintenance.Approver)
	// An event ends with the first answer without it, as before the agent
	// confirmed ends (internal/agent proves that rule): these scenes time
	// the controller, not the confirmation.
	// It cordons for a Preempt or Terminate in its report's write, as the
	// chart's agent does by default.
	a := agent.New(s.env.Client, logger(t).With("component", "agent"), agent.Config{Node: s.node, Source: s.cloud, Watcher: w, Approver: approver,
		EndConfirmation: maintenance.EndConfirmation{Answers: 1}, CordonInvoluntary: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	s.stopAgent = func() { cancel(); <-done }
	t.Cleanup(func() { cancel(); <-done })
}

// startController runs the controller (every part of it, as `sluice
// controller` does, without leader election) until the test ends or the
// returned stop is called.
func startController(t *testing.T, env *sandboxtest.Env) (stop func()) {
	t.Helper()
	return startControllerWithRegistry(t, env, prometheus.NewRegistry())
}

// startControllerWithRegistry is startController with its metrics in reg.
func startControllerWithRegistry(t *testing.T, env *sandboxtest.Env, reg *prometheus.Registry) (stop func()) {
	t.Helper()
	mgr, err := controller.New(env.Config, controller.Options{
		Identity:        "test-" + t.Name(),
		Workers:         2,
		RequestTimeout:  30 * time.Second,
		MetricsAddress:  "0",
		HealthAddress:   "0",
		Log:             logger(t).With("component", "controller"),
		Registry:        reg,
		SeveralManagers: true,
		// Every drain's timeline is kept, in the test's namespace.
		TimelineNamespace: env.Namespace,
		TimelineRetention: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("controller: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() { cancel(); <-done }
}

// addSpare adds a node the moved pods can go to.
func (s *scene) addSpare(t *testing.T) {
	t.Helper()
	s.env.CreateNodes(t, fixture.EKSNodeGroup(s.id+"-spare", 1, fixture.WithLabels(map[string]string{labelPool: s.id})))
}

func (s *scene) getNode(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := s.env.Client.CoreV1().Nodes().Get(context.Background(), s.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// podsOnNode lists the test's pods bound to the scene's node, terminating
// ones included.
func (s *scene) podsOnNode(ctx context.Context) ([]corev1.Pod, error) {
	list, err := s.env.Client.CoreV1().Pods(s.env.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", s.node).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// reasons lists the reasons of the Events recorded on the node, in order.
func (s *scene) reasons(t *testing.T) []string {
	t.Helper()
	list, err := s.env.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", s.node).String()})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(list.Items, func(a, b corev1.Event) int { return a.FirstTimestamp.Compare(b.FirstTimestamp.Time) })
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason)
	}
	return out
}

// waitForReason waits until the node has an Event with the reason.
func (s *scene) waitForReason(t *testing.T, timeout time.Duration, reason string) {
	t.Helper()
	s.env.WaitFor(t, timeout, "event "+reason+" on "+s.node, func(context.Context) (bool, error) {
		return slices.Contains(s.reasons(t), reason), nil
	})
}

// waitForPhase waits until the controller's record on the node has the phase.
func (s *scene) waitForPhase(t *testing.T, timeout time.Duration, phase mcontroller.Phase) {
	t.Helper()
	s.env.WaitFor(t, timeout, "phase "+string(phase)+" on "+s.node, func(ctx context.Context) (bool, error) {
		n, err := s.env.Client.CoreV1().Nodes().Get(ctx, s.node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, p, _ := mcontroller.PhaseOf(n)
		return p == phase, nil
	})
}

// holds asserts that something does not happen: cond must hold of every
// state of the node the API server reports during the window (a negative has
// no event to wait on, so the window is the wait).
func (s *scene) holds(t *testing.T, window time.Duration, what string, cond func(*corev1.Node) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	if !cond(s.getNode(t)) {
		t.Fatalf("%s: it did not", what)
	}
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", s.node).String()}
	for ctx.Err() == nil {
		w, err := s.env.Client.CoreV1().Nodes().Watch(ctx, opts)
		if err != nil {
			if ctx.Err() == nil {
				t.Fatalf("watching %s: %v", s.node, err)
			}
			break
		}
		for ev := range w.ResultChan() { // closed when the window ends, or the server ends the watch
			if n, ok := ev.Object.(*corev1.Node); ok && !cond(n) {
				w.Stop()
				t.Fatalf("%s: it did not", what)
			}
		}
		w.Stop()
	}
	if !cond(s.getNode(t)) {
		t.Fatalf("%s: it did not", what)
	}
}

func hasTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == contract.TaintMaintenance })
}

// rfc1123 formats a time as Scheduled Events does.
func rfc1123(t time.Time) string { return azure.FormatNotBefore(t) }
