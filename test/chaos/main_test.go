// Package chaos runs sluice's controllers through faults on the sandbox: two
// controller processes with leader election, one SIGKILLed every 5–15 s,
// against the API server directly and through a proxy that throttles, fails,
// loses answers and cuts watches; an independent auditor (test/audit) judges
// every act. `make chaos` runs it; docs/design/fault-proof.md says why.
package chaos

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }
