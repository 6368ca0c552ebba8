package faultproxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	cryptorand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// Proxy is a running fault-injecting proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	cfg       Config
	log       *slog.Logger
	clock     clock.WithDelayedExecution
	url       string
	ca        []byte
	server    *http.Server
	transport *http.Transport
	forward   *httputil.ReverseProxy
	enabled   atomic.Bool
	counts    counts

	mu  sync.Mutex // guards rng, so decisions follow the order of requests
	rng *rand.Rand
}

// Stats counts what the proxy has done since it started.
type Stats struct {
	Requests     int64
	Throttled    int64
	Errors       int64
	LostAnswers  int64
	WatchesCut   int64
	AddedLatency time.Duration
}

// String prints the counts on one line, for a test's log.
func (s Stats) String() string {
	return fmt.Sprintf("requests=%d throttled=%d errors=%d lostAnswers=%d watchesCut=%d addedLatency=%s",
		s.Requests, s.Throttled, s.Errors, s.LostAnswers, s.WatchesCut, s.AddedLatency)
}

// Start validates cfg and serves the proxy on a free loopback port.
func Start(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	upstream, err := url.Parse(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("parsing upstream %q: %w", cfg.Upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening on loopback: %w", err)
	}

	scheme, caPEM := "http", []byte(nil)
	if cfg.ServeTLS {
		cert, ca, err := selfSigned()
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme, caPEM = "https", ca
	}

	// A seed to replay a run by, not a secret.
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)) //nolint:gosec // G404
	p := &Proxy{
		cfg:   cfg,
		log:   cfg.Log,
		clock: cfg.Clock,
		url:   scheme + "://" + ln.Addr().String(),
		ca:    caPEM,
		rng:   rng,
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	p.enabled.Store(true)

	p.transport = http.DefaultTransport.(*http.Transport).Clone()
	if cfg.UpstreamTLS != nil {
		p.transport.TLSClientConfig = cfg.UpstreamTLS.Clone()
	}
	errorLog := slog.NewLogLogger(p.log.Handler(), slog.LevelWarn)
	p.forward = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
		},
		Transport:      p.transport,
		FlushInterval:  -1, // watch events must reach the client as they come
		ErrorLog:       errorLog,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamFailed,
	}
	p.server = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          errorLog,
	}
	go func() {
		if err := p.server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("faultproxy stopped serving", "err", err)
		}
	}()
	return p, nil
}

// URL is the proxy's loopback address, for rest.Config.Host: https with
// Config.ServeTLS, http otherwise.
func (p *Proxy) URL() string { return p.url }

// CA is the PEM certificate a client must trust to reach the proxy served
// with Config.ServeTLS (nil without).
func (p *Proxy) CA() []byte { return p.ca }

