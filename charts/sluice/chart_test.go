package chart

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/testenv"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// HelmEnv names the helm binary the chart's tests run (make test sets it
// from hack/tools/helm.sh, which builds the pinned Helm).
const HelmEnv = "SLUICE_HELM"

// Helm4Env names Helm v4, the current major version (make test sets it from
// hack/tools/gotool.sh helm4); the chart must lint and install with both.
const Helm4Env = "SLUICE_HELM4"

func helm(t *testing.T, args ...string) string {
	t.Helper()
	bin := testenv.Tool(t, HelmEnv, "run `make test`, or `"+HelmEnv+"=$(hack/tools/helm.sh) go test ./charts/...`")
	return helmWith(t, bin, args...)
}

// helms are the Helm binaries to run a test with, by major version: v3 and
// v4 when their variables are set.
func helms(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for v, env := range map[string]string{"v3": HelmEnv, "v4": Helm4Env} {
		if bin := os.Getenv(env); bin != "" {
			out[v] = bin
		}
	}
	if len(out) == 0 {
		testenv.Missing(t, "$"+HelmEnv+" and $"+Helm4Env, "run `make test`, which sets both")
	}
	return out
}

func helmWith(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), stderr.String())
	}
	return out.String()
}

// objects splits a rendered manifest into its objects, by kind/name.
func objects(t *testing.T, manifest string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var o map[string]any
		err := d.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("the rendered chart is not YAML: %v", err)
		}
		if o == nil {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		out[o["kind"].(string)+"/"+meta["name"].(string)] = o
	}
}

func at(o any, path ...string) any {
	for _, p := range path {
		m, ok := o.(map[string]any)
		if !ok {
			return nil
		}
		o = m[p]
	}
	return o
}

func controllerArgs(t *testing.T, objs map[string]map[string]any) []string {
	t.Helper()
	containers, _ := at(objs["Deployment/sluice-controller"], "spec", "template", "spec", "containers").([]any)
	if len(containers) == 0 {
		t.Fatalf("no controller Deployment with containers; have %v", slices.Sorted(func(yield func(string) bool) {
			for k := range objs {
				if !yield(k) {
					return
				}
			}
		}))
	}
	var args []string
	for _, a := range at(containers[0], "args").([]any) {
		args = append(args, a.(string))
	}
	return args
}

func TestChartLints(t *testing.T) {
	for v, bin := range helms(t) {
		t.Run(v, func(t *testing.T) {
			helmWith(t, bin, "lint", "--strict", ".")
			helmWith(t, bin, "lint", "--strict", ".", "--set", "controller.providers={aws-asg,azure-vmss,aks-agentpool,gcp-mig,cluster-api}", "--set", "controller.awsQueueURL=https://sqs.eu-west-1.amazonaws.com/123456789012/sluice")
		})
	}
}

// By default the controller runs no provider and reads no queue, and is
// granted nothing on ConfigMaps.
func TestDefaultsTurnNoProviderOn(t *testing.T) {
	objs := objects(t, helm(t, "template", "sluice", ".", "-n", "sluice-system"))
	for _, a := range controllerArgs(t, objs) {
		if strings.HasPrefix(a, "--providers") || strings.HasPrefix(a, "--aws-queue-url") {
			t.Errorf("default controller argument %s", a)
		}
	}
	for _, p := range []string{"azure-vmss", "aks-agentpool", "cluster-api"} {
		if _, ok := objs["Role/sluice-controller-"+p]; ok {
			t.Errorf("the %s claims Role is rendered without the provider", p)
		}
	}
	if _, ok := objs["ClusterRole/sluice-controller-cluster-api"]; ok {
		t.Error("the cluster-api ClusterRole is rendered without the provider")
	}
}

