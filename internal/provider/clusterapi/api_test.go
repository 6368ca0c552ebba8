package clusterapi

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// toolsEnv is internal/sandbox/capi's ToolsEnv (that package imports this
// one): the directory hack/tools/capi.sh prints, with Cluster API's CRDs.
const toolsEnv = "SLUICE_CAPI"

// Every field the provider reads from Cluster API's objects is in the
// v1beta2 schema of the CRDs Cluster API installs, and the scale
// subresource it writes is spec.replicas: a Cluster API that moves one
// fails here, not in a cluster.
func TestFieldsAreInTheCRDs(t *testing.T) {
	dir := testenv.Tool(t, toolsEnv, "run hack/tools/capi.sh and set "+toolsEnv+" to the directory it prints (make test does)")
	for _, tc := range []struct {
		crd   string
		typ   reflect.Type
		scale bool
	}{
		{"cluster.x-k8s.io_machines.yaml", reflect.TypeFor[machine](), false},
		{"cluster.x-k8s.io_machinedeployments.yaml", reflect.TypeFor[scalable](), true},
		{"cluster.x-k8s.io_machinesets.yaml", reflect.TypeFor[scalable](), true},
		{"cluster.x-k8s.io_clusters.yaml", reflect.TypeFor[cluster](), false},
	} {
		t.Run(tc.crd, func(t *testing.T) {
			v := served(t, filepath.Join(dir, "crds", tc.crd))
			for _, path := range fieldPaths(tc.typ, nil) {
				if !inSchema(v.Schema.OpenAPIV3Schema, path) {
					t.Errorf("%s %s has no field %s", tc.crd, Version, strings.Join(path, "."))
				}
			}
			if tc.scale {
				s := v.Subresources
				if s == nil || s.Scale == nil || s.Scale.SpecReplicasPath != ".spec.replicas" {
					t.Errorf("%s %s: scale subresource %+v; want one whose specReplicasPath is .spec.replicas", tc.crd, Version, s)
				}
			}
		})
	}
}

// served is the CRD's version the provider speaks.
func served(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Group != Group {
		t.Fatalf("%s: group %s; want %s", file, crd.Spec.Group, Group)
	}
	for i, v := range crd.Spec.Versions {
		if v.Name == Version && v.Served {
			return &crd.Spec.Versions[i]
		}
	}
	t.Fatalf("%s serves no %s", file, Version)
	return nil
}

// fieldPaths are the JSON paths of the type's leaf fields, metadata left
// out (every object has it; the CRD's schema does not spell it out).
func fieldPaths(typ reflect.Type, prefix []string) [][]string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return [][]string{prefix}
	}
	var out [][]string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || name == "metadata" && len(prefix) == 0 {
			continue
		}
		out = append(out, fieldPaths(f.Type, append(append([]string(nil), prefix...), name))...)
	}
	return out
}

func inSchema(s *apiextensionsv1.JSONSchemaProps, path []string) bool {
	for _, p := range path {
		if s == nil {
			return false
		}
		next, ok := s.Properties[p]
		if !ok {
			return false
		}
		s = &next
	}
	return s != nil
}
