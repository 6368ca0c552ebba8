#!/usr/bin/env bash
# Builds sluice's release archives, one per platform: $DIST/sluice_<version>_<os>_<arch>.tar.gz,
# each holding the static binary as kubectl-sluice (kubectl runs a plugin found on the PATH by
# that name: `kubectl sluice ...`; linked or copied as `sluice`, it is the same command) and
# README.md. krew installs the plugin from these (hack/release/krew-manifest.sh writes its
# manifest); krew cannot unpack links, so the archive holds one name only.
#
# Usage: hack/release/package.sh VERSION [OS/ARCH ...]
#   default platforms: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# Env: DIST (default: dist), COMMIT (default: git rev-parse --short HEAD)
set -euo pipefail

version="${1:?usage: package.sh VERSION [OS/ARCH ...]}"
shift
if [[ ! "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "package.sh: version $version: give a semantic version with a v, e.g. v0.2.0" >&2
  exit 1
fi
platforms=("$@")
[[ ${#platforms[@]} -gt 0 ]] || platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dist="${DIST:-$root/dist}"
commit="${COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || true)}"
ldflags="-s -w -X github.com/sluice-dev/sluice/internal/version.Version=$version -X github.com/sluice-dev/sluice/internal/version.Commit=$commit"
mkdir -p "$dist"
for p in "${platforms[@]}"; do
  os="${p%/*}" arch="${p#*/}"
  stage="$(mktemp -d)"
  echo "package.sh: building $os/$arch" >&2
  (cd "$root" && CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -ldflags "$ldflags" -o "$stage/kubectl-sluice" ./cmd/sluice)
  cp "$root/README.md" "$stage/"
  archive="$dist/sluice_${version}_${os}_${arch}.tar.gz"
  # Reproducible: fixed order, owner and times.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='1970-01-01 00:00Z' -C "$stage" -czf "$archive" README.md kubectl-sluice
  rm -rf "$stage"
  echo "$archive"
done