// Each cloud is turned on from values: the providers, the queue, workload
// identity's pod label and service account annotation, the claims' Roles
// only with azure-vmss, aks-agentpool and cluster-api (gcp-mig keeps none),
// and Cluster API's objects only with cluster-api.
func TestValuesTurnEachCloudOn(t *testing.T) {
	objs := objects(t, helm(t, "template", "sluice", ".", "-n", "sluice-system",
		"--set", "controller.providers={aws-asg,azure-vmss,aks-agentpool,gcp-mig,cluster-api}",
		"--set", "controller.awsQueueURL=https://sqs.eu-west-1.amazonaws.com/123456789012/sluice",
		"--set", `controller.podLabels.azure\.workload\.identity/use=true`,
		"--set", `controller.serviceAccountAnnotations.azure\.workload\.identity/client-id=0f1e2d3c`))
	args := controllerArgs(t, objs)
	for _, want := range []string{"--providers=aws-asg,azure-vmss,aks-agentpool,gcp-mig,cluster-api", "--aws-queue-url=https://sqs.eu-west-1.amazonaws.com/123456789012/sluice"} {
		if !slices.Contains(args, want) {
			t.Errorf("controller args %v lack %s", args, want)
		}
	}
	if got := at(objs["Deployment/sluice-controller"], "spec", "template", "metadata", "labels", "azure.workload.identity/use"); got != "true" {
		t.Errorf("pod label azure.workload.identity/use = %v", got)
	}
	if got := at(objs["ServiceAccount/sluice-controller"], "metadata", "annotations", "azure.workload.identity/client-id"); got != "0f1e2d3c" {
		t.Errorf("service account annotation = %v", got)
	}
	for _, p := range []string{"azure-vmss", "aks-agentpool", "cluster-api"} {
		rules := at(objs["Role/sluice-controller-"+p], "rules")
		want := []any{
			map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"create"}},
			map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "resourceNames": []any{"sluice-" + p + "-claims"}, "verbs": []any{"get", "update"}},
		}
		if !reflect.DeepEqual(rules, want) {
			t.Errorf("%s Role rules = %v, want %v", p, rules, want)
		}
		if subj := at(objs["RoleBinding/sluice-controller-"+p], "subjects"); subj == nil {
			t.Errorf("no RoleBinding for the %s Role", p)
		}
	}
	if _, ok := objs["Role/sluice-controller-gcp-mig"]; ok {
		t.Error("a gcp-mig Role is rendered; the provider keeps nothing in the cluster")
	}
	capi := map[string][]any{} // resource → verbs
	for _, r := range at(objs["ClusterRole/sluice-controller-cluster-api"], "rules").([]any) {
		rule := r.(map[string]any)
		namespaces := reflect.DeepEqual(rule["apiGroups"], []any{""}) && reflect.DeepEqual(rule["resources"], []any{"namespaces"}) &&
			reflect.DeepEqual(rule["verbs"], []any{"get", "list", "watch"}) // MachineDrainRules' namespaceSelector
		if !reflect.DeepEqual(rule["apiGroups"], []any{"cluster.x-k8s.io"}) && !namespaces {
			t.Errorf("cluster-api ClusterRole rule %v outside cluster.x-k8s.io (and not reading namespaces)", rule)
		}
		for _, res := range rule["resources"].([]any) {
			capi[res.(string)] = rule["verbs"].([]any)
		}
	}
	for res, verbs := range map[string][]any{
		"machinedeployments/scale": {"get", "update", "patch"},
		"machinesets/scale":        {"get", "update", "patch"},
		"machines":                 {"get", "list", "watch", "patch", "update"},
		"machines/status":          {"patch", "update"},
		"clusters":                 {"get", "list", "watch"},
	} {
		if !reflect.DeepEqual(capi[res], verbs) {
			t.Errorf("cluster-api ClusterRole grants %v on %s; want %v", capi[res], res, verbs)
		}
	}
	if subj := at(objs["ClusterRoleBinding/sluice-controller-cluster-api"], "subjects"); subj == nil {
		t.Error("no ClusterRoleBinding for the cluster-api ClusterRole")
	}
}

// The RBAC the chaos suite proves least-privilege (ControllerRBAC, read from
// the template without Helm) is what Helm renders.
func TestControllerRBACIsWhatHelmRenders(t *testing.T) {
	rendered := objects(t, helm(t, "template", "sluice", ".", "-n", "sluice-system"))
	raw, err := ControllerRBAC("sluice-system")
	if err != nil {
		t.Fatal(err)
	}
	ours := objects(t, raw)
	if len(ours) == 0 {
		t.Fatal("ControllerRBAC has no objects")
	}
	for key, o := range ours {
		h, ok := rendered[key]
		if !ok {
			t.Errorf("%s is in ControllerRBAC, not in the rendered chart", key)
			continue
		}
		for _, field := range []string{"rules", "roleRef", "subjects"} {
			if !reflect.DeepEqual(o[field], h[field]) {
				t.Errorf("%s %s: ControllerRBAC %v, Helm %v", key, field, o[field], h[field])
			}
		}
	}
}

// values.schema.json refuses a misspelt or unknown value, and a value out
// of its range, naming it, before anything is rendered; every value the
// chart documents passes (TestChartLints, the server-side dry run).
func TestValuesSchemaRefusesTypos(t *testing.T) {
	bin := testenv.Tool(t, HelmEnv, "run `make test`, or `"+HelmEnv+"=$(hack/tools/helm.sh) go test ./charts/...`")
	for _, c := range []struct{ set, want string }{
		{"controller.replicsa=3", "replicsa"},
		{"agent.cloud=azur", "/agent/cloud"},
		{"logFormat=yaml", "/logFormat"},
		{"controller.providers={aws}", "/controller/providers/0"},
		{"monitoring.serviceMonitr.enabled=true", "serviceMonitr"},
		{"agent.pollInterval=1 second", "/agent/pollInterval"},
		{"controller.timelineRetention=1 day", "/controller/timelineRetention"},
		{"controller.metricsPort=70000", "/controller/metricsPort"},
		{"controller.awsQueueURL=https://example.com/queue", "/controller/awsQueueURL"},
	} {
		out, err := exec.Command(bin, "template", "sluice", ".", "--set", c.set).CombinedOutput()
		if err == nil {
			t.Errorf("--set %s: rendered; want the schema to refuse it", c.set)
			continue
		}
		if !strings.Contains(string(out), "values don't meet the specifications of the schema") || !strings.Contains(string(out), c.want) {
			t.Errorf("--set %s: %s; want a schema error naming %s", c.set, out, c.want)
		}
	}
}
