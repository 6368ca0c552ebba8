#!/usr/bin/env bash
# Builds the sandbox's control-plane programs (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, kwok) from the versions pinned in this module, into a
# cache outside the clone keyed by everything that decides the result. A second run with
# the same pins prints the cached directory at once; a version bump builds a new one.
#
# `build.sh compat` builds the oldest Kubernetes minor sluice supports instead, from the
# module in compat/ (its own go.mod: a second k8s.io pin cannot share this one). Its etcd
# and kwok are the main build's: kwok talks to any API server, and the 1.30 API server
# speaks the etcd v3 API that etcd 3.6 serves (docs/design/day-two.md says why that is
# enough for what the compat subset proves).
#
# Prints the bin directory on stdout (the last line); progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
variant="${1:-main}"
case "$variant" in
  main) cd "$here" ;;
  compat)
    main_bin="$("$here/build.sh")"
    cd "$here/compat"
    ;;
  *) echo "build.sh: unknown build $variant (want nothing or compat)" >&2; exit 2 ;;
esac

kube_version="$(awk '$1=="require" {$1=""; $0=$0} $1=="k8s.io/kubernetes" {print $2; exit}' go.mod)"
if [[ -z "$kube_version" ]]; then
  echo "build.sh: cannot read the k8s.io/kubernetes version from $PWD/go.mod" >&2
  exit 1
fi
# kwok is built from its own go.mod: its release pins older k8s.io modules than
# the control plane, and compiling it against ours fails.
kwok_version="v0.7.0"
kube_major="${kube_version#v}"; kube_major="${kube_major%%.*}"
kube_minor="${kube_version#v*.}"; kube_minor="${kube_minor%%.*}"

# The same variables Kubernetes' own hack/lib/version.sh stamps, so `kubectl version`
# and the API server's /version report the pinned release, and the API server's
# emulation-version checks see a real binary version.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$kube_version"
  ldflags+=" -X $pkg.gitMajor=$kube_major"
  ldflags+=" -X $pkg.gitMinor=$kube_minor"
  ldflags+=" -X $pkg.gitTreeState=clean"
  ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

# The key covers what decides the binaries: the pinned modules, the extra sources, the
# Go toolchain and the link flags. Editing comments in this script does not rebuild.
if [[ "$variant" == main ]]; then
  key="$( { cat go.mod go.sum etcd/main.go tools.go; go version; echo "$ldflags kwok=$kwok_version"; } | sha256sum | cut -c1-16)"
else
  key="$( { cat go.mod go.sum tools.go; go version; echo "$ldflags"; } | sha256sum | cut -c1-16)"
fi
cache_root="${SLUICE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/tools}"
dest="$cache_root/$kube_version-$key"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)

complete() {
  local b
  for b in "${bins[@]}"; do [[ -x "$dest/bin/$b" ]] || return 1; done
}

if complete; then
  echo "$dest/bin"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
echo "build.sh: waiting for the build lock in $cache_root" >&2
flock 9
if complete; then # another build finished while we waited
  echo "$dest/bin"
  exit 0
fi

tmp="$(mktemp -d "$cache_root/.build-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

echo "build.sh: building Kubernetes $kube_version ($variant build) into $dest (cold: 10-25 min on 2 cores)" >&2
start=$SECONDS
kube=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
if [[ "$variant" == main ]]; then
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/" "${kube[@]}" ./etcd
  GOBIN="$tmp/bin" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
else
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/" "${kube[@]}"
  cp "$main_bin/etcd" "$main_bin/kwok" "$tmp/bin/"
fi
echo "build.sh: built in $((SECONDS - start))s" >&2

rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "$dest/bin"
