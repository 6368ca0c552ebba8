package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/ownership"
	"github.com/sluice-dev/sluice/test/audit"
)

// poolSize is how many nodes the test pool has.
const poolSize = 6

// scene is a sandbox namespace ready for a release of the chart: the helm
// and kubectl to run, two nodes for the controller, the stand-in kubelet
// with this version's binary (and the last release's, when given), and the
// values every helm command of the tests passes.
type scene struct {
	env                  *sandboxtest.Env
	helmBin, kubectl     string
	kubeconfig, chartDir string
	this                 string // this chart's appVersion
	values               []string
	pods                 *standIn
}

func newScene(t *testing.T, prev sandboxtest.Release) *scene {
	t.Helper()
	sc := &scene{
		helmBin: testenv.Tool(t, "SLUICE_HELM", "run `make test`, or `SLUICE_HELM=$(hack/tools/helm.sh) go test ./test/lifecycle/`"),
		kubectl: kubectlBinary(t),
	}
	root := prev.Root
	if root == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		root = filepath.Join(wd, "..", "..")
	}
	sc.chartDir = filepath.Join(root, "charts", "sluice")
	sc.this = appVersion(t, sc.chartDir)
	bins := map[string]string{sc.this: sandboxtest.Sluice(t)}
	if prev.Bin != "" {
		if sc.this == prev.Version {
			t.Fatalf("the chart's appVersion %s is the last release's (hack/previous-release): raise it", sc.this)
		}
		bins[prev.Version] = prev.Bin
	}
	sc.env = sandboxtest.New(t)
	sc.kubeconfig = sc.env.Sandbox.Kubeconfig()
	ns := sc.env.Namespace
	// Two nodes for the controller: the chart keeps its pods on different
	// nodes, and a rolling update starts the new pod first.
	sysLabels := map[string]string{"lifecycle.sluice.dev/system": "true"}
	sc.env.CreateNodes(t, fixture.AKSPool(sandboxtest.UniqueName("sys"), 2, fixture.WithLabels(sysLabels)))
	sc.values = []string{"-n", ns, "--kubeconfig", sc.kubeconfig, "--wait", "--timeout", "3m",
		"--set", "controller.replicas=1", "--set", "controller.providers={kwok}",
		"--set-string", "controller.nodeSelector.lifecycle\\.sluice\\.dev/system=true"}
	sc.pods = startStandIn(t, sc.env.Client, sc.env.Config, ns, bins)
	t.Cleanup(func() {
		// Without the pre-delete hook: the release may be gone already, or
		// the test failed half-way.
		_ = exec.Command(sc.helmBin, "uninstall", "sluice", "-n", ns, "--kubeconfig", sc.kubeconfig, "--wait", "--no-hooks").Run()
	})
	return sc
}

func (sc *scene) helm(t *testing.T, args ...string) { t.Helper(); run(t, sc.helmBin, args...) }

// work makes what sluice will work on, under the NodePool CRD the release
// installed: a pool of kwok machines, and a node the cloud will redeploy
// with the pods of svc on it (they leave one at a time, slowly).
func (sc *scene) work(t *testing.T) (*pool, string) {
	t.Helper()
	env, ns := sc.env, sc.env.Namespace
	p := newPool(t, env)
	maintLabels := map[string]string{"lifecycle.sluice.dev/maint": p.name}
	redeployed := env.CreateNodes(t, fixture.AKSPool(p.name+"m", 1, fixture.WithLabels(maintLabels)))[0].Name
	env.Create(t,
		fixture.Deployment(ns, "web", 12, fixture.NodeSelector(p.labels), fixture.Requests("100m", "128Mi"), fixture.GracePeriod(10), fixture.ExitsAfter(4)),
		fixture.PDB(ns, "web", "web", fixture.MaxUnavailable("25%")),
		fixture.Deployment(ns, "svc", 5, fixture.NodeSelector(maintLabels), fixture.GracePeriod(30), fixture.ExitsAfter(15)),
		fixture.PDB(ns, "svc", "svc", fixture.MaxUnavailable("1")))
	env.WaitForPods(t, "app=web", 12)
	env.WaitForPods(t, "app=svc", 5)
	env.WaitForPDB(t, "web", 12)
	env.WaitForPDB(t, "svc", 5)
	// Where svc's pods go once the redeployed node is drained.
	env.CreateNodes(t, fixture.AKSPool(p.name+"n", 2, fixture.WithLabels(maintLabels)))
	return p, redeployed
}

