package faultproxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/test/faultproxy"
)

func TestSeedReproducesDecisions(t *testing.T) {
	run := func(seed uint64) []int {
		up := newUpstream(t, nil)
		p := start(t, up, faultproxy.Config{Seed: seed, Throttle: 0.1, Errors: 0.1, LostAnswers: 0.1})
		var codes []int
		for i := range 300 {
			method := http.MethodGet
			if i%2 == 1 {
				method = http.MethodPost
			}
			codes = append(codes, send(t, p, method, "/api/v1/namespaces/default/pods").code)
		}
		return codes
	}

	first, again, other := run(7), run(7), run(8)
	if !slices.ContainsFunc(first, func(c int) bool { return c != http.StatusOK }) {
		t.Fatalf("seed 7 injected no fault in 300 requests")
	}
	if !slices.Equal(first, again) {
		t.Errorf("seed 7 gave different answers on a second run:\n%v\n%v", first, again)
	}
	if slices.Equal(first, other) {
		t.Errorf("seeds 7 and 8 gave the same answers")
	}
}

func TestFaultRates(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up, faultproxy.Config{Seed: 1, Throttle: 0.10, Errors: 0.05, LostAnswers: 0.10})

	const n = 2000
	codes := map[int]int{}
	var throttled, failed, retryAfter503, plain503 int
	for i := range n {
		method := http.MethodGet
		if i%2 == 1 {
			method = http.MethodPost
		}
		a := send(t, p, method, "/api/v1/namespaces/default/pods")
		codes[a.code]++
		switch {
		case a.code == http.StatusTooManyRequests:
			throttled++
		case a.code >= 500:
			failed++
			if a.code == http.StatusServiceUnavailable && a.header.Get("Retry-After") != "" {
				retryAfter503++
			} else if a.code == http.StatusServiceUnavailable {
				plain503++
			}
		}
	}

	s := p.Stats()
	t.Log(s)
	within(t, "throttled", s.Throttled, 0.10*n, 0.03*n)
	within(t, "errors", s.Errors, 0.05*n, 0.02*n)
	within(t, "lost answers of the writes", s.LostAnswers, 0.10*n/2, 0.03*n/2)
	if s.Requests != n || int64(throttled) != s.Throttled || int64(failed) != s.Errors+s.LostAnswers {
		t.Errorf("client saw %d throttled and %d failed of %d, stats say %s", throttled, failed, n, s)
	}
	if want := n - s.Throttled - s.Errors; up.hits.Load() != want {
		t.Errorf("upstream got %d requests, want %d: every request not failed before it, lost answers included", up.hits.Load(), want)
	}
	for _, code := range []int{500, 502, 503, 504} {
		if codes[code] == 0 {
			t.Errorf("no %d among %v", code, codes)
		}
	}
	if retryAfter503 == 0 || plain503 == 0 {
		t.Errorf("503s with Retry-After: %d, without: %d; want some of each", retryAfter503, plain503)
	}
}

func TestInjectedAnswers(t *testing.T) {
	tests := []struct {
		name      string
		cfg       faultproxy.Config
		method    string
		wantCodes []int
		wantHits  int64
	}{
		{"throttled", faultproxy.Config{Throttle: 1}, http.MethodGet, []int{429}, 0},
		{"server errors", faultproxy.Config{Errors: 1}, http.MethodGet, []int{500, 502, 503, 504}, 0},
		{"lost answer to a write", faultproxy.Config{LostAnswers: 1}, http.MethodPost, []int{500, 504}, 1},
		{"reads lose no answer", faultproxy.Config{LostAnswers: 1}, http.MethodGet, []int{200}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, nil)
			p := start(t, up, tt.cfg)
			for range 20 {
				up.hits.Store(0)
				a := send(t, p, tt.method, "/api/v1/namespaces/default/pods")
				if !slices.Contains(tt.wantCodes, a.code) {
					t.Fatalf("got %d, want one of %v", a.code, tt.wantCodes)
				}
				if got := up.hits.Load(); got != tt.wantHits {
					t.Errorf("upstream got %d requests, want %d", got, tt.wantHits)
				}
				if a.code != http.StatusOK {
					checkStatus(t, a)
				}
			}
		})
	}
}

