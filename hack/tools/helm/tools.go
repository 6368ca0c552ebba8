//go:build tools

// Package tools pins Helm, which `make test` uses to render and lint the
// chart (charts/sluice/chart_test.go); hack/tools/helm.sh builds it.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
