//go:build tools

// Package tools pins Helm v4, the current major version, which the chart's
// tests install it with beside Helm v3 (charts/sluice); hack/tools/gotool.sh
// builds it.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
