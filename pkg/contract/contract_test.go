package contract_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/pkg/contract"
)

// key is a key of sluice's domain or a subdomain, as a string spells it.
var key = regexp.MustCompile(`(?:^|[^A-Za-z0-9.-])((?:[a-z0-9-]+\.)*sluice\.dev/[A-Za-z0-9._-]+)`)

// Every sluice.dev key is spelled in contract.go and nowhere else under
// cmd/, internal/ and pkg/: a second spelling is a second definition waiting
// for its first difference. Tests may spell keys as the data a person or
// another tool writes (fixtures, fuzz seeds), and test/audit keeps its own
// spelling on purpose: it must not share sluice's code.
func TestEveryKeyIsSpelledOnce(t *testing.T) {
	root := filepath.Join("..", "..")
	own := filepath.Join(root, "pkg", "contract")
	checked := 0
	for _, dir := range []string{"cmd", "internal", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == own {
				return nil
			}
			checked++
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(file, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				for _, m := range key.FindAllStringSubmatch(s, -1) {
					t.Errorf("%s: %q spells the key %s: use its constant in pkg/contract (add one there if it is new)", fset.Position(lit.Pos()), s, m[1])
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d files; the walk from %s missed the tree", checked, root)
	}
}

// Every constant here is a key of the domain (or the domain itself).
func TestTheContractHoldsOnlyKeys(t *testing.T) {
	seen := map[string]string{}
	for _, c := range constants(t) {
		if c.name != "Domain" && key.FindStringSubmatch(c.value) == nil {
			t.Errorf("%s = %q is not a key of the domain", c.name, c.value)
		}
		if other, dup := seen[c.value]; dup && !sameKeyOfTwoKinds(c.name, other) {
			t.Errorf("%s and %s are both %q: one key, one name", c.name, other, c.value)
		}
		seen[c.value] = c.name
	}
}

// constant is one string constant of contract.go, as written there.
type constant struct{ name, value string }

// constants are contract.go's string constants spelled as literals (Prefix,
// built from Domain, is not one).
func constants(t *testing.T) []constant {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "contract.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []constant
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					out = append(out, constant{name.Name, v})
				}
			}
		}
	}
	return out
}

// sameKeyOfTwoKinds: a key may name an annotation and a taint, or an
// annotation and a cloud tag, which are different things in different places.
func sameKeyOfTwoKinds(a, b string) bool {
	kind := func(n string) string {
		for _, k := range []string{"Annotation", "Label", "Taint", "Tag", "Finalizer"} {
			if strings.HasPrefix(n, k) {
				return k
			}
		}
		return n
	}
	return kind(a) != kind(b)
}

// Every key sluice writes on a Node is sorted for uninstall: working state
// (removed), a description (kept), or named below as something else's. A new
// constant in none of these fails here until someone decides what
// uninstalling does with it.
func TestEveryNodeKeyIsSorted(t *testing.T) {
	notNodeState := map[string]string{
		"AnnotationCordonedBy":     "removed with the cordon it names, or kept with it",
		"AnnotationDoNotDisrupt":   "a person's opt-out",
		"FinalizerTermination":     "removed on its own by uninstall",
		"FinalizerSandboxMachine":  "on the sandbox's KwokMachines, never on a real cluster",
		"LabelEvictOnFreeze":       "on pods, a person's opt-in",
		"LabelTimeline":            "on timeline ConfigMaps, deleted with them",
		"AnnotationTimelineNode":   "on timeline ConfigMaps",
		"AnnotationTimelineReason": "on timeline ConfigMaps",
		"AnnotationTimelineEnded":  "on timeline ConfigMaps",
	}
	sorted := map[string][]string{
		"Taint":      contract.NodeWorkingTaints(),
		"Annotation": append(contract.NodeWorkingAnnotations(), contract.NodeDescriptionKeys()...),
		"Label":      append(contract.NodeWorkingLabels(), contract.NodeDescriptionKeys()...),
		"Finalizer":  nil,
	}
	checked := 0
	for _, c := range constants(t) {
		for kind, keys := range sorted {
			if !strings.HasPrefix(c.name, kind) {
				continue
			}
			checked++
			if _, other := notNodeState[c.name]; !other && !slices.Contains(keys, c.value) {
				t.Errorf("%s (%s) is neither a node's working state (contract.NodeWorking...) nor a description (contract.NodeDescriptionKeys), and not named as something else's: decide what uninstalling sluice does with it", c.name, c.value)
			}
		}
	}
	if checked < 25 {
		t.Fatalf("checked %d keys; the walk of contract.go missed most of them", checked)
	}
}
