package chaos

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

// SeedEnv names the variable that replays a run: the seed each run prints.
const SeedEnv = "SLUICE_CHAOS_SEED"

func seed(t *testing.T) uint64 {
	if v := os.Getenv(SeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: give a number", SeedEnv, v)
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

// TestControllerKills: the scenario with one of two controllers SIGKILLed
// every 5–15 s, straight to the API server.
func TestControllerKills(t *testing.T) {
	env := sandboxtest.New(t)
	s := seed(t)
	t.Logf("seed %d (replay with %s=%d)", s, SeedEnv, s)
	runScenario(t, env, env.Config.Host, nil, s)
}
