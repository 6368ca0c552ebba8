package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// envFleetProfile names a directory: BenchmarkFleet then writes CPU
// profiles there of the controller during the first pool pass at each size,
// and of `sluice doctor` and `sluice status` (kubectl's --profile flags),
// and prints the top of each. What holds a missed target is read from
// these.
const envFleetProfile = "SLUICE_BENCH_FLEET_PROFILE"

// fleetProfileDir is the directory profiles go to, or "" when none are
// asked for.
func fleetProfileDir(b *testing.B) string {
	b.Helper()
	dir := os.Getenv(envFleetProfile)
	if dir == "" {
		return ""
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatalf("%s=%s: %v", envFleetProfile, dir, err)
	}
	return dir
}

// profileController starts a CPU profile of the controller for window and
// returns a function that waits for it, saves it as name in dir and prints
// its top.
func profileController(b *testing.B, c *controllerProcess, dir, name string, window time.Duration) func() {
	b.Helper()
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(c.metrics, "/metrics"), int(window.Seconds()))
	done := make(chan error, 1)
	file := filepath.Join(dir, name)
	go func() {
		resp, err := (&http.Client{Timeout: window + time.Minute}).Get(url)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(file)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return func() {
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "no CPU profile of the controller (%s): %v\n", name, err)
			return
		}
		printProfileTop(file)
	}
}

// profileArgs are the flags that make a sluice command write its CPU
// profile as name in dir, none when dir is "".
func profileArgs(dir, name string) []string {
	if dir == "" {
		return nil
	}
	return []string{"--profile", "cpu", "--profile-output", filepath.Join(dir, name)}
}

func printProfileTop(file string) {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=40", file).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go tool pprof %s: %v\n%s", file, err, out)
		return
	}
	fmt.Fprintf(os.Stderr, "\nCPU profile %s (cumulative):\n%s\n", file, out)
}

// sampleGoroutines saves the controller's goroutines (pprof's debug=1
// text) into dir every interval until ctx ends: where its passes wait.
func sampleGoroutines(ctx context.Context, c *controllerProcess, dir string, interval time.Duration) {
	url := strings.TrimSuffix(c.metrics, "/metrics") + "/debug/pprof/goroutine?debug=1"
	client := &http.Client{Timeout: interval}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		resp, err := client.Get(url)
		if err != nil {
			continue
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("drift-goroutines-%03d.txt", i)))
		if err == nil {
			_, _ = io.Copy(f, resp.Body)
			_ = f.Close()
		}
		_ = resp.Body.Close()
	}
}
