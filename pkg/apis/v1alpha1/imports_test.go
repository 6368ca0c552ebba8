package v1alpha1

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The API types import no package of sluice's own: a client that reads
// NodePools (a GitOps tool, a dashboard) takes only the types, and a change
// to a library never changes the API.
func TestTheAPIImportsNoLibrary(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/sluice-dev/sluice/") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no file of the package was read")
	}
}
