package importer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	chart "github.com/sluice-dev/sluice/charts/sluice"
	"github.com/sluice-dev/sluice/internal/crdschema"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// karpenterCRD is Karpenter's own NodePool CRD, from the module pinned in
// hack/tools/karpenter (v1.14.1), read from the Go module cache: the test
// inputs are checked against it, so they are NodePools Karpenter's API
// server would store, not our idea of one.
func karpenterCRD(t *testing.T) *crdschema.Validator {
	t.Helper()
	v, err := crdschema.New(karpenterCRDManifest(t), "v1")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// karpenterCRDManifest is karpenter.sh_nodepools.yaml from the pinned module.
func karpenterCRDManifest(t *testing.T) []byte {
	t.Helper()
	return testenv.KarpenterNodePoolCRD(t, filepath.Join("..", ".."))
}

func sluiceCRD(t *testing.T) *crdschema.Validator {
	t.Helper()
	for _, crd := range chart.CRDs() {
		if bytes.Contains(crd, []byte("name: nodepools.sluice.dev")) {
			v, err := crdschema.New(crd, "v1alpha1")
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("the chart holds no NodePool CRD")
	return nil
}

// objects reads a testdata file's YAML documents, a List's items one by one.
func objects(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var doc json.RawMessage
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// As the API server reads JSON: whole numbers are integers.
		var obj map[string]any
		if err := utiljson.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if items, ok := obj["items"].([]any); ok {
			for _, it := range items {
				out = append(out, it.(map[string]any))
			}
			continue
		}
		out = append(out, obj)
	}
	return out
}

func karpenterFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "karpenter", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Karpenter test inputs: %v", err)
	}
	for i := range files {
		files[i] = strings.TrimPrefix(files[i], "testdata"+string(filepath.Separator))
	}
	return files
}

// TestKarpenterInputsAreRealNodePools: every Karpenter input is valid under
// Karpenter's own CRD (schema and CEL rules, defaults applied), and the check
// can fail: a reason Karpenter v1 does not budget is refused.
func TestKarpenterInputsAreRealNodePools(t *testing.T) {
	v := karpenterCRD(t)
	ctx := context.Background()
	for _, f := range karpenterFiles(t) {
		for _, obj := range objects(t, f) {
			if errs := v.Validate(ctx, obj); len(errs) > 0 {
				t.Errorf("%s: Karpenter's CRD refuses it: %v", f, errs.ToAggregate())
			}
		}
	}
	bad := runtime.DeepCopyJSON(objects(t, "karpenter/budgets.yaml")[0])
	bad["spec"].(map[string]any)["disruption"].(map[string]any)["budgets"].([]any)[0].(map[string]any)["reasons"] = []any{"Expired"}
	if errs := v.Validate(ctx, bad); len(errs) == 0 {
		t.Error("a budget for reason Expired passed Karpenter's CRD; the check checks nothing")
	}
	noClass := runtime.DeepCopyJSON(objects(t, "karpenter/minimal.yaml")[0])
	delete(noClass["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any), "nodeClassRef")
	if errs := v.Validate(ctx, noClass); len(errs) == 0 {
		t.Error("a NodePool without nodeClassRef passed Karpenter's CRD; the check checks nothing")
	}
}

// checkPools: the pools pass sluice's own CRD and the controller's
// validation, as they would at kubectl apply and in the controller.
func checkPools(t *testing.T, what string, pools []v1alpha1.NodePool) {
	t.Helper()
	v := sluiceCRD(t)
	for i := range pools {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pools[i])
		if err != nil {
			t.Fatal(err)
		}
		delete(obj, "status")
		if errs := v.Validate(context.Background(), obj); len(errs) > 0 {
			t.Errorf("%s: sluice's CRD refuses NodePool %s: %v", what, pools[i].Name, errs.ToAggregate())
		}
		if p := nodepool.Validate(&pools[i], 3); p != nil {
			t.Errorf("%s: the controller refuses NodePool %s: %s", what, pools[i].Name, p.Message)
		}
	}
}

// entry finds the report's entry for field, or else the first whose field
// starts with it.
func entry(t *testing.T, res *Result, field string) Entry {
	t.Helper()
	for _, e := range res.Report {
		if e.Field == field {
			return e
		}
	}
	for _, e := range res.Report {
		if strings.HasPrefix(e.Field, field) {
			return e
		}
	}
	t.Fatalf("no report entry for %s; report:\n%s", field, reportText(res))
	return Entry{}
}

func reportText(res *Result) string {
	var b strings.Builder
	for _, e := range res.Report {
		b.WriteString(string(e.Status) + " " + e.Field + " -> " + e.Target + ": " + e.Reason + "\n")
	}
	return b.String()
}

func wantStatus(t *testing.T, res *Result, field string, want Status, reasonHas ...string) {
	t.Helper()
	e := entry(t, res, field)
	if e.Status != want {
		t.Errorf("%s: %s, want %s (%s)", field, e.Status, want, e.Reason)
	}
	for _, s := range reasonHas {
		if !strings.Contains(e.Reason, s) {
			t.Errorf("%s: reason %q lacks %q", field, e.Reason, s)
		}
	}
}

// valuesKeys are the chart's values.yaml, to check imported values against.
func chartValues(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "charts", "sluice", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// checkValues: every value an import writes is a key of the chart's
// values.yaml (a typo would be ignored by helm, silently).
func checkValues(t *testing.T, what string, values map[string]any) {
	t.Helper()
	chartV := chartValues(t)
	var walk func(got, schema map[string]any, path string)
	walk = func(got, schema map[string]any, path string) {
		for k, v := range got {
			s, ok := schema[k]
			if !ok {
				t.Errorf("%s: values %s%s is not a key of charts/sluice/values.yaml", what, path, k)
				continue
			}
			if sub, ok := v.(map[string]any); ok {
				if subSchema, ok := s.(map[string]any); ok && len(subSchema) > 0 {
					walk(sub, subSchema, path+k+".")
				}
			}
		}
	}
	walk(values, chartV, "")
}

func names(pools []v1alpha1.NodePool) []string {
	var out []string
	for _, p := range pools {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}
