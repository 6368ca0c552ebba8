package sandboxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce  sync.Once
	builtDir   string
	builtBin   string
	builtError error
)

// Sluice builds the sluice binary under test, once per test binary, and
// returns its path. Tests that run it as a user would (the CLI, the sandbox,
// a controller process) share the build.
func Sluice(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-bin-")
		if err != nil {
			builtError = err
			return
		}
		builtDir, builtBin = dir, filepath.Join(dir, "sluice")
		out, err := exec.Command("go", "build", "-o", builtBin, "github.com/sluice-dev/sluice/cmd/sluice").CombinedOutput()
		if err != nil {
			builtError = fmt.Errorf("building sluice: %w\n%s", err, out)
		}
	})
	if builtError != nil {
		t.Fatal(builtError)
	}
	return builtBin
}

// RemoveBinary deletes what Sluice built, so that no run leaves a 180 MB
// binary behind in the temporary directory. Main calls it once the tests
// end; a package without Main calls it from its own TestMain.
func RemoveBinary() {
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
	}
}
