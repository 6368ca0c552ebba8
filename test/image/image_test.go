// Package image tests the container image `make image` builds: it runs the
// same script into a temporary directory and reads the OCI layout back with
// go-containerregistry, as a registry or a runtime would.
package image

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The files the image holds, and nothing else: no shell, no package manager.
var wantFiles = []string{"etc/", "etc/group", "etc/passwd", "home/", "home/nonroot/", "sluice", "tmp/"}

func TestImageLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sluice for two platforms")
	}
	out := filepath.Join(t.TempDir(), "image")
	// A registry on loopback (go-containerregistry's, in memory) takes the
	// push IMAGE asks for.
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	pushTo := strings.TrimPrefix(reg.URL, "http://") + "/sluice-dev/sluice:v0.0.0-test"
	cmd := exec.Command("../../hack/image/build.sh", "v0.0.0-test")
	cmd.Env = append(os.Environ(), "OUT="+out, "COMMIT=abc1234", "IMAGE="+pushTo)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/image/build.sh: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	t.Logf("hack/image/build.sh printed:\n%s", stdout.String())

	idx, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		// layout.Write keeps the index's manifests in index.json itself.
		t.Logf("index.json media type %q", mt)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range manifest.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		platform := d.Platform.OS + "/" + d.Platform.Architecture
		platforms = append(platforms, platform)
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: manifest media type %s, want an OCI manifest", platform, d.MediaType)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, platform, img)
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
	checkPushed(t, pushTo, idx, stdout.String())
}

// checkPushed reads the pushed index back from the registry: the same
// digest as the layout's, every platform's image and layers there.
func checkPushed(t *testing.T, ref string, local v1.ImageIndex, printed string) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := remote.Index(r)
	if err != nil {
		t.Fatalf("reading %s back from the registry: %v", ref, err)
	}
	want, err := local.Digest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := pushed.Digest()
	if err != nil || got != want {
		t.Fatalf("the registry holds %s (%v); the layout's index is %s", got, err, want)
	}
	if !strings.Contains(printed, "pushed\t"+r.Context().String()+"@"+want.String()) {
		t.Errorf("build.sh did not say what it pushed:\n%s", printed)
	}
	manifest, err := pushed.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range manifest.Manifests {
		img, err := pushed.Image(d.Digest)
		if err != nil {
			t.Fatalf("%s: %v", d.Digest, err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers (%v); want 1", d.Digest, len(layers), err)
		}
		rc, err := layers[0].Compressed()
		if err == nil {
			_, err = io.Copy(io.Discard, rc) // the digest is checked as it is read
			_ = rc.Close()
		}
		if err != nil {
			t.Errorf("%s: the layer's blob is not in the registry: %v", d.Digest, err)
		}
	}
}

func checkImage(t *testing.T, platform string, img v1.Image) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.OS + "/" + cfg.Architecture; got != platform {
		t.Errorf("%s: config says %s", platform, got)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/sluice"}) {
		t.Errorf("%s: entrypoint %v, want [/sluice]", platform, cfg.Config.Entrypoint)
	}
	if u := cfg.Config.User; u == "" || u == "0" || u == "root" || strings.HasPrefix(u, "0:") {
		t.Errorf("%s: runs as %q, want a non-root user", platform, u)
	}
	if v := cfg.Config.Labels["org.opencontainers.image.version"]; v != "v0.0.0-test" {
		t.Errorf("%s: version label %q", platform, v)
	}
	if r := cfg.Config.Labels["org.opencontainers.image.revision"]; r != "abc1234" {
		t.Errorf("%s: revision label %q", platform, r)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers (%v), want 1", platform, len(layers), err)
	}
	size, _ := layers[0].Size()
	t.Logf("%s: layer %.1f MiB compressed", platform, float64(size)/(1<<20))
	files, binary := readLayer(t, layers[0])
	if !slices.Equal(files, wantFiles) {
		t.Errorf("%s: files %v, want exactly %v (no shell, nothing else)", platform, files, wantFiles)
	}
	// The Go build info: what the binary was built from, and for what.
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("%s: reading the binary's build info: %v", platform, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	arch := strings.TrimPrefix(platform, "linux/")
	if info.Path != "github.com/sluice-dev/sluice/cmd/sluice" || settings["GOOS"] != "linux" || settings["GOARCH"] != arch ||
		settings["CGO_ENABLED"] != "0" || len(info.Deps) < 50 {
		t.Errorf("%s: build info path %s, GOOS %s, GOARCH %s, CGO_ENABLED %s, %d modules", platform, info.Path,
			settings["GOOS"], settings["GOARCH"], settings["CGO_ENABLED"], len(info.Deps))
	}
	// Stripped (-s -w): no symbol table, no DWARF. (-trimpath keeps
	// -ldflags out of the build info, so ask the ELF file.)
	exe, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("%s: the binary is not an ELF file: %v", platform, err)
	}
	if exe.Section(".symtab") != nil || exe.Section(".debug_info") != nil || settings["-trimpath"] != "true" {
		t.Errorf("%s: the binary is not stripped and trimmed (.symtab %v, .debug_info %v, -trimpath %q)", platform,
			exe.Section(".symtab") != nil, exe.Section(".debug_info") != nil, settings["-trimpath"])
	}
	if runtime.GOOS+"/"+runtime.GOARCH == platform {
		runBinary(t, binary)
	}
}

// readLayer lists the layer's files and returns the binary's bytes.
func readLayer(t *testing.T, l v1.Layer) ([]string, []byte) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []string
	var binary []byte
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		if h.Name == "sluice" {
			if h.Mode&0o111 == 0 || h.Uid != 0 {
				t.Errorf("/sluice: mode %o owner %d; want executable, owned by root (not writable by the user it runs as)", h.Mode, h.Uid)
			}
			if binary, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	return files, binary
}

// runBinary runs the image's binary for this machine: it must start and say
// the version it was stamped with.
func runBinary(t *testing.T, binary []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice")
	if err := os.WriteFile(path, binary, 0o755); err != nil { //nolint:gosec // an executable
		t.Fatal(err)
	}
	out, err := exec.Command(path, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("the image's binary: %v", err)
	}
	var v struct{ Version, Commit string }
	if err := json.Unmarshal(out, &v); err != nil || v.Version != "v0.0.0-test" || v.Commit != "abc1234" {
		t.Errorf("the image's binary says %s (%v)", out, err)
	}
}
