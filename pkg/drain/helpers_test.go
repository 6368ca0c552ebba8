package drain_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// labelPool marks the nodes of one test, so its workloads land only there.
const labelPool = "sluice.dev/test-pool"

// scene is one test's cluster: nodes to drain, spare nodes for the pods that
// move, and the selector that keeps the test's pods on them.
type scene struct {
	env   *sandboxtest.Env
	id    string
	nodes []string
	onAll fixture.PodOption
	// observe, when set, sees each step of the drains run runs, as it
	// happens.
	observe func(drain.Progress)
}

// newScene creates n nodes to drain. Workloads created next land on them;
// addSpare then adds room for replacements.
func newScene(t *testing.T, n int) *scene {
	t.Helper()
	env := sandboxtest.New(t)
	id := sandboxtest.UniqueName("d")
	pool := fixture.AKSPool(id, n, fixture.WithLabels(map[string]string{labelPool: id}))
	s := &scene{env: env, id: id, onAll: fixture.NodeSelector(map[string]string{labelPool: id})}
	for _, node := range env.CreateNodes(t, pool) {
		s.nodes = append(s.nodes, node.Name)
	}
	return s
}

// addSpare adds nodes that replacements can be scheduled onto.
func (s *scene) addSpare(t *testing.T, n int) []string {
	t.Helper()
	pool := fixture.EKSNodeGroup(s.id+"-spare", n, fixture.WithLabels(map[string]string{labelPool: s.id}))
	var names []string
	for _, node := range s.env.CreateNodes(t, pool) {
		names = append(names, node.Name)
	}
	return names
}

// onNode pins a pod to a node by hostname, through the scheduler.
func onNode(node string) fixture.PodOption {
	return fixture.NodeSelector(map[string]string{fixture.LabelHostname: node})
}

// drained is a finished drain: the report, the progress it emitted, and the
// pods it covered keyed by their app label.
type drained struct {
	report   *drain.Report
	progress []drain.Progress
	byApp    map[string][]drain.PodReport
	took     time.Duration
}

// run drains nodes with opts and indexes the result by app label.
func (s *scene) run(t *testing.T, opts drain.Options, nodes ...string) drained {
	t.Helper()
	ctx := context.Background()
	apps := map[string]string{}
	list, err := s.env.Client.CoreV1().Pods(s.env.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		apps[p.Name] = p.Labels[fixture.LabelApp]
	}
	var mu sync.Mutex
	var progress []drain.Progress
	hooks := drain.Hooks{
		Recorder: kube.NewRecorder(s.env.Client, clock.RealClock{}, "sluice-drain-test"),
		Observer: drain.ObserverFunc(func(p drain.Progress) {
			if s.observe != nil {
				s.observe(p)
			}
			mu.Lock()
			progress = append(progress, p)
			mu.Unlock()
		}),
	}
	d, err := drain.New(s.env.Client, clock.RealClock{}, opts, hooks)
	if err != nil {
		t.Fatalf("drain.New: %v", err)
	}
	start := time.Now()
	report, err := d.Drain(ctx, nodes)
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	out := drained{report: report, progress: progress, byApp: map[string][]drain.PodReport{}, took: time.Since(start)}
	for _, n := range report.Nodes {
		for _, p := range n.Pods {
			if p.Namespace == s.env.Namespace {
				app, known := apps[p.Name]
				if !known {
					app = p.Name // created during the drain: a bare pod, named as its app
				}
				out.byApp[app] = append(out.byApp[app], p)
			}
		}
	}
	return out
}

// want is the expected outcome of every pod of an app.
type want struct {
	outcome drain.PodOutcome
	reason  drain.Reason
	message string // a substring the message must contain
}

func (d drained) expect(t *testing.T, app string, w want) {
	t.Helper()
	pods := d.byApp[app]
	if len(pods) == 0 {
		t.Errorf("%s: no pod in the report", app)
	}
	for _, p := range pods {
		if p.Outcome != w.outcome || p.Reason != w.reason || !strings.Contains(p.Message, w.message) {
			t.Errorf("%s (%s): got %s/%s %q; want %s/%s containing %q", app, p.Name, p.Outcome, p.Reason, p.Message, w.outcome, w.reason, w.message)
		}
	}
}

func (d drained) node(t *testing.T, i int, outcome drain.NodeOutcome) drain.NodeReport {
	t.Helper()
	n := d.report.Nodes[i]
	if n.Outcome != outcome {
		t.Errorf("node %s: outcome %s (%s), want %s", n.Name, n.Outcome, n.Message, outcome)
	}
	return n
}

func (s *scene) getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := s.env.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// podUIDs snapshots the test namespace's pods, to show a drain touched nothing.
func (s *scene) podUIDs(t *testing.T) map[string]string {
	t.Helper()
	list, err := s.env.Client.CoreV1().Pods(s.env.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = string(p.UID)
		}
	}
	return out
}

// events returns the reasons of the Events about an object.
func (s *scene) events(t *testing.T, namespace, kind, name string) map[string]bool {
	t.Helper()
	list, err := s.env.Client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name,
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range list.Items {
		out[e.Reason] = true
	}
	return out
}
