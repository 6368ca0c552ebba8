package importer

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// newNodePool is an empty sluice NodePool named name.
func newNodePool(name string) *v1alpha1.NodePool {
	return &v1alpha1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
}

// checkKind says what is wrong when obj is not an apiVersion/kind object.
func checkKind(obj map[string]any, apiVersion, kind string) error {
	gotVersion, _ := obj["apiVersion"].(string)
	gotKind, _ := obj["kind"].(string)
	if gotVersion == apiVersion && gotKind == kind {
		return nil
	}
	if gotKind == kind && strings.HasPrefix(gotVersion, strings.SplitN(apiVersion, "/", 2)[0]+"/") {
		return fmt.Errorf("%s %s is not %s: upgrade it to %s first (Karpenter's v1 migration guide), then import", gotVersion, gotKind, apiVersion, apiVersion)
	}
	if gotVersion == "" || gotKind == "" {
		return fmt.Errorf("not a Kubernetes object (apiVersion and kind missing): expected apiVersion %s, kind %s", apiVersion, kind)
	}
	return fmt.Errorf("%s %s is not a %s %s", gotVersion, gotKind, apiVersion, kind)
}

// fieldSet is a set of known field paths: "a.b" a field, "a.b[]" the items
// of a list, "a.b.*" a field whose keys are free-form.
type fieldSet map[string]bool

func newFieldSet(paths ...string) fieldSet {
	s := fieldSet{}
	for _, p := range paths {
		s[p] = true
	}
	return s
}

// unknownFields lists the paths in obj that known does not hold, in order.
func unknownFields(obj map[string]any, known fieldSet) []string {
	var out []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case map[string]any:
			for k, child := range x {
				p := k
				if path != "" {
					p = path + "." + k
				}
				switch {
				case known[p+".*"]:
				case known[p] || known[p+"[]"]:
					walk(child, p)
				default:
					out = append(out, p)
				}
			}
		case []any:
			for _, item := range x {
				if _, ok := item.(map[string]any); ok {
					walk(item, path+"[]")
				}
			}
		}
	}
	walk(obj, "")
	sort.Strings(out)
	return out
}