// checkStatus checks that a is a Kubernetes Status that client-go would
// decode into the apierrors value for its code.
func checkStatus(t *testing.T, a answer) {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var s metav1.Status
	if err := json.Unmarshal(a.body, &s); err != nil {
		t.Fatalf("decoding %q: %v", a.body, err)
	}
	wantReason := map[int]metav1.StatusReason{
		429: metav1.StatusReasonTooManyRequests,
		500: metav1.StatusReasonInternalError,
		502: metav1.StatusReasonInternalError,
		503: metav1.StatusReasonServiceUnavailable,
		504: metav1.StatusReasonTimeout,
	}[a.code]
	if s.Kind != "Status" || s.APIVersion != "v1" || s.Status != metav1.StatusFailure ||
		int(s.Code) != a.code || s.Reason != wantReason || s.Message == "" {
		t.Errorf("answer %d carries %+v, want a v1 Status with reason %q", a.code, s, wantReason)
	}
	retryAfter := a.header.Get("Retry-After")
	if a.code == http.StatusTooManyRequests && retryAfter != "1" {
		t.Errorf("429 has Retry-After %q, want 1", retryAfter)
	}
	if retryAfter != "" && (s.Details == nil || s.Details.RetryAfterSeconds != 1) {
		t.Errorf("Retry-After %q but status details %+v", retryAfter, s.Details)
	}
}