// startWork starts the auditor, a drift of the pool and the Redeploy, and
// returns once the work is mid-way: a replacement booting (a record names
// it) and the redeployed node half drained.
func (sc *scene) startWork(t *testing.T, p *pool, redeployed string) *audit.Auditor {
	t.Helper()
	env := sc.env
	a, err := audit.Start(t.Context(), env.Config, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	p.setImage(t, "img-2")
	redeploy := maintenance.Event{ID: "redeploy-" + redeployed, Source: maintenance.SourceAzure, Type: maintenance.TypeRedeploy,
		Status: maintenance.StatusScheduled, NotBefore: time.Now().Add(10 * time.Minute)}
	report(t, env, redeployed, redeploy)
	env.WaitFor(t, 3*time.Minute, "the work mid-way", func(ctx context.Context) (bool, error) {
		booting, err := p.booting(ctx)
		if err != nil || booting == "" {
			return false, err
		}
		return drainingNow(ctx, env, redeployed)
	})
	p.progress(t, env, redeployed, "mid-way")
	return a
}

func run(t *testing.T, bin string, args ...string) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
}

// pool is the test's NodePool of kwok machines.
type pool struct {
	name   string
	labels map[string]string
	kube   client.Client
	obj    *v1alpha1.NodePool
}

// newPool creates a kwok pool of poolSize Ready nodes running img-1, with a
// budget of one node and no consolidation, under the NodePool CRD the
// release installed.
func newPool(t *testing.T, env *sandboxtest.Env) *pool {
	t.Helper()
	p := &pool{name: sandboxtest.UniqueName("life"), kube: poolClient(t, env)}
	p.labels = map[string]string{"lifecycle.sluice.dev/pool": p.name}
	p.obj = &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: p.name},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: p.labels},
			Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok, Kwok: &v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{Duration: 15 * time.Second}}},
			Template:     &v1alpha1.NodeTemplate{Labels: p.labels, InstanceTypes: []string{"Standard_D4s_v5"}, Image: "img-1"},
			Disruption:   &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "1"}}, ConsolidateAfter: v1alpha1.Never},
		},
	}
	if err := p.kube.Create(t.Context(), p.obj); err != nil {
		t.Fatalf("creating pool %s: %v", p.name, err)
	}
	t.Cleanup(func() { p.cleanup(env) })
	// A kwok provider of the test's own makes the first machines, as the
	// controller's would have; the controllers find them by their Nodes.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	kp := kwok.New(env.Client, clock.RealClock{}, kwok.Options{Registered: true})
	go func() { _ = kp.Run(ctx) }()
	fast := p.obj.DeepCopy()
	fast.Spec.Provider.Kwok.BootDelay = &metav1.Duration{}
	for range poolSize {
		if _, err := kp.Create(ctx, fast, ""); err != nil {
			t.Fatal(err)
		}
	}
	env.WaitFor(t, 3*time.Minute, "the pool's nodes Ready", func(ctx context.Context) (bool, error) {
		nodes, err := p.nodes(ctx)
		if err != nil || len(nodes) != poolSize {
			return false, err
		}
		for _, n := range nodes {
			if !sandboxtest.NodeReady(&n) || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) {
				return false, nil
			}
		}
		return true, nil
	})
	return p
}

func (p *pool) nodes(ctx context.Context) ([]corev1.Node, error) {
	var list corev1.NodeList
	err := p.kube.List(ctx, &list, client.MatchingLabels(p.labels))
	return list.Items, err
}

