package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/importer"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// importData is the importers' own testdata: real inputs, each stating its
// origin.
func importData(parts ...string) string {
	return filepath.Join(append([]string{"..", "importer", "testdata"}, parts...)...)
}

// runImport runs `sluice import ...` in process with no cluster configured.
func runImport(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	cmd := NewRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(append([]string{"import"}, args...))
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func decodePools(t *testing.T, out string) []v1alpha1.NodePool {
	t.Helper()
	var pools []v1alpha1.NodePool
	for _, doc := range strings.Split(out, "\n---\n") {
		var p v1alpha1.NodePool
		if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
			t.Fatalf("output is not a NodePool: %v\n%s", err, doc)
		}
		pools = append(pools, p)
	}
	return pools
}

func TestImportKarpenterFile(t *testing.T) {
	out, errOut, err := runImport(t, "", "karpenter", "-f", importData("karpenter", "budgets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pools := decodePools(t, out)
	if len(pools) != 1 || pools[0].Name != "spot-batch" || pools[0].APIVersion != "sluice.dev/v1alpha1" || pools[0].Kind != "NodePool" {
		t.Fatalf("pools %+v", pools)
	}
	if strings.Contains(out, "status") || strings.Contains(out, "creationTimestamp") {
		t.Errorf("the output carries fields a person would not apply:\n%s", out)
	}
	for _, want := range []string{"not mapped", "NOT MAPPED spec.weight", "differs    spec.template.spec.expireAfter"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestImportJSON(t *testing.T) {
	out, _, err := runImport(t, "", "karpenter", "-o", "json", "-f", importData("karpenter", "live-list.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		NodePools []v1alpha1.NodePool `json:"nodePools"`
		Report    []importer.Entry    `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(doc.NodePools) != 1 || doc.NodePools[0].Name != "balanced" {
		t.Errorf("pools %+v", doc.NodePools)
	}
	notMapped := 0
	for _, e := range doc.Report {
		if e.Status == importer.NotMapped {
			notMapped++
			if e.Reason == "" {
				t.Errorf("%s is not mapped, and no reason is given", e.Field)
			}
		}
	}
	if notMapped == 0 {
		t.Error("no field reported as not mapped")
	}
}

func TestImportDryRunOffline(t *testing.T) {
	out, _, err := runImport(t, "", "karpenter", "--dry-run", "-f", importData("karpenter", "minimal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# offline (no cluster configured", "--- NodePool minimal (none)", "+++ NodePool minimal (imported)", "+kind: NodePool"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
}

// TestImportRefusals: bad input, or a result sluice would refuse, is an
// error naming what to fix, and nothing is written to stdout.
func TestImportRefusals(t *testing.T) {
	dir := t.TempDir()
	configMap := filepath.Join(dir, "cm.yaml")
	if err := os.WriteFile(configMap, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"karpenter", "-f", configMap}, "v1 ConfigMap is not a karpenter.sh/v1 NodePool"},
		{[]string{"karpenter", "-f", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"karpenter", "-f", importData("karpenter", "minimal.yaml"), "--provider", "aws-asg", "-l", "group=a"}, "would be refused, so nothing was written"},
		{[]string{"karpenter", "-f", importData("karpenter", "minimal.yaml"), "--provider", "kwok"}, "give --selector"},
		{[]string{"karpenter", "-f", importData("karpenter", "minimal.yaml"), "--provider", "mainframe"}, `--provider "mainframe"`},
		{[]string{"karpenter", "-f", importData("karpenter", "minimal.yaml"), "--provider", "kwok", "-l", "a=b", "--provider-settings", "{bootDelay: 5s, colour: red}"}, "colour"},
		{[]string{"karpenter", "-f", importData("karpenter", "minimal.yaml"), "-o", "wide"}, `"wide"`},
		{[]string{"nth"}, "-f FILE"},
		{[]string{"nth", "-f", "-"}, "the input is empty"},
		{[]string{"kured", "-f", importData("kured", "args.txt"), "--name", "batch", "--selector", "pool=batch"}, "--provider none cannot reboot"},
		{[]string{"aks", "-f", importData("karpenter", "minimal.yaml")}, "JSON"},
	}
	for _, c := range cases {
		out, _, err := runImport(t, "", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sluice import %s: %v, want an error holding %q", strings.Join(c.args, " "), err, c.want)
		}
		if out != "" {
			t.Errorf("sluice import %s failed but wrote:\n%s", strings.Join(c.args, " "), out)
		}
	}
}

func TestImportProviderSettings(t *testing.T) {
	out, _, err := runImport(t, "", "karpenter", "-f", importData("karpenter", "general-purpose.yaml"),
		"--provider", "aws-asg", "--provider-settings", "{autoScalingGroups: [{name: eks-general}]}", "-l", "eks.amazonaws.com/nodegroup=general")
	if err != nil {
		t.Fatal(err)
	}
	p := decodePools(t, out)[0]
	if p.Spec.Provider.AWS == nil || p.Spec.Provider.AWS.AutoScalingGroups[0].Name != "eks-general" {
		t.Errorf("provider %+v", p.Spec.Provider)
	}
	if p.Spec.NodeSelector.MatchLabels["eks.amazonaws.com/nodegroup"] != "general" || p.Spec.Template.Labels["eks.amazonaws.com/nodegroup"] != "general" {
		t.Errorf("selector %v, template labels %v", p.Spec.NodeSelector, p.Spec.Template.Labels)
	}
}

func TestImportNTHFromStdin(t *testing.T) {
	raw, err := os.ReadFile(importData("nth", "queue-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runImport(t, string(raw), "nth", "-f", "-")
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal([]byte(out), &values); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if values["controller"].(map[string]any)["awsQueueURL"] != "https://sqs.us-east-1.amazonaws.com/123456789012/nth-queue" {
		t.Errorf("values %v", values)
	}
	if !strings.Contains(errOut, "NOT MAPPED webhookTemplate") {
		t.Errorf("stderr:\n%s", errOut)
	}
}

func TestImportKuredAndAKS(t *testing.T) {
	out, _, err := runImport(t, "", "kured", "-f", importData("kured", "args.txt"), "--name", "batch", "-l", "pool=batch", "--provider", "kwok")
	if err != nil {
		t.Fatal(err)
	}
	if p := decodePools(t, out)[0]; p.Spec.Reboot == nil || len(p.Spec.Reboot.Windows) != 1 {
		t.Errorf("reboot %+v", p.Spec.Reboot)
	}
	out, _, err = runImport(t, "", "kured", "-o", "json", "-f", importData("kured", "args.txt"), "--name", "batch", "-l", "pool=batch", "--provider", "kwok")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"sentinel": "/var/run/reboot-required"`) {
		t.Errorf("-o json lacks the agent's chart values:\n%s", out)
	}
	out, _, err = runImport(t, "", "aks", "-f", importData("aks", "user-pool.json"))
	if err != nil {
		t.Fatal(err)
	}
	if p := decodePools(t, out)[0]; p.Spec.Upgrade == nil || p.Spec.Provider.Name != v1alpha1.ProviderAKS {
		t.Errorf("pool %+v", p.Spec)
	}
}

// TestImportAgainstTheCluster: the paths that read the cluster, against a
// fake dynamic client (a unit test of what is read and diffed; what the API
// server would accept is the CRD check's).
func TestImportAgainstTheCluster(t *testing.T) {
	scheme := runtime.NewScheme()
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sluice.dev/v1alpha1", "kind": "NodePool",
		"metadata": map[string]any{"name": "minimal", "uid": "u-1", "resourceVersion": "7", "generation": int64(2)},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"matchLabels": map[string]any{"karpenter.sh/nodepool": "minimal"}},
			"provider":     map[string]any{"name": "kwok"},
			"disruption":   map[string]any{"expireAfter": "720h", "budgets": []any{map[string]any{"nodes": "20%"}}},
		},
		"status": map[string]any{"nodes": int64(3)},
	}}
	// As an API server keeps it: with its CRD's defaults.
	crd, err := nodePoolValidator()
	if err != nil {
		t.Fatal(err)
	}
	crd.Default(live.Object)
	karp := objectsOf(t, importData("karpenter", "minimal.yaml"))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		v1alpha1.NodePoolResource: "NodePoolList",
		karpenterNodePools:        "NodePoolList",
	}, live, &unstructured.Unstructured{Object: karp[0]})
	ctx := context.Background()

	got, err := liveKarpenterPools(ctx, dyn, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("Karpenter's pools from the cluster: %v, %v", got, err)
	}
	if _, err := liveKarpenterPools(ctx, dyn, []string{"other"}); err != nil {
		t.Fatal(err)
	}

	res, err := importer.Karpenter(got, importer.KarpenterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeImportDiff(ctx, &out, importCluster{dyn: dyn}, []map[string]any{poolObject(&res.NodePools[0])}, nil); err != nil {
		t.Fatal(err)
	}
	diff := out.String()
	for _, want := range []string{"--- NodePool minimal (cluster)", "-    name: kwok", "+    name: none", "-    - nodes: 20%", "+    - nodes: 10%"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}
	for _, notWant := range []string{"uid", "resourceVersion", "status", "offline"} {
		if strings.Contains(diff, notWant) {
			t.Errorf("diff shows %q, which an import does not write:\n%s", notWant, diff)
		}
	}

	out.Reset()
	if err := writeImportDiff(ctx, &out, importCluster{dyn: dyn}, []map[string]any{appliedFields(live.Object)}, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no change") {
		t.Errorf("the cluster's own pool diffed against itself:\n%s", out.String())
	}

	base, err := livePool(ctx, dyn, "minimal")
	if err != nil || base == nil || base.Spec.Provider.Name != v1alpha1.ProviderKwok {
		t.Fatalf("the pool kured's settings go into: %+v, %v", base, err)
	}
	if missing, err := livePool(ctx, dyn, "nope"); err != nil || missing != nil {
		t.Errorf("a pool not in the cluster: %+v, %v", missing, err)
	}
}

func objectsOf(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(raw)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
