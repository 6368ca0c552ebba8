package faultproxy

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"k8s.io/utils/clock"
)

// Config says where the API server is and which faults to inject. Shares are
// fractions in [0, 1] of the requests that faults may touch; see the package
// comment for the paths they never touch.
type Config struct {
	// Upstream is the API server's URL, such as "https://127.0.0.1:6443".
	Upstream string
	// UpstreamTLS is used to reach an https Upstream. It needs no client
	// certificate: the clients' bearer tokens are passed on.
	UpstreamTLS *tls.Config

	// Seed drives every decision. The same seed and the same order of
	// requests give the same decisions; concurrent clients make the order,
	// and so the reproduction, approximate.
	Seed uint64

	// Throttle is the share of requests answered 429 with Retry-After: 1
	// without reaching the API server.
	Throttle float64
	// Errors is the share of requests answered 500, 502, 503 (sometimes with
	// Retry-After) or 504 without reaching the API server.
	Errors float64
	// LostAnswers is the share of mutating requests (POST, PUT, PATCH,
	// DELETE) that reach the API server and, if it applied them, have their
	// answer replaced by a 504 or 500, so the client cannot know the write
	// happened. A write the API server refused keeps its answer.
	LostAnswers float64
	// Latency delays each request by a duration drawn uniformly from
	// [0, Latency] before it is answered or forwarded.
	Latency time.Duration
	// WatchCut ends each watch stream after a duration drawn uniformly from
	// [WatchCut[0], WatchCut[1]]. Zero leaves watches alone.
	WatchCut [2]time.Duration

	// Discovery lets faults touch the start-up paths as well.
	Discovery bool

	// ServeTLS serves https with a certificate of the proxy's own (see
	// Proxy.CA): client-go sends a kubeconfig's credentials only over TLS.
	ServeTLS bool
	// Log receives a record of each injected fault; nil logs nothing.
	Log *slog.Logger
	// Clock times latency and watch cuts; nil means the real clock.
	Clock clock.WithDelayedExecution
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	u, err := url.Parse(c.Upstream)
	if err != nil {
		return fmt.Errorf("parsing upstream %q: %w", c.Upstream, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("upstream %q is not an http(s) URL with a host", c.Upstream)
	}
	shares := []struct {
		name  string
		share float64
	}{{"throttle", c.Throttle}, {"errors", c.Errors}, {"lost answers", c.LostAnswers}}
	for _, s := range shares {
		if s.share < 0 || s.share > 1 {
			return fmt.Errorf("%s share %v is outside [0, 1]", s.name, s.share)
		}
	}
	// One draw decides between the faults, so their shares must fit in one.
	if sum := c.Throttle + c.Errors + c.LostAnswers; sum > 1 {
		return fmt.Errorf("throttle, errors and lost answers add up to %v, more than 1", sum)
	}
	if c.Latency < 0 {
		return fmt.Errorf("latency %s is negative", c.Latency)
	}
	if lo, hi := c.WatchCut[0], c.WatchCut[1]; (lo != 0 || hi != 0) && (lo <= 0 || hi < lo) {
		return fmt.Errorf("watch cut [%s, %s] is neither zero nor a range 0 < min <= max", lo, hi)
	}
	return nil
}