// replaced counts the pool's nodes running img-2.
func (p *pool) replaced(ctx context.Context) (int, error) {
	nodes, err := p.nodes(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, node := range nodes {
		if node.Annotations[contract.AnnotationImage] == "img-2" {
			n++
		}
	}
	return n, nil
}

// progress logs how far the work is when something happens, and returns
// how many nodes run img-2.
func (p *pool) progress(t *testing.T, env *sandboxtest.Env, redeployed, when string) int {
	t.Helper()
	replaced, err := p.replaced(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	left, err := toMove(t.Context(), env, redeployed)
	if err != nil {
		t.Fatal(err)
	}
	booting, err := p.booting(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("when %s: %d of %d pool nodes replaced, replacement %q booting, %d pods left on the redeployed node", when, replaced, poolSize, booting, left)
	return replaced
}

// booting names a replacement a pool node's record names that is not a
// Ready node yet: the moment a controller that misread the record would
// launch a second one. The record is read as the auditor does, as plain
// JSON, not through sluice's own reader.
func (p *pool) booting(ctx context.Context) (string, error) {
	nodes, err := p.nodes(ctx)
	if err != nil {
		return "", err
	}
	ready := map[string]bool{}
	for _, n := range nodes {
		ready[n.Name] = sandboxtest.NodeReady(&n)
	}
	for _, n := range nodes {
		var rec struct {
			Replacement string `json:"replacement"`
		}
		if raw, ok := n.Annotations[contract.AnnotationDisruption]; ok && json.Unmarshal([]byte(raw), &rec) == nil &&
			rec.Replacement != "" && !ready[rec.Replacement] {
			return rec.Replacement, nil
		}
	}
	return "", nil
}

// rolledOut: poolSize nodes, each running img-2, Ready, schedulable and
// unmarked.
func (p *pool) rolledOut(ctx context.Context) (bool, error) {
	nodes, err := p.nodes(ctx)
	if err != nil || len(nodes) != poolSize {
		return false, err
	}
	for _, n := range nodes {
		_, marked := n.Annotations[contract.AnnotationDisruption]
		if marked || n.Annotations[contract.AnnotationImage] != "img-2" || !sandboxtest.NodeReady(&n) || n.Spec.Unschedulable || !n.DeletionTimestamp.IsZero() {
			return false, nil
		}
	}
	return true, nil
}

func (p *pool) setImage(t *testing.T, image string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"image":%q}}}`, image))
	if err := p.kube.Patch(t.Context(), p.obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// cleanup lets the pool's nodes go once no controller is left to remove
// their finalizer, and deletes the pool.
func (p *pool) cleanup(env *sandboxtest.Env) {
	ctx := context.Background()
	nodes, _ := p.nodes(ctx)
	for _, n := range nodes {
		_, _ = env.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = env.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	}
	_ = p.kube.Delete(ctx, p.obj)
}

// report writes what the node's agent would after reading the cloud's
// metadata: the events announced now (none: the maintenance is over).
func report(t *testing.T, env *sandboxtest.Env, node string, events ...maintenance.Event) {
	t.Helper()
	value := maintenance.NewReport(maintenance.SourceAzure, false, events).Encode()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, contract.AnnotationMaintenanceEvents, value)
	if _, err := env.Client.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("reporting on node %s: %v", node, err)
	}
}

// drainingNow: the node is cordoned for its maintenance and still has
// pods of the namespace to move.
func drainingNow(ctx context.Context, env *sandboxtest.Env, name string) (bool, error) {
	n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || !ownership.IsMaintenanceOwner(ownership.CordonedBy(n)) {
		return false, err
	}
	left, err := toMove(ctx, env, name)
	return left > 0, err
}

// emptied: the node is cordoned and has no pod of the namespace left to
// move.
func emptied(ctx context.Context, env *sandboxtest.Env, name string) (bool, error) {
	n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || !n.Spec.Unschedulable {
		return false, err
	}
	left, err := toMove(ctx, env, name)
	return left == 0, err
}

// toMove counts the pods of the namespace on the node that a drain moves:
// all but the DaemonSets' (the release's agents live in the namespace).
func toMove(ctx context.Context, env *sandboxtest.Env, node string) (int, error) {
	pods, err := env.Client.CoreV1().Pods(env.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if !slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" }) {
			n++
		}
	}
	return n, nil
}

// noWait is values without --wait and its --timeout.
func noWait(values []string) []string {
	out := slices.Clone(values)
	i := slices.Index(out, "--wait")
	return slices.Delete(out, i, i+3)
}

// appVersion is the chart's appVersion, from its Chart.yaml.
func appVersion(t *testing.T, chartDir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion: "?([^"\s]+)"?$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("Chart.yaml has no appVersion line")
	}
	return string(m[1])
}

func poolClient(t *testing.T, env *sandboxtest.Env) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	kube, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// kubectlBinary is the sandbox's kubectl.
func kubectlBinary(t *testing.T) string {
	t.Helper()
	dir, err := sandbox.FindBinaries(context.Background(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "kubectl")
}
