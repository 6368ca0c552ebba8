#!/usr/bin/env bash
# Fetches the Prometheus Operator's CRDs (ServiceMonitor, PodMonitor, PrometheusRule, ...) at the
# version pinned here, from its Go module through the module proxy, for the chart's server-side
# dry run: the API server then validates the chart's monitoring objects against the operator's
# own schemas. Prints the directory holding the CRD manifests (the last line).
set -euo pipefail
version="v0.85.0"
dir="$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ ! -d "$dir/example/prometheus-operator-crd" ]]; then
  echo "monitoring-crds.sh: no example/prometheus-operator-crd in prometheus-operator $version ($dir)" >&2
  exit 1
fi
echo "$dir/example/prometheus-operator-crd"
