package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ToolsBinEnv names the environment variable that points at a directory holding
// the pinned control-plane binaries (the last line hack/tools/build.sh prints).
const ToolsBinEnv = "SLUICE_TOOLS_BIN"

// Binaries the sandbox runs; hack/tools/build.sh builds all of them.
var requiredBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl"}

// FindBinaries returns the directory holding the control-plane binaries: dir if
// it is set, else $SLUICE_TOOLS_BIN, else the cache hack/tools/build.sh fills
// (building it first if needed) when run inside a sluice checkout. Build
// progress goes to progress.
func FindBinaries(ctx context.Context, dir string, progress io.Writer) (string, error) {
	if dir == "" {
		dir = os.Getenv(ToolsBinEnv)
	}
	if dir != "" {
		return dir, checkBinaries(dir)
	}
	script, err := findBuildScript()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, script) //nolint:gosec // our own build script, found in the checkout
	cmd.Stdout = &out
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the control-plane binaries with %s: %w", script, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	dir = lines[len(lines)-1]
	return dir, checkBinaries(dir)
}

func checkBinaries(dir string) error {
	var missing []string
	for _, b := range requiredBinaries {
		if info, err := os.Stat(filepath.Join(dir, b)); err != nil || info.IsDir() {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("control-plane binaries missing from %s: %s (run hack/tools/build.sh and set %s to the directory it prints)",
			dir, strings.Join(missing, ", "), ToolsBinEnv)
	}
	return nil
}

// findBuildScript looks for hack/tools/build.sh above the working directory and
// above the running executable, so tests and a freshly built bin/sluice both
// find the checkout they came from.
func findBuildScript() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			script := filepath.Join(dir, "hack", "tools", "build.sh")
			if _, err := os.Stat(script); err == nil {
				return script, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", errors.New("control-plane binaries not found: set " + ToolsBinEnv +
		" (or --tools-bin) to a directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and kubectl," +
		" or run from a sluice checkout, where hack/tools/build.sh builds them")
}
