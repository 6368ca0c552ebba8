#!/usr/bin/env bash
# Prints the krew plugin manifest (plugins/sluice.yaml for a krew index) for the archives
# hack/release/package.sh wrote, each with its sha256 and its download URL.
#
# Usage: hack/release/krew-manifest.sh VERSION [URL_BASE]
#   URL_BASE default: https://github.com/sluice-dev/sluice/releases/download/VERSION
# Env: DIST (default: dist)
set -euo pipefail

version="${1:?usage: krew-manifest.sh VERSION [URL_BASE]}"
base="${2:-https://github.com/sluice-dev/sluice/releases/download/$version}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dist="${DIST:-$root/dist}"
shopt -s nullglob
archives=("$dist"/sluice_"${version}"_*.tar.gz)
if [[ ${#archives[@]} -eq 0 ]]; then
  echo "krew-manifest.sh: no archives for $version in $dist: run hack/release/package.sh $version first" >&2
  exit 1
fi
cat <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: sluice
spec:
  version: $version
  homepage: https://github.com/sluice-dev/sluice
  shortDescription: Drain nodes within budgets and deadlines; explain every blocker
  description: |
    sluice drains nodes as kubectl drain does (the same flags), and better: it
    explains every pod that cannot leave and what would free it, finishes
    before a deadline (--deadline 30s for a spot node), drains several nodes
    at once under one shared PodDisruptionBudget ledger, and never hangs
    silently. \`kubectl sluice doctor\` finds what would block a drain before
    you start one.
  caveats: |
    The controller and the node agent (maintenance events, node pools) are
    installed with the Helm chart: see the homepage.
  platforms:
YAML
for a in "${archives[@]}"; do
  name="$(basename "$a")"
  platform="${name#sluice_"${version}"_}"; platform="${platform%.tar.gz}"
  os="${platform%_*}" arch="${platform##*_}"
  sum="$(sha256sum "$a" | cut -d' ' -f1)"
  cat <<YAML
  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $base/$name
    sha256: $sum
    files:
    - from: kubectl-sluice
      to: .
    - from: README.md
      to: .
    bin: kubectl-sluice
YAML
done