// selfSigned makes a certificate for 127.0.0.1, valid for a day, and returns
// it with its PEM form.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), cryptorand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("making the proxy's key: %w", err)
	}
	now := clock.RealClock{}.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "faultproxy"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(cryptorand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("making the proxy's certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats { return p.counts.snapshot() }

// SetEnabled turns the faults on and off. Off, the proxy passes every
// request through untouched and spares the watches already running, so that
// a scenario can settle at its end.
func (p *Proxy) SetEnabled(enabled bool) { p.enabled.Store(enabled) }

// Close stops the proxy and ends the streams still open through it.
func (p *Proxy) Close() error {
	err := p.server.Close()
	p.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("closing faultproxy: %w", err)
	}
	return nil
}

// ServeHTTP decides the request's fate, waits out its latency, then either
// answers with a fault or forwards it, marked for the faults that happen on
// the way back.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.counts.requests.Add(1)
	// Spared requests draw nothing, so that discovery, which clients do at
	// times of their own choosing, leaves the sequence of decisions alone.
	if !p.enabled.Load() || (!p.cfg.Discovery && isStartupPath(r.URL.Path)) {
		p.forward.ServeHTTP(w, r)
		return
	}

	d := p.decide(isMutating(r.Method))
	if err := p.delay(r.Context(), d.delay); err != nil {
		return // the client gave up
	}
	switch d.fault {
	case throttle:
		p.counts.throttled.Add(1)
		p.log.Info("injecting fault", "fault", "throttle", "method", r.Method, "path", r.URL.Path)
		writeStatus(w, throttleStatus())
		return
	case serverError:
		p.counts.errors.Add(1)
		p.log.Info("injecting fault", "fault", "error", "method", r.Method, "path", r.URL.Path, "code", d.code)
		writeStatus(w, errorStatus(d.code, d.retryAfter))
		return
	}

	mark := &mark{watch: isWatch(r)}
	if d.fault == lostAnswer {
		mark.lostAnswer = d.code
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if mark.watch && d.watchCut > 0 {
		timer := p.clock.AfterFunc(d.watchCut, func() { p.cut(r, mark, cancel) })
		defer timer.Stop()
	}
	p.forward.ServeHTTP(w, r.WithContext(context.WithValue(ctx, markKey{}, mark)))
}

// cut ends a watch stream the way a real API server does when its watch
// times out: the stream just ends.
func (p *Proxy) cut(r *http.Request, m *mark, cancel context.CancelFunc) {
	if !p.enabled.Load() {
		return
	}
	p.counts.watchesCut.Add(1)
	p.log.Info("injecting fault", "fault", "watch cut", "path", r.URL.Path)
	// Set before cancelling, so that the failed read the cancel causes is
	// already known to be ours.
	m.cut.Store(true)
	cancel()
}

// modifyResponse applies the faults that need the API server's answer.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	m, _ := resp.Request.Context().Value(markKey{}).(*mark)
	if m == nil {
		return nil
	}
	// Only a write that succeeded can lose its answer; a refused one keeps
	// the API server's reason, which the client must see to act on it.
	if m.lostAnswer != 0 && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		p.counts.lostAnswers.Add(1)
		p.log.Info("injecting fault", "fault", "lost answer", "method", resp.Request.Method,
			"path", resp.Request.URL.Path, "appliedCode", resp.StatusCode, "code", m.lostAnswer)
		replaceAnswer(resp, errorStatus(m.lostAnswer, false))
		return nil
	}
	if m.watch {
		resp.Body = &cutBody{ReadCloser: resp.Body, cut: &m.cut}
	}
	return nil
}

// upstreamFailed answers when the API server could not be reached, or a
// watch was cut before its answer began.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	if m, _ := r.Context().Value(markKey{}).(*mark); m != nil && m.cut.Load() {
		writeStatus(w, timeoutStatus("The watch was cut before it began (injected by faultproxy)."))
		return
	}
	if r.Context().Err() != nil {
		return // the client gave up
	}
	p.log.Warn("reaching the API server", "method", r.Method, "path", r.URL.Path, "err", err)
	writeStatus(w, status(http.StatusBadGateway, metav1.StatusReasonInternalError,
		"faultproxy could not reach the API server: "+err.Error(), false))
}

// delay waits d, or until ctx ends.
func (p *Proxy) delay(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	p.counts.addedLatency.Add(int64(d))
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mark travels with a forwarded request to the faults decided for its answer.
type mark struct {
	lostAnswer int         // status that replaces the API server's answer; 0 keeps it
	watch      bool        // the request opens a watch stream
	cut        atomic.Bool // the watch stream was cut on purpose
}

type markKey struct{}

// cutBody ends a cut watch stream cleanly: the read error that cancelling
// the upstream request causes becomes io.EOF, so the client sees the stream
// end rather than a broken connection.
type cutBody struct {
	io.ReadCloser
	cut *atomic.Bool
}

func (b *cutBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	if err != nil && b.cut.Load() {
		return n, io.EOF
	}
	return n, err
}

type counts struct {
	requests, throttled, errors, lostAnswers, watchesCut atomic.Int64
	addedLatency                                         atomic.Int64
}

func (c *counts) snapshot() Stats {
	return Stats{
		Requests:     c.requests.Load(),
		Throttled:    c.throttled.Load(),
		Errors:       c.errors.Load(),
		LostAnswers:  c.lostAnswers.Load(),
		WatchesCut:   c.watchesCut.Load(),
		AddedLatency: time.Duration(c.addedLatency.Load()),
	}
}