func TestRefusedWritesKeepTheirAnswer(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409}`)
	})
	p := start(t, up, faultproxy.Config{LostAnswers: 1})

	if a := send(t, p, http.MethodPut, "/api/v1/namespaces/default/pods/x"); a.code != http.StatusConflict {
		t.Errorf("refused write answered %d, want the API server's 409", a.code)
	}
	if s := p.Stats(); s.LostAnswers != 0 {
		t.Errorf("stats %s, want no lost answer", s)
	}
}

func TestWatchesAreCutInRange(t *testing.T) {
	const lo, hi = 100 * time.Millisecond, 300 * time.Millisecond
	up := newUpstream(t, nil)
	p := start(t, up, faultproxy.Config{WatchCut: [2]time.Duration{lo, hi}})

	paths := []string{
		"/api/v1/pods?watch=true",
		"/api/v1/watch/nodes",
		"/apis/apps/v1/namespaces/default/deployments?watch=1&resourceVersion=5", // last: its query is checked
	}
	for _, path := range paths {
		// Bounded, so that a watch never cut fails the test instead of hanging it.
		ctx, cancel := context.WithTimeout(context.Background(), hi+5*time.Second)
		began := time.Now()
		body, err := watch(ctx, p, path)
		took := time.Since(began)
		cancel()
		if err != nil {
			t.Fatalf("%s: reading the stream: %v; want a clean end", path, err)
		}
		if !strings.Contains(body, "BOOKMARK") {
			t.Errorf("%s: stream carried %q, want events", path, body)
		}
		// Generous above: the machine is shared and the race detector is slow.
		if took < lo || took > hi+time.Second {
			t.Errorf("%s: stream ended after %s, want within [%s, %s]", path, took, lo, hi)
		}
	}
	eventually(t, func() bool { return up.watchesEnded.Load() == int64(len(paths)) },
		"upstream never saw all %d watch requests end", len(paths))
	if s := p.Stats(); s.WatchesCut != int64(len(paths)) {
		t.Errorf("stats %s, want %d watches cut", s, len(paths))
	}
	if !strings.Contains(up.lastQuery.Load().(string), "resourceVersion=5") {
		t.Errorf("upstream got query %q, want it unchanged", up.lastQuery.Load())
	}
}

func TestAuthorizationReachesUpstream(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up, faultproxy.Config{})

	req, err := http.NewRequest(http.MethodGet, p.URL()+"/api/v1/nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer token-123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()

	if got := up.lastAuth.Load(); got != "Bearer token-123" {
		t.Errorf("upstream got Authorization %q, want %q", got, "Bearer token-123")
	}
}

// Served with TLS, the proxy presents a certificate its CA() vouches for,
// and passes the bearer token on: client-go sends a kubeconfig's
// credentials only over TLS.
func TestServeTLS(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up, faultproxy.Config{ServeTLS: true})
	if !strings.HasPrefix(p.URL(), "https://") {
		t.Fatalf("URL %q, want https", p.URL())
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.CA()) {
		t.Fatalf("CA() is not a PEM certificate: %q", p.CA())
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequest(http.MethodGet, p.URL()+"/api/v1/nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer token-tls")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if got := up.lastAuth.Load(); got != "Bearer token-tls" {
		t.Errorf("upstream got Authorization %q, want %q", got, "Bearer token-tls")
	}
	if _, err := http.Get(p.URL() + "/api/v1/nodes"); err == nil {
		t.Error("a client that does not trust CA() reached the proxy")
	}
}

func TestSetEnabledFalsePassesEverything(t *testing.T) {
	up := newUpstream(t, nil)
	// Every request would be faulted while enabled.
	p := start(t, up, faultproxy.Config{Throttle: 0.5, Errors: 0.5,
		WatchCut: [2]time.Duration{50 * time.Millisecond, 100 * time.Millisecond}})

	p.SetEnabled(false)
	for i := range 100 {
		method := http.MethodGet
		if i%2 == 1 {
			method = http.MethodDelete
		}
		if a := send(t, p, method, "/api/v1/namespaces/default/pods/x"); a.code != http.StatusOK {
			t.Fatalf("disabled proxy answered %d", a.code)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	if _, err := watch(ctx, p, "/api/v1/pods?watch=true"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("watch through a disabled proxy ended with %v, want it still open at the deadline", err)
	}
	if s := p.Stats(); up.hits.Load() != 101 || s.Throttled+s.Errors+s.WatchesCut != 0 {
		t.Errorf("upstream got %d of 101 requests, stats %s", up.hits.Load(), s)
	}

	p.SetEnabled(true)
	if a := send(t, p, http.MethodGet, "/api/v1/namespaces/default/pods/x"); a.code == http.StatusOK {
		t.Errorf("re-enabled proxy let a request through")
	}
}

func TestDisablingSparesRunningWatches(t *testing.T) {
	up := newUpstream(t, nil)
	p := start(t, up, faultproxy.Config{WatchCut: [2]time.Duration{150 * time.Millisecond, 150 * time.Millisecond}})

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/api/v1/pods?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	p.SetEnabled(false)

	if _, err := io.Copy(io.Discard, resp.Body); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("watch begun before disabling ended with %v, want it still open at the deadline", err)
	}
	if s := p.Stats(); s.WatchesCut != 0 {
		t.Errorf("stats %s, want no watch cut", s)
	}
}

func TestStartupPathsAreSpared(t *testing.T) {
	spared := []string{"/api", "/api/", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/version",
		"/openapi/v2", "/openapi/v3/apis/apps/v1", "/healthz", "/livez", "/readyz", "/readyz/ping"}
	faulted := []string{"/api/v1/namespaces", "/api/v1/namespaces/default/pods", "/apis/apps/v1/deployments",
		"/apis/sluice.dev/v1alpha1/nodepools", "/metrics", "/versions"}

	up := newUpstream(t, nil)
	p := start(t, up, faultproxy.Config{Throttle: 0.5, Errors: 0.5})
	for _, path := range spared {
		if a := send(t, p, http.MethodGet, path); a.code != http.StatusOK {
			t.Errorf("%s answered %d, want it spared", path, a.code)
		}
	}
	for _, path := range faulted {
		if a := send(t, p, http.MethodGet, path); a.code == http.StatusOK {
			t.Errorf("%s passed, want it faulted", path)
		}
	}

	withDiscovery := start(t, up, faultproxy.Config{Throttle: 0.5, Errors: 0.5, Discovery: true})
	for _, path := range spared {
		if a := send(t, withDiscovery, http.MethodGet, path); a.code == http.StatusOK {
			t.Errorf("%s passed with Discovery set, want it faulted", path)
		}
	}
}

func TestLatencyDelaysRequests(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	up := newUpstream(t, nil)
	p := start(t, up, faultproxy.Config{Seed: 3, Latency: time.Second, Clock: clk})

	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(p.URL() + "/api/v1/nodes")
		if err == nil {
			err = resp.Body.Close()
		}
		done <- err
	}()
	eventually(t, clk.HasWaiters, "the request never waited on the clock")
	select {
	case err := <-done:
		t.Fatalf("request answered (%v) before its latency passed", err)
	default:
	}
	clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Errorf("delayed request: %v", err)
	}
	if s := p.Stats(); s.AddedLatency <= 0 || s.AddedLatency > time.Second {
		t.Errorf("stats %s, want added latency in (0, 1s]", s)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := faultproxy.Config{Upstream: "https://127.0.0.1:6443", Throttle: 0.1, Errors: 0.05, LostAnswers: 0.02,
		Latency: time.Millisecond, WatchCut: [2]time.Duration{time.Second, 2 * time.Second}}
	tests := []struct {
		name   string
		change func(*faultproxy.Config)
		want   string
	}{
		{"valid", func(*faultproxy.Config) {}, ""},
		{"no upstream", func(c *faultproxy.Config) { c.Upstream = "" }, "not an http(s) URL"},
		{"share above one", func(c *faultproxy.Config) { c.Errors = 1.5 }, "outside [0, 1]"},
		{"negative share", func(c *faultproxy.Config) { c.Throttle = -0.1 }, "outside [0, 1]"},
		{"shares above one", func(c *faultproxy.Config) { c.Throttle, c.Errors = 0.6, 0.6 }, "add up to"},
		{"negative latency", func(c *faultproxy.Config) { c.Latency = -1 }, "negative"},
		{"cut range reversed", func(c *faultproxy.Config) { c.WatchCut[0] = 3 * time.Second }, "watch cut"},
		{"cut without minimum", func(c *faultproxy.Config) { c.WatchCut[0] = 0 }, "watch cut"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.change(&cfg)
			err := cfg.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// upstream stands in for kube-apiserver: it answers 200 to everything and
// streams bookmarks forever to watches.
type upstream struct {
	*httptest.Server
	tls          *tls.Config
	hits         atomic.Int64
	watchesEnded atomic.Int64
	lastAuth     atomic.Value
	lastQuery    atomic.Value
}

// newUpstream starts an upstream; handler, if given, answers the requests
// that are not watches.
func newUpstream(t *testing.T, handler http.HandlerFunc) *upstream {
	t.Helper()
	up := &upstream{}
	up.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.hits.Add(1)
		up.lastAuth.Store(r.Header.Get("Authorization"))
		up.lastQuery.Store(r.URL.RawQuery)
		switch {
		case r.URL.Query().Get("watch") != "" || strings.Contains(r.URL.Path, "/watch/"):
			streamBookmarks(w, r)
			up.watchesEnded.Add(1)
		case handler != nil:
			handler(w, r)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Success"}`)
		}
	}))
	t.Cleanup(up.Close)
	pool := x509.NewCertPool()
	pool.AddCert(up.Certificate())
	up.tls = &tls.Config{RootCAs: pool}
	return up
}

