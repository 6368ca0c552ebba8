package chaos

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/test/faultproxy"
)

// TestFaultyAPIServer: the same scenario, the controllers (still killed every
// 5–15 s) reaching the API server through a proxy that answers 10 % of
// requests 429 with Retry-After, 5 % with a 5xx, loses the answer of 2 % of
// the writes it lets through, adds up to 50 ms, and cuts each watch after
// 5–30 s. The auditor watches the API server directly.
func TestFaultyAPIServer(t *testing.T) {
	env := sandboxtest.New(t)
	s := seed(t)
	t.Logf("seed %d (replay with %s=%d)", s, SeedEnv, s)
	p := startProxy(t, env, s)
	r := runScenario(t, env, p.URL(), p.CA(), s)
	st := p.Stats()
	t.Logf("fault proxy: %s; the scenario took %s (the same scenario without the proxy: see TestControllerKills)",
		st, r.wall.Round(100*time.Millisecond))
	if st.Throttled == 0 || st.Errors == 0 || st.WatchesCut == 0 {
		t.Errorf("the proxy injected too little to vouch for anything: %s", st)
	}
}

// startProxy puts a fault proxy in front of the sandbox's API server.
func startProxy(t *testing.T, env *sandboxtest.Env, seed uint64) *faultproxy.Proxy {
	t.Helper()
	roots := x509.NewCertPool()
	ca := env.Config.CAData
	if len(ca) == 0 {
		b, err := os.ReadFile(env.Config.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		ca = b
	}
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("the sandbox's CA is not PEM")
	}
	p, err := faultproxy.Start(faultproxy.Config{
		Upstream:    env.Config.Host,
		UpstreamTLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		Seed:        seed,
		Throttle:    0.10,
		Errors:      0.05,
		LostAnswers: 0.02,
		Latency:     50 * time.Millisecond,
		WatchCut:    [2]time.Duration{5 * time.Second, 30 * time.Second},
		ServeTLS:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
