package chart_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	chart "github.com/sluice-dev/sluice/charts/sluice"
	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/internal/testenv"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

// MonitoringCRDsEnv names the directory of the Prometheus Operator's CRDs
// (make test sets it from hack/tools/monitoring-crds.sh).
const MonitoringCRDsEnv = "SLUICE_MONITORING_CRDS"

// kubectl runs the sandbox's kubectl as its administrator, stdin given.
func kubectl(t *testing.T, env *sandboxtest.Env, stdin string, args ...string) (string, error) {
	t.Helper()
	bin, err := sandbox.FindBinaries(context.Background(), "", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", env.Sandbox.Kubeconfig()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Everything the chart renders, with the defaults and with every option on,
// is accepted by the API server (a server-side dry run: its schemas, the
// Prometheus Operator's CRDs for the monitoring objects, admission).
func TestRenderedChartPassesAServerSideDryRun(t *testing.T) {
	env := sandboxtest.New(t)
	crds := testenv.Tool(t, MonitoringCRDsEnv, "run `make test`, or `"+MonitoringCRDsEnv+"=$(hack/tools/monitoring-crds.sh) go test ./charts/...`")
	for _, crd := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
		// create, not apply: the CRDs are too large for apply's annotation.
		out, err := kubectl(t, env, "", "create", "-f", filepath.Join(crds, "monitoring.coreos.com_"+crd+".yaml"))
		if err != nil && !strings.Contains(out, "AlreadyExists") {
			t.Fatalf("installing the %s CRD: %v\n%s", crd, err, out)
		}
	}
	waitForCRDs(t, env, "servicemonitors", "podmonitors", "prometheusrules")
	for name, values := range map[string][]string{
		"defaults": nil,
		"every option": {
			"--set", "controller.providers={kwok,aws-asg,azure-vmss,aks-agentpool,gcp-mig}",
			"--set", "controller.awsQueueURL=https://sqs.eu-west-1.amazonaws.com/123456789012/sluice",
			"--set", `controller.podLabels.azure\.workload\.identity/use=true`,
			"--set", `controller.serviceAccountAnnotations.eks\.amazonaws\.com/role-arn=arn:aws:iam::123456789012:role/sluice`,
			"--set", "controller.webhook.url=https://hooks.example.com/sluice",
			"--set", "controller.env[0].name=GOMEMLIMIT", "--set", "controller.env[0].value=400MiB",
			"--set", "controller.maxDisruptingNodes=5", "--set", "controller.dryRun=true",
			"--set", "agent.cloud=azure", "--set", "agent.imdsEndpoint=http://127.0.0.1:8080",
			"--set", "agent.nodeSelector.kubernetes\\.io/os=linux",
			"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.podMonitor.enabled=true",
			"--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.grafanaDashboard.enabled=true",
			"--set", "monitoring.labels.release=kube-prometheus-stack",
			"--set", "logFormat=text",
		},
	} {
		manifest := chart.Helm(t, append([]string{"template", "sluice", ".", "-n", env.Namespace}, values...)...)
		out, err := kubectl(t, env, manifest, "apply", "--dry-run=server", "-f", "-")
		if err != nil {
			t.Errorf("%s: the API server refused the rendered chart: %v\n%s", name, err, out)
			continue
		}
		want := []string{"deployment.apps/sluice-controller", "daemonset.apps/sluice-agent"}
		if values != nil {
			want = append(want, "servicemonitor.monitoring.coreos.com/sluice-controller", "podmonitor.monitoring.coreos.com/sluice-agent",
				"prometheusrule.monitoring.coreos.com/sluice", "configmap/sluice-grafana-dashboard", "role.rbac.authorization.k8s.io/sluice-controller-azure-vmss",
				"role.rbac.authorization.k8s.io/sluice-controller-aks-agentpool")
		}
		for _, kind := range want {
			if !strings.Contains(out, kind) {
				t.Errorf("%s: the dry run did not apply %s:\n%s", name, kind, out)
			}
		}
	}
}

func waitForCRDs(t *testing.T, env *sandboxtest.Env, plurals ...string) {
	t.Helper()
	for _, p := range plurals {
		out, err := kubectl(t, env, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/"+p+".monitoring.coreos.com")
		if err != nil {
			t.Fatalf("the %s CRD is not established: %v\n%s", p, err, out)
		}
	}
}

// helm install puts sluice into the sandbox: the controller Deployment and
// the agent DaemonSet become Ready (kwok runs their pods), the service
// accounts hold what they need and not what they do not, and an upgrade
// keeps the CRD and the NodePools.
//
// The release is installed from the previous chart version
// (testdata/sluice-0.1.0.tgz, the chart as it last shipped) and upgraded to
// this one the way the README says: the CRDs applied first (Helm never
// upgrades a chart's crds/), then helm upgrade.
func TestHelmInstallAndUpgrade(t *testing.T) {
	helms := chart.Helms(t)
	sandboxtest.New(t).CreateNodes(t, fixture.AKSPool(sandboxtest.UniqueName("helm"), 2))
	for _, v := range []string{"v4", "v3"} {
		bin, ok := helms[v]
		if !ok {
			continue
		}
		// One after the other: a release's cluster-wide objects (ClusterRoles,
		// the agent's admission policy) have fixed names.
		t.Run(v, func(t *testing.T) { installAndUpgrade(t, sandboxtest.New(t), bin) })
	}
}

func installAndUpgrade(t *testing.T, env *sandboxtest.Env, bin string) {
	kc := env.Sandbox.Kubeconfig()
	ns := env.Namespace
	chart.HelmWith(t, bin, "install", "sluice", previousChart, "-n", ns, "--kubeconfig", kc, "--wait", "--timeout", "3m")
	// Without the pre-delete hook: the sandbox runs no container, so its
	// Job would never finish (the hook's own test runs its command).
	uninstall := func() {
		_ = exec.Command(bin, "uninstall", "sluice", "-n", ns, "--kubeconfig", kc, "--wait", "--no-hooks").Run()
	}
	defer uninstall()
	ctx := context.Background()
	dep, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "sluice-controller", metav1.GetOptions{})
	if err != nil || dep.Status.ReadyReplicas != 2 {
		t.Errorf("controller Deployment: %v, %d ready; want 2", err, readyOf(dep))
	}
	// helm --wait can return a moment before the DaemonSet controller has
	// counted the last agent Ready (seen once on Kubernetes 1.30: 1 of 2).
	var ds *appsv1.DaemonSet
	env.WaitFor(t, 30*time.Second, "one Ready agent on each node", func(ctx context.Context) (bool, error) {
		ds, err = env.Client.AppsV1().DaemonSets(ns).Get(ctx, "sluice-agent", metav1.GetOptions{})
		return err == nil && ds.Status.DesiredNumberScheduled >= 2 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled, nil
	})
	if err != nil || ds.Status.DesiredNumberScheduled < 2 || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled {
		t.Errorf("agent DaemonSet: %v, %+v; want one Ready agent on each node", err, dsStatus(ds))
	}

	// A spot check that the release's bindings hold; the full least-privilege
	// proof is test/chaos's TestControllerLeastPrivilege and the agent's
	// privilege tests.
	for _, c := range []struct {
		as, verb, resource, subresource string
		want                            bool
	}{
		{"sluice-controller", "create", "pods", "eviction", true},
		{"sluice-controller", "patch", "nodes", "", true},
		{"sluice-controller", "patch", "nodepools.sluice.dev", "status", true},
		{"sluice-controller", "create", "leases.coordination.k8s.io", "", true},
		{"sluice-controller", "get", "secrets", "", false},
		{"sluice-controller", "update", "nodepools.sluice.dev", "", false},
		{"sluice-agent", "patch", "nodes", "", true},
		{"sluice-agent", "create", "pods", "eviction", false},
		{"sluice-agent", "delete", "pods", "", false},
		{"sluice-agent", "list", "pods", "", false},
	} {
		args := []string{"auth", "can-i", "--quiet", c.verb, c.resource, "-n", ns, "--as", "system:serviceaccount:" + ns + ":" + c.as}
		if c.subresource != "" {
			args = append(args, "--subresource", c.subresource)
		}
		_, err := kubectl(t, env, "", args...)
		if got := err == nil; got != c.want {
			t.Errorf("can %s %s %s %s? %v; want %v", c.as, c.verb, c.resource, c.subresource, got, c.want)
		}
	}

	// A NodePool made under this release outlives an upgrade of it.
	pools := dynamic.NewForConfigOrDie(env.Config).Resource(schema.GroupVersionResource{Group: "sluice.dev", Version: "v1alpha1", Resource: "nodepools"})
	name := sandboxtest.UniqueName("kept")
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sluice.dev/v1alpha1", "kind": "NodePool",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"nodeSelector": map[string]any{"matchLabels": map[string]any{"pool": name}}},
	}}
	if _, err := pools.Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a NodePool: %v", err)
	}
	t.Cleanup(func() { _ = pools.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	canKeepTimelines := func() bool {
		_, err := kubectl(t, env, "", "auth", "can-i", "--quiet", "patch", "configmaps", "-n", ns, "--as", "system:serviceaccount:"+ns+":sluice-controller")
		return err == nil
	}
	if canKeepTimelines() {
		t.Errorf("the previous release's controller may patch configmaps in %s; only this version needs it", ns)
	}
	if out, err := kubectl(t, env, "", "apply", "--server-side", "--force-conflicts", "-f", "crds/"); err != nil {
		t.Fatalf("applying this version's CRDs: %v\n%s", err, out)
	}
	chart.HelmWith(t, bin, "upgrade", "sluice", ".", "-n", ns, "--kubeconfig", kc, "--wait", "--timeout", "3m",
		"--set", "controller.replicas=1", "--set", "controller.workers=8")
	if got := releaseChart(t, bin, kc, ns); got != "sluice-"+chartVersion(t) {
		t.Errorf("the release runs chart %s after the upgrade; want sluice-%s", got, chartVersion(t))
	}
	// What this version added: the controller keeps its drains' timelines.
	if !canKeepTimelines() {
		t.Errorf("after the upgrade the controller may not patch configmaps in %s (its drains' timelines)", ns)
	}
	if _, err := pools.Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the NodePool after helm upgrade: %v", err)
	}
	if out, err := kubectl(t, env, "", "get", "crd", "nodepools.sluice.dev"); err != nil {
		t.Errorf("the CRD after helm upgrade: %v\n%s", err, out)
	}
	env.WaitFor(t, time.Minute, "the upgraded controller Deployment", func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "sluice-controller", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 1 && d.Status.Replicas == 1 && containsArg(d, "--workers=8"), nil
	})
}

