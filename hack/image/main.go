// Command image writes sluice's container image without a Docker daemon: one
// image per platform under one OCI index, as an OCI layout directory, and
// pushes the index to a registry when given one.
//
// Each image is a single layer on an empty base: the static sluice binary at
// /sluice (its entrypoint), /etc/passwd and /etc/group naming the nonroot
// user (65532) it runs as, and that user's home. There is no shell and no
// package manager; the binary carries its own time zones and CA roots.
//
// Usage:
//
//	go run ./hack/image -out dist/image -version v0.3.0 -revision abc123 \
//	    -binary linux/amd64=bin/linux-amd64/sluice -binary linux/arm64=bin/linux-arm64/sluice \
//	    [-push registry.example.com/sluice:v0.3.0]
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the image runs as: distroless's nonroot.
const (
	uid  = 65532
	user = "65532:65532"
)

// binaries maps a platform (os/arch) to its binary's path.
type binaries map[string]string

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binaries) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok || strings.Count(platform, "/") != 1 || path == "" {
		return fmt.Errorf("%q: want OS/ARCH=PATH, e.g. linux/amd64=bin/linux-amd64/sluice", v)
	}
	b[platform] = path
	return nil
}

func main() {
	bins := binaries{}
	out := flag.String("out", "dist/image", "directory to write the OCI layout to (replaced)")
	version := flag.String("version", "dev", "the image's version: its tag and org.opencontainers.image.version")
	revision := flag.String("revision", "", "the source revision: org.opencontainers.image.revision")
	push := flag.String("push", "", "also push the index to this reference (registry/repository:tag), with the Docker config's credentials")
	flag.Var(bins, "binary", "OS/ARCH=PATH of a static sluice binary; give one per platform")
	flag.Parse()
	if err := run(bins, *out, *version, *revision, *push); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(bins binaries, out, version, revision, push string) error {
	if len(bins) == 0 {
		return errors.New("no -binary given: give OS/ARCH=PATH for each platform")
	}
	created := epoch()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	platforms := make([]string, 0, len(bins))
	for p := range bins {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	for _, p := range platforms {
		img, size, err := image(p, bins[p], version, revision, created)
		if err != nil {
			return err
		}
		goos, goarch, _ := strings.Cut(p, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform:    &v1.Platform{OS: goos, Architecture: goarch},
			Annotations: map[string]string{"org.opencontainers.image.ref.name": version},
		}})
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%s\t%.1f MiB compressed\n", p, digest, float64(size)/(1<<20))
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if _, err := layout.Write(out, idx); err != nil {
		return fmt.Errorf("writing the OCI layout to %s: %w", out, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("index\t%s\t%s\n", digest, out)
	if push == "" {
		return nil
	}
	ref, err := name.ParseReference(push)
	if err != nil {
		return fmt.Errorf("-push %q: %w", push, err)
	}
	if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing to %s: %w", ref, err)
	}
	fmt.Printf("pushed\t%s@%s\n", ref.Context(), digest)
	return nil
}

// epoch is the images' creation time: SOURCE_DATE_EPOCH when set (the
// reproducible-builds convention), else the Unix epoch, so that one source
// gives one digest.
func epoch() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		var secs int64
		if _, err := fmt.Sscan(s, &secs); err == nil {
			return time.Unix(secs, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

// image builds one platform's image and returns it with its layer's
// compressed size.
func image(platform, binary, version, revision string, created time.Time) (v1.Image, int64, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", platform, err)
	}
	root, err := rootfs(data, created)
	if err != nil {
		return nil, 0, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(root)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, 0, err
	}
	size, err := layer.Size()
	if err != nil {
		return nil, 0, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, 0, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, 0, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, _ = strings.Cut(platform, "/")
	cfg.Created = v1.Time{Time: created}
	cfg.Config = v1.Config{
		Entrypoint: []string{"/sluice"},
		User:       user,
		WorkingDir: "/home/nonroot",
		Env:        []string{"HOME=/home/nonroot"},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "sluice",
			"org.opencontainers.image.description": "Keeps Kubernetes workloads running while their nodes come and go: drains within budgets and cloud deadlines, and explains every blocker.",
			"org.opencontainers.image.source":      "https://github.com/sluice-dev/sluice",
			"org.opencontainers.image.version":     version,
			"org.opencontainers.image.revision":    revision,
			"org.opencontainers.image.created":     created.Format(time.RFC3339),
		},
	}
	img, err = mutate.ConfigFile(img, cfg)
	return img, size, err
}

// rootfs is the layer's tar: directories, the user's files and the binary,
// in a fixed order with fixed owners and times.
func rootfs(binary []byte, mtime time.Time) ([]byte, error) {
	type entry struct {
		name     string
		mode     int64
		uid      int
		contents []byte
		dir      bool
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, contents: []byte(group)},
		{name: "etc/passwd", mode: 0o644, contents: []byte(passwd)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: uid, dir: true},
		{name: "sluice", mode: 0o755, contents: binary},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime, Format: tar.FormatPAX,
			Typeflag: tar.TypeReg, Size: int64(len(e.contents))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
