#!/usr/bin/env bash
# Builds one Go tool pinned in its own module under hack/tools/<name>/ into the tools
# cache, keyed by that module's pins and the Go toolchain: a second run prints the
# cached path at once, a version bump builds a new one. Each module has a tool.env:
#   MODULE   the module whose version go.mod pins (the version is read from there)
#   PKG      the main package to build (several, space-separated, each into bin/ by its
#            last path element)
#   BIN      the binary whose path is printed
#   VERSION_VAR (optional) a string variable that -X stamps with the version
#
# Usage: hack/tools/gotool.sh <name>. Prints the binary's path on stdout (the last line);
# progress goes to stderr.
set -euo pipefail

name="${1:?usage: gotool.sh <name of a module under hack/tools>}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/$name" && pwd)"
cd "$here"
# shellcheck source=/dev/null
source ./tool.env

version="$(awk -v m="$MODULE" '($1=="require" && $2==m) {print $3; exit} ($1==m) {print $2; exit}' go.mod)"
if [[ -z "$version" ]]; then
  echo "gotool.sh: cannot read the $MODULE version from $here/go.mod" >&2
  exit 1
fi
ldflags="-s -w"
if [[ -n "${VERSION_VAR:-}" ]]; then
  ldflags+=" -X $VERSION_VAR=$version"
fi
key="$( { cat go.mod go.sum tools.go tool.env; go version; } | sha256sum | cut -c1-16)"
cache_root="${SLUICE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/tools}"
dest="$cache_root/$BIN-$version-$key"

if [[ -x "$dest/bin/$BIN" ]]; then
  echo "$dest/bin/$BIN"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.$BIN-lock"
flock 9
if [[ -x "$dest/bin/$BIN" ]]; then
  echo "$dest/bin/$BIN"
  exit 0
fi
tmp="$(mktemp -d "$cache_root/.build-$BIN-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
echo "gotool.sh: building $BIN $version into $dest (cold: a few minutes on 2 cores)" >&2
start=$SECONDS
for pkg in $PKG; do
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/${pkg##*/}" "$pkg"
done
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "gotool.sh: built in $((SECONDS - start))s" >&2
echo "$dest/bin/$BIN"
