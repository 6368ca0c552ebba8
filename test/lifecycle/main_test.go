package lifecycle

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }
