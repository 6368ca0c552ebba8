// Package capi tests sluice with Cluster API's own controllers (built from
// its Go module by hack/tools/capi.sh), against the sandbox's API server.
package capi

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }
