// Package sandboxtest gives an integration test package one running sandbox,
// started once in TestMain, and each test a fresh namespace on it:
//
//	func TestMain(m *testing.M) { sandboxtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		env := sandboxtest.New(t)
//		env.Create(t, fixture.Deployment(env.Namespace, "web", 3))
//		...
//	}
//
// Nodes are cluster-wide, so a test that needs its own makes them with
// CreateNodes, which removes them afterwards; tests keep their pods on their
// own nodes with a node selector.
package sandboxtest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
)

// KeepEnv names the variable that, set to 1, keeps the sandbox directory (logs, etcd data) after
// the tests; it is also kept whenever a test failed.
const KeepEnv = "SLUICE_SANDBOX_KEEP"

var shared *sandbox.Sandbox

// Main starts the package's sandbox, runs the tests and stops it. Call it from
// TestMain. A sandbox that cannot start fails the whole package with the reason.
// With -short no sandbox starts and the tests that need one skip.
func Main(m *testing.M) {
	flag.Parse()
	var code int
	if testing.Short() {
		code = m.Run()
	} else {
		code = run(m)
	}
	RemoveBinary()
	os.Exit(code)
}

func run(m *testing.M) int {
	ctx := context.Background()
	bin, err := sandbox.FindBinaries(ctx, "", os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxtest:", err)
		return 1
	}
	sb, err := sandbox.Start(ctx, sandbox.Config{BinDir: bin, KeepDir: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxtest: starting the sandbox:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "sandboxtest: control plane ready in %s (%s)\n", sb.StartupDuration().Round(time.Millisecond), sb.Dir())
	shared = sb
	code := m.Run()
	_ = sb.Stop()
	if code != 0 || os.Getenv(KeepEnv) == "1" {
		fmt.Fprintf(os.Stderr, "sandboxtest: sandbox files and logs kept in %s\n", sb.Dir())
	} else {
		_ = os.RemoveAll(sb.Dir())
	}
	return code
}

// Env is one test's view of the shared sandbox.
type Env struct {
	Sandbox   *sandbox.Sandbox
	Config    *rest.Config
	Client    kubernetes.Interface
	Namespace string
}

// New returns an Env with a namespace of its own, deleted when the test ends.
func New(t testing.TB) *Env {
	t.Helper()
	if shared == nil && testing.Short() {
		t.Skip("needs the sandbox control plane; run without -short")
	}
	if shared == nil {
		t.Fatal("sandboxtest.New: no sandbox; call sandboxtest.Main from TestMain")
	}
	cfg := shared.RESTConfig()
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("building a client: %v", err)
	}
	env := &Env{Sandbox: shared, Config: cfg, Client: client, Namespace: namespaceFor(t.Name())}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: env.Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", env.Namespace, err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), env.Namespace, metav1.DeleteOptions{})
	})
	// Pods are refused until the namespace's default ServiceAccount exists.
	env.WaitFor(t, 30*time.Second, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(env.Namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return env
}

// Create creates objects in order, failing the test on the first error.
func (e *Env) Create(t testing.TB, objs ...runtime.Object) {
	t.Helper()
	if err := fixture.Create(context.Background(), e.Client, objs...); err != nil {
		t.Fatal(err)
	}
}

// CreateNodes creates the pool's nodes, waits until they are Ready, and deletes
// them (with anything still bound to them) when the test ends.
func (e *Env) CreateNodes(t testing.TB, pool fixture.Pool) []*corev1.Node {
	t.Helper()
	nodes := pool.Nodes()
	for _, n := range nodes {
		e.Create(t, n)
		name := n.Name
		t.Cleanup(func() {
			_ = e.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	for _, n := range nodes {
		e.WaitForNodeReady(t, n.Name, true)
	}
	// The node lifecycle controller lifts its start-up not-ready taint a
	// moment after the node reports Ready; until then nothing schedules there.
	for _, n := range nodes {
		name := n.Name
		e.WaitFor(t, 30*time.Second, "node "+name+" without the not-ready taint", func(ctx context.Context) (bool, error) {
			node, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, taint := range node.Spec.Taints {
				if taint.Key == corev1.TaintNodeNotReady {
					return false, nil
				}
			}
			return true, nil
		})
	}
	return nodes
}

// WaitForNodeReady waits until the node's Ready condition is ready (true or false).
func (e *Env) WaitForNodeReady(t testing.TB, name string, ready bool) {
	t.Helper()
	want := corev1.ConditionFalse
	if ready {
		want = corev1.ConditionTrue
	}
	e.WaitFor(t, 30*time.Second, fmt.Sprintf("node %s Ready=%s", name, want), func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == want, nil
			}
		}
		return false, nil
	})
}

// WaitForPods waits until exactly n pods matching selector in the test's
// namespace are Running and Ready and none is terminating, and returns them.
func (e *Env) WaitForPods(t testing.TB, selector string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	e.WaitFor(t, 60*time.Second, fmt.Sprintf("%d ready pods matching %q", n, selector), func(ctx context.Context) (bool, error) {
		list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = list.Items
		if len(pods) != n {
			return false, nil
		}
		for _, p := range pods {
			if p.DeletionTimestamp != nil || !PodReady(&p) {
				return false, nil
			}
		}
		return true, nil
	})
	return pods
}

// WaitFor polls cond every 100ms until it returns true, failing the test after
// timeout with what it was waiting for.
func (e *Env) WaitFor(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, cond); err != nil {
		if serr := e.Sandbox.Err(); serr != nil {
			t.Fatalf("waiting for %s: the sandbox broke: %v", what, serr)
		}
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// WaitForPDB waits until the disruption controller has counted the PDB's
// pods in the test's namespace and found healthy of them healthy: only then
// does the API server judge evictions against it as the test means.
func (e *Env) WaitForPDB(t testing.TB, name string, healthy int32) {
	t.Helper()
	e.WaitFor(t, time.Minute, fmt.Sprintf("PDB %s counting %d healthy pods", name, healthy), func(ctx context.Context) (bool, error) {
		pdb, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == healthy && pdb.Status.ExpectedPods == healthy, nil
	})
}

// NodeReady reports whether the node's Ready condition is true.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodReady reports whether the pod is Running with its Ready condition true.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// namespaceFor makes a DNS-safe, unique namespace name from a test name.
func namespaceFor(test string) string {
	name := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(test), "-"), "-")
	if len(name) > 50 {
		name = strings.TrimRight(name[:50], "-")
	}
	return name + "-" + utilrand.String(5)
}

// UniqueName returns prefix with a random suffix, for cluster-scoped objects
// such as node pools that must not collide between tests.
func UniqueName(prefix string) string { return prefix + utilrand.String(5) }
