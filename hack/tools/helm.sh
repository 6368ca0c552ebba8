#!/usr/bin/env bash
# Builds Helm at the version pinned in hack/tools/helm/go.mod into the tools cache, for the
# chart's tests (`helm lint`, `helm template`). Its own module, so the control plane's
# cache key does not move with it.
#
# Prints the helm binary's path on stdout (the last line).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/helm" && pwd)"
cd "$here"

version="$(awk '$1=="require" && $2=="helm.sh/helm/v3" {print $3; exit}' go.mod)"
if [[ -z "$version" ]]; then
  echo "helm.sh: cannot read the helm.sh/helm/v3 version from $here/go.mod" >&2
  exit 1
fi
key="$( { cat go.mod go.sum tools.go; go version; } | sha256sum | cut -c1-16)"
cache_root="${SLUICE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/tools}"
dest="$cache_root/helm-$version-$key"

if [[ -x "$dest/bin/helm" ]]; then
  echo "$dest/bin/helm"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.helm-lock"
flock 9
if [[ -x "$dest/bin/helm" ]]; then
  echo "$dest/bin/helm"
  exit 0
fi
tmp="$(mktemp -d "$cache_root/.build-helm-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
echo "helm.sh: building Helm $version into $dest (cold: a few minutes on 2 cores)" >&2
start=$SECONDS
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version" -o "$tmp/bin/helm" helm.sh/helm/v3/cmd/helm
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "helm.sh: built in $((SECONDS - start))s" >&2
echo "$dest/bin/helm"
