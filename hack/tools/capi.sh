#!/usr/bin/env bash
# Builds Cluster API's core controllers at the version pinned in hack/tools/capi/go.mod,
# which test/capi runs against the sandbox's API server, and copies what an install
# applies from the same module: the core CRDs, the webhook configurations and the
# manager's RBAC. Only `make test-capi` (part of `make test`) needs it.
#
# Prints the directory on stdout (the last line): bin/capi-manager, crds/*.yaml,
# webhook/manifests.yaml and rbac/*.yaml.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/capi" && pwd)"
cd "$here"

version="$(awk '$1=="require" && $2=="sigs.k8s.io/cluster-api" {print $3; exit}' go.mod)"
if [[ -z "$version" ]]; then
  echo "capi.sh: cannot read the sigs.k8s.io/cluster-api version from $here/go.mod" >&2
  exit 1
fi
ldflags="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$version"
key="$( { cat go.mod go.sum tools.go; go version; echo "$ldflags"; } | sha256sum | cut -c1-16)"
cache_root="${SLUICE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/tools}"
dest="$cache_root/capi-$version-$key"

complete() { [[ -x "$dest/bin/capi-manager" && -f "$dest/webhook/manifests.yaml" ]]; }
if complete; then
  echo "$dest"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.capi-lock"
flock 9
if complete; then
  echo "$dest"
  exit 0
fi
tmp="$(mktemp -d "$cache_root/.build-capi-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/crds" "$tmp/webhook" "$tmp/rbac"

echo "capi.sh: building Cluster API $version's core controllers into $dest (cold: about 2 min on 2 cores, measured 131 s)" >&2
start=$SECONDS
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/capi-manager" sigs.k8s.io/cluster-api/core
mod="$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
cp "$mod"/core/config/crd/bases/*.yaml "$tmp/crds/"
cp "$mod"/core/config/webhook/manifests.yaml "$tmp/webhook/"
cp "$mod"/core/config/rbac/role.yaml "$tmp/rbac/"
[[ -f "$mod/core/config/rbac/aggregated_role.yaml" ]] && cp "$mod/core/config/rbac/aggregated_role.yaml" "$tmp/rbac/"
chmod 0644 "$tmp"/crds/*.yaml "$tmp"/webhook/*.yaml "$tmp"/rbac/*.yaml
echo "capi.sh: built in $((SECONDS - start))s" >&2

rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "$dest"