// previousChart is the chart as it last shipped, which the install test
// upgrades from.
const previousChart = "testdata/sluice-0.1.0.tgz"

// releaseChart is the chart (name-version) the release runs, as helm lists it.
func releaseChart(t *testing.T, bin, kubeconfig, ns string) string {
	t.Helper()
	out, err := exec.Command(bin, "list", "-n", ns, "--kubeconfig", kubeconfig, "-o", "json").Output()
	if err != nil {
		t.Fatalf("helm list: %v", err)
	}
	var releases []struct {
		Name  string `json:"name"`
		Chart string `json:"chart"`
	}
	if err := json.Unmarshal(out, &releases); err != nil {
		t.Fatalf("helm list -o json: %v\n%s", err, out)
	}
	for _, r := range releases {
		if r.Name == "sluice" {
			return r.Chart
		}
	}
	t.Fatalf("helm list has no release sluice:\n%s", out)
	return ""
}

// chartVersion is this chart's version, from Chart.yaml.
func chartVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version: (\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("Chart.yaml has no version line")
	}
	return string(m[1])
}

func readyOf(d *appsv1.Deployment) int32 {
	if d == nil {
		return 0
	}
	return d.Status.ReadyReplicas
}

func dsStatus(d *appsv1.DaemonSet) any {
	if d == nil {
		return nil
	}
	return d.Status
}

func containsArg(d *appsv1.Deployment, arg string) bool {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if a == arg {
				return true
			}
		}
	}
	return false
}
