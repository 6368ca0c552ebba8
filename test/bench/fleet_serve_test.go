package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/test/bench/feed"
)

// BenchmarkFleetServe builds the fleet of SLUICE_BENCH_FLEET's first size
// and serves it for SLUICE_BENCH_FLEET_SERVE (a duration), writing the
// kubeconfig to the path it prints: for profiling a controller by hand
// against the same objects BenchmarkFleet measures. No figure is judged.
func BenchmarkFleetServe(b *testing.B) {
	hold, err := time.ParseDuration(os.Getenv("SLUICE_BENCH_FLEET_SERVE"))
	if err != nil {
		b.Skip("SLUICE_BENCH_FLEET_SERVE (a duration) not set")
	}
	srv, err := feed.New(clock.RealClock{})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	f := buildFleet(b, srv, fleetSizes(b)[0])
	path := filepath.Join(os.TempDir(), "sluice-fleet.kubeconfig")
	if err := os.WriteFile(path, srv.Kubeconfig(), 0o600); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("serving %d nodes, %d pods; kubeconfig %s\n", f.nodes, f.pods, path)
	time.Sleep(hold)
}
