package sandboxtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Release is the last release of sluice, as hack/previous-release names it:
// the upgrade and rollback tests start from it.
type Release struct {
	Commit  string
	Version string
	// Bin is its sluice binary, built from this repository's history.
	Bin string
	// Root is this repository's root (where hack/previous-release is).
	Root string
}

// PreviousRelease builds the sluice of the commit hack/previous-release
// names, from this repository's history, once per machine (kept in the
// user's cache beside the control plane's binaries).
func PreviousRelease(t testing.TB) Release {
	t.Helper()
	root := repoRoot(t)
	r := readRelease(t, filepath.Join(root, "hack", "previous-release"))
	r.Root = root
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "sluice", "previous", r.Commit)
	r.Bin = filepath.Join(dir, "sluice")
	if _, err := os.Stat(r.Bin); err == nil {
		return r
	}
	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", r.Commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var archiveErr strings.Builder
	archive.Stderr = &archiveErr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("the previous release's source (commit %s, hack/previous-release) is not in this clone's history: %v\n%s(a shallow clone lacks it: fetch with --unshallow)", r.Commit, err, archiveErr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("unpacking commit %s: %v", r.Commit, err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", r.Bin+".tmp", "./cmd/sluice")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the previous release (commit %s): %v\n%s", r.Commit, err, out)
	}
	if err := os.Rename(r.Bin+".tmp", r.Bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built the previous release %s, commit %s, in %s", r.Version, r.Commit[:12], dir)
	return r
}

// readRelease reads the "commit:" and "version:" lines of path.
func readRelease(t testing.TB, path string) Release {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r Release
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		switch {
		case !ok || strings.HasPrefix(key, "#"):
		case key == "commit":
			r.Commit = strings.TrimSpace(value)
		case key == "version":
			r.Version = strings.TrimSpace(value)
		}
	}
	if len(r.Commit) != 40 || r.Version == "" {
		t.Fatalf("%s: want a line \"commit: <40 hex digits>\" and one \"version: X.Y.Z\"; read commit %q, version %q", path, r.Commit, r.Version)
	}
	return r
}

// repoRoot is the nearest directory above the working one holding
// hack/previous-release.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "previous-release")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no hack/previous-release above the working directory")
		}
		dir = parent
	}
}
