#!/usr/bin/env bash
# Builds sluice's OCI image (make image): the static binary for each platform
# with the release's flags, then hack/image writes them as one multi-platform
# OCI layout, and pushes it when IMAGE is given.
#
# Usage: hack/image/build.sh [VERSION]
# Env: OUT (default dist/image), PLATFORMS (default "linux/amd64 linux/arm64"),
#      IMAGE (registry/repository:tag to push to), COMMIT (default git rev-parse --short HEAD),
#      SOURCE_DATE_EPOCH (the images' creation time; default the Unix epoch)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
version="${1:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}"
out="${OUT:-$root/dist/image}"
commit="${COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || true)}"
ldflags="-s -w -X github.com/sluice-dev/sluice/internal/version.Version=$version -X github.com/sluice-dev/sluice/internal/version.Commit=$commit"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
args=()
for p in ${PLATFORMS:-linux/amd64 linux/arm64}; do
  os="${p%/*}" arch="${p#*/}"
  echo "image: building $os/$arch" >&2
  (cd "$root" && CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -ldflags "$ldflags" -o "$stage/$os-$arch/sluice" ./cmd/sluice)
  args+=(-binary "$p=$stage/$os-$arch/sluice")
done
push=()
[[ -z "${IMAGE:-}" ]] || push=(-push "$IMAGE")
cd "$root" && go run ./hack/image -out "$out" -version "$version" -revision "$commit" "${args[@]}" "${push[@]}"
