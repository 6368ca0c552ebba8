//go:build tools

// Package tools pins Prometheus' promtool, which `make test` uses to check the
// chart's alerting rules and run their unit tests (charts/sluice), and the
// Prometheus server from the same release, which the walk test (test/walk)
// runs to scrape sluice and evaluate those rules; hack/tools/gotool.sh builds
// both.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
