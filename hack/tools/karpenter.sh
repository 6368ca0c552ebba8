#!/usr/bin/env bash
# Builds Karpenter's kwok provider at the version pinned in hack/tools/karpenter/go.mod,
# the peer `make bench BENCH=ConsolidationVersusKarpenter` runs beside sluice, and copies
# the CRDs it needs (karpenter.sh NodePool/NodeClaim/..., karpenter.kwok.sh KWOKNodeClass)
# from the same module. Only that benchmark needs it: `make test` never builds it.
#
# Prints the directory on stdout (the last line): bin/karpenter-kwok and crds/*.yaml.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/karpenter" && pwd)"
cd "$here"

version="$(awk '$1=="require" && $2=="sigs.k8s.io/karpenter" {print $3; exit}' go.mod)"
if [[ -z "$version" ]]; then
  echo "karpenter.sh: cannot read the sigs.k8s.io/karpenter version from $here/go.mod" >&2
  exit 1
fi
key="$( { cat go.mod go.sum tools.go; go version; } | sha256sum | cut -c1-16)"
cache_root="${SLUICE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/tools}"
dest="$cache_root/karpenter-$version-$key"

if [[ -x "$dest/bin/karpenter-kwok" && -d "$dest/crds" ]]; then
  echo "$dest"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.karpenter-lock"
flock 9
if [[ -x "$dest/bin/karpenter-kwok" && -d "$dest/crds" ]]; then
  echo "$dest"
  exit 0
fi
tmp="$(mktemp -d "$cache_root/.build-karpenter-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/crds"

echo "karpenter.sh: building Karpenter $version's kwok provider into $dest (cold: 3-8 min on 2 cores)" >&2
start=$SECONDS
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/karpenter-kwok" sigs.k8s.io/karpenter/kwok
mod="$(go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
cp "$mod"/kwok/charts/crds/*.yaml "$mod"/kwok/apis/crds/*.yaml "$tmp/crds/"
chmod 0644 "$tmp"/crds/*.yaml
echo "karpenter.sh: built in $((SECONDS - start))s" >&2

rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "$dest"
