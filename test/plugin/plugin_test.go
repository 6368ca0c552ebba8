// Package plugin tests sluice as users install it beside kubectl: the
// release archives and krew manifest the release scripts write, validated
// and installed by krew itself, then run as `kubectl sluice`; and the shell
// completions.
package plugin

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/sandbox"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// KrewEnv names the pinned krew binary (make test sets it from
// hack/tools/gotool.sh krew); validate-krew-manifest sits beside it.
const KrewEnv = "SLUICE_KREW"

const version = "v0.0.0-plugintest"

func sh(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestKrewInstallsKubectlSluice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release archive")
	}
	krew := testenv.Tool(t, KrewEnv, "run `make test`, or `"+KrewEnv+"=$(hack/tools/gotool.sh krew) go test ./test/plugin/`")
	tools, err := sandbox.FindBinaries(context.Background(), "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dist := filepath.Join(dir, "dist")
	env := []string{"DIST=" + dist, "COMMIT=plugintest"}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	sh(t, env, filepath.Join(root, "hack/release/package.sh"), version, platform)
	manifest := sh(t, env, filepath.Join(root, "hack/release/krew-manifest.sh"), version)
	file := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	sh(t, nil, filepath.Join(filepath.Dir(krew), "validate-krew-manifest"), "-manifest", file, "-skip-install")

	krewRoot := filepath.Join(dir, "krew")
	archive := filepath.Join(dist, "sluice_"+version+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
	kenv := []string{"KREW_ROOT=" + krewRoot, "PATH=" + filepath.Join(krewRoot, "bin") + ":" + tools + ":" + os.Getenv("PATH")}
	sh(t, kenv, krew, "install", "--manifest="+file, "--archive="+archive)

	kubectl := filepath.Join(tools, "kubectl")
	var info struct{ Version, Commit, Platform string }
	out := sh(t, kenv, kubectl, "sluice", "version", "-o", "json")
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Version != version || info.Commit != "plugintest" || info.Platform != platform {
		t.Errorf("kubectl sluice version -o json: %v %+v\n%s", err, info, out)
	}
	if out := sh(t, kenv, kubectl, "plugin", "list"); !strings.Contains(out, filepath.Join(krewRoot, "bin", "kubectl-sluice")) {
		t.Errorf("kubectl plugin list does not show the plugin krew installed:\n%s", out)
	}
	if out := sh(t, kenv, kubectl, "sluice", "drain", "--help"); !strings.Contains(out, "kubectl sluice drain NODE...") {
		t.Errorf("the plugin's help does not say `kubectl sluice drain`:\n%s", out)
	}
}

// Completions for bash, zsh, fish and PowerShell; bash's script is valid
// bash, and completes drain's flags through the binary.
func TestCompletions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sluice")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	sh(t, nil, "go", "build", "-o", bin, "github.com/sluice-dev/sluice/cmd/sluice")
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if out := sh(t, nil, bin, "completion", shell); !strings.Contains(out, "__complete") {
			t.Errorf("sluice completion %s does not call back into sluice:\n%.300s", shell, out)
		}
	}
	script := filepath.Join(t.TempDir(), "sluice.bash")
	if err := os.WriteFile(script, []byte(sh(t, nil, bin, "completion", "bash")), 0o600); err != nil {
		t.Fatal(err)
	}
	sh(t, nil, "bash", "-n", script)
	if out := sh(t, nil, bin, "__complete", "drain", "--skip-wait"); !strings.Contains(out, "--skip-wait-for-delete-timeout") {
		t.Errorf("completing `sluice drain --skip-wait`: %q", out)
	}
}
