//go:build tools

// Package tools pins promtool, which `make test` uses to check the chart's
// alerting rules and run their unit tests (charts/sluice/rules_test.go);
// hack/tools/gotool.sh builds it.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