// streamBookmarks writes watch events until the request is cancelled.
func streamBookmarks(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	for {
		_, _ = io.WriteString(w, `{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"5"}}}`+"\n")
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func start(t *testing.T, up *upstream, cfg faultproxy.Config) *faultproxy.Proxy {
	t.Helper()
	cfg.Upstream, cfg.UpstreamTLS = up.URL, up.tls
	p, err := faultproxy.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

type answer struct {
	code   int
	header http.Header
	body   []byte
}

func send(t *testing.T, p *faultproxy.Proxy, method, path string) answer {
	t.Helper()
	req, err := http.NewRequest(method, p.URL()+path, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return answer{code: resp.StatusCode, header: resp.Header, body: body}
}

// watch reads a watch stream to its end; the error is nil only if the
// stream ended cleanly.
func watch(ctx context.Context, p *faultproxy.Proxy, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("watch answered %d", resp.StatusCode)
	}
	var b strings.Builder
	_, err = io.Copy(&b, bufio.NewReader(resp.Body))
	return b.String(), err
}

func within(t *testing.T, what string, got int64, want, slack float64) {
	t.Helper()
	if float64(got) < want-slack || float64(got) > want+slack {
		t.Errorf("%s: %d, want %.0f ± %.0f", what, got, want, slack)
	}
}

// eventually polls cond until it holds or five seconds pass.
func eventually(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf(format, args...)
		}
	}
}
