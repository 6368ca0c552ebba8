package importer

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// FuzzImport feeds each importer input it did not write: whatever the bytes,
// an import answers with a result or an error, never a panic, and a result
// accounts for what it made.
func FuzzImport(f *testing.F) {
	for _, dir := range []string{"karpenter", "nth", "kured", "aks"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*"))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(dir, b)
		}
	}
	f.Fuzz(func(t *testing.T, kind string, raw []byte) {
		var res *Result
		var err error
		switch kind {
		case "karpenter":
			var obj map[string]any
			if yaml.Unmarshal(raw, &obj) != nil || obj == nil {
				return
			}
			res, err = Karpenter([]map[string]any{obj}, KarpenterOptions{})
			_ = KarpenterDisruptionOff(obj)
		case "nth":
			var values map[string]any
			if yaml.Unmarshal(raw, &values) != nil || values == nil {
				if values, err = ParseNTHArgs(string(raw)); err != nil {
					return
				}
			}
			res, err = NTH(values)
		case "kured":
			flags, perr := ParseKuredArgs(string(raw))
			if perr != nil {
				return
			}
			res, err = Kured(flags, KuredOptions{Name: "p", Selector: map[string]string{"a": "b"}, Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok}})
		case "aks":
			res, err = AKS(raw, AKSOptions{})
		default:
			return
		}
		if err != nil {
			return
		}
		if res == nil || res.Report == nil {
			t.Fatalf("%s: no error and no report", kind)
		}
		for _, p := range res.NodePools {
			if p.Name == "" || (p.Spec.NodeSelector.MatchLabels == nil && p.Spec.NodeSelector.MatchExpressions == nil) {
				t.Fatalf("%s: a pool without a name or a selector: %+v", kind, p.ObjectMeta)
			}
		}
	})
}
