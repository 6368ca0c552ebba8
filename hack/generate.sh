#!/usr/bin/env bash
# Regenerates what is derived from the API types in pkg/apis: the deepcopy
# functions (zz_generated.deepcopy.go) and the CRDs the Helm chart ships in
# charts/sluice/crds, which Go code installs through charts/sluice (chart.go).
# controller-gen is built from the Go module proxy on first use; its version
# follows the k8s.io modules in go.mod (v0.19 is built against k8s 0.34).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

controller_gen="sigs.k8s.io/controller-tools/cmd/controller-gen@v0.19.0"

# The CRD directory holds only generated files: start it afresh so a renamed
# or removed type leaves no stale CRD behind.
rm -f charts/sluice/crds/*.yaml
go run "$controller_gen" \
  object paths=./pkg/apis/... \
  crd:crdVersions=v1 output:crd:dir=./charts/sluice/crds
