// Package testenv decides what a test does when a tool it needs from outside
// Go (moto_server, Helm, promtool, krew, Chromium) is missing: under `make
// test`, which sets RequireToolsEnv, the test fails naming the tool and how
// to get it, so no run passes by skipping; under a bare `go test` it is
// skipped with the same message. It also finds the pinned peers' files that
// tests read (Karpenter's CRD).
package testenv

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RequireToolsEnv is the variable that, set to 1 (make test does), turns a
// missing tool from a skip into a failure.
const RequireToolsEnv = "SLUICE_REQUIRE_TOOLS"

// Required says whether missing tools fail the run.
func Required() bool { return os.Getenv(RequireToolsEnv) == "1" }

// Missing reports that what is missing, and how to get it: a failure when
// tools are required, a skip otherwise.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is missing, and %s=1 requires it: %s", what, RequireToolsEnv, how)
	}
	t.Skipf("%s is missing (%s); skipped, as %s is not 1", what, how, RequireToolsEnv)
}

// Tool is the path in the environment variable env, which `make test` sets;
// when it is empty, Missing says how to set it.
func Tool(t testing.TB, env, how string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		Missing(t, "$"+env, how)
	}
	return v
}

// KarpenterNodePoolCRD is Karpenter's NodePool CRD (karpenter.sh_nodepools.yaml)
// at the version hack/tools/karpenter pins, from the Go module cache (the
// module proxy serves it; nothing is built). root is the repository's root,
// relative to the test's package.
func KarpenterNodePoolCRD(t testing.TB, root string) []byte {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/karpenter")
	cmd.Dir = filepath.Join(root, "hack", "tools", "karpenter")
	out, err := cmd.Output()
	var mod struct{ Dir, Version, Error string }
	if jerr := json.Unmarshal(out, &mod); err != nil || jerr != nil || mod.Error != "" {
		t.Fatalf("finding Karpenter's module (cd hack/tools/karpenter && go mod download -json sigs.k8s.io/karpenter): %v %v %s", err, jerr, mod.Error)
	}
	crd, err := os.ReadFile(filepath.Join(mod.Dir, "pkg", "apis", "crds", "karpenter.sh_nodepools.yaml"))
	if err != nil {
		t.Fatalf("reading Karpenter %s's NodePool CRD: %v", mod.Version, err)
	}
	return crd
}
