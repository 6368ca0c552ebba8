package maintenance

import (
	"net"
	"net/http"
	"time"
)

// NewHTTPClient returns the HTTP client every metadata source uses. The
// metadata services are link-local (169.254.169.254,
// metadata.google.internal): a proxy from the environment (HTTP_PROXY,
// HTTPS_PROXY) could not reach them, and would add X-Forwarded-For, which
// AWS's token PUT and GCP's metadata server refuse. So the transport never
// uses one. It keeps connections alive, since a source asks the same address
// every second or holds a long poll, and never follows a redirect: a metadata
// service does not redirect, and following one would carry a token or the
// Metadata header elsewhere.
//
// connect bounds the dial and the response headers' wait is left to the
// caller; request bounds a whole request (zero: the caller bounds each
// request with its context, as a long poll must).
func NewHTTPClient(connect, request time.Duration) *http.Client {
	return &http.Client{
		Timeout: request,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        8,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: connect,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
