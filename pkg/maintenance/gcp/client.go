// Package gcp reads Google Compute Engine's maintenance notices from the
// instance metadata server (instance/preempted and instance/maintenance-event,
// long-polled with wait_for_change) and maps them onto maintenance.Event.
// Server is an in-tree emulator that behaves as Google documents the metadata
// server, for tests and the sandbox.
//
// What Google documents, and what this package relies on:
//
//   - Every request carries "Metadata-Flavor: Google"; without it, or with an
//     X-Forwarded-For header, the server refuses it (403). Every answer
//     carries "Metadata-Flavor: Google" and an ETag.
//   - instance/preempted is FALSE, and TRUE once Compute Engine preempts a
//     Spot or preemptible VM; the VM then has 30 seconds before it is
//     powered off.
//   - instance/maintenance-event is NONE, MIGRATE_ON_HOST_MAINTENANCE or
//     TERMINATE_ON_HOST_MAINTENANCE. It changes 60 seconds before the event
//     starts (a VM with GPUs is given one hour before it is stopped), and only
//     if it has been read at least once since the last event; it goes back to
//     NONE when the event is over.
//   - ?wait_for_change=true holds the request until the value differs from
//     the one whose ETag is last_etag (at once if it already does), or until
//     timeout_sec seconds have passed, then answers the current value and its
//     ETag. During maintenance the server may answer 503; such answers are
//     retried.
//
// Beyond the documentation, as servers in the field behave: Source polls
// each key on its own and backs off (with jitter) from a server that answers
// long polls at once, and a maintenance-event value Google does not document
// (SHUTDOWN_ON_HOST_MAINTENANCE, later additions) is rejected and ignored
// without hiding preempted.
package gcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// The server's fixed coordinates.
const (
	DefaultEndpoint = "http://metadata.google.internal"
	// BasePath prefixes every key.
	BasePath = "/computeMetadata/v1/"
	// The keys sluice watches, relative to BasePath.
	PathPreempted        = "instance/preempted"
	PathMaintenanceEvent = "instance/maintenance-event"
	// FlavorHeader and Flavor mark both requests and answers as metadata ones.
	FlavorHeader = "Metadata-Flavor"
	Flavor       = "Google"
	// MaxAnswer bounds an answer; anything larger is refused, not parsed.
	MaxAnswer = 1 << 20
)

// Answer is one value as the server sent it, with the ETag that names it.
type Answer struct {
	Value string
	ETag  string
}

// Client talks to one metadata server.
type Client struct {
	base    string
	http    *http.Client
	timeout time.Duration
	retries int
	backoff time.Duration // before the first retry; doubles after each
}

// NewClient returns a client for endpoint (DefaultEndpoint when empty). A
// plain read is bounded by timeout; a long poll by its wait plus timeout, so
// the server always gets to answer a held request before the client gives up.
func NewClient(endpoint string, timeout time.Duration) (*Client, error) {
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--imds-endpoint %q: give the server's root URL, such as %s", endpoint, DefaultEndpoint)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("metadata timeout %s: must be positive", timeout)
	}
	return &Client{
		base:    strings.TrimRight(endpoint, "/") + BasePath,
		http:    maintenance.NewHTTPClient(timeout, 0), // each request is bounded by its context
		timeout: timeout,
		retries: 3,
		backoff: 200 * time.Millisecond,
	}, nil
}

// Get reads the value at path (relative to BasePath, e.g. PathPreempted),
// retrying transport errors, 5xx answers (the server may answer 503 during
// maintenance) and 429s with backoff. An oversized answer, a refusal, or one
// without the Metadata-Flavor mark or an ETag is an error.
func (c *Client) Get(ctx context.Context, path string) (Answer, error) {
	return c.do(ctx, path, nil, c.timeout)
}

// Watch long-polls the value at path: the server answers once the value's
// ETag differs from lastETag, or after wait (rounded up to whole seconds,
// the unit of timeout_sec) with the value unchanged. An empty lastETag waits
// for a change from now.
func (c *Client) Watch(ctx context.Context, path, lastETag string, wait time.Duration) (Answer, error) {
	secs := int((wait + time.Second - 1) / time.Second)
	if secs < 1 {
		return Answer{}, fmt.Errorf("long poll of %s: wait %s must be at least a second", path, wait)
	}
	q := url.Values{"wait_for_change": {"true"}, "timeout_sec": {strconv.Itoa(secs)}}
	if lastETag != "" {
		q.Set("last_etag", lastETag)
	}
	return c.do(ctx, path, q, time.Duration(secs)*time.Second+c.timeout)
}

func (c *Client) do(ctx context.Context, path string, query url.Values, perAttempt time.Duration) (Answer, error) {
	target := c.base + strings.TrimLeft(path, "/")
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	backoff := c.backoff
	var last error
	for attempt := 0; attempt <= c.retries; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return Answer{}, fmt.Errorf("reading %s: %w", path, ctx.Err())
			case <-t.C:
			}
			backoff *= 2
		}
		a, retry, err := c.attempt(ctx, path, target, perAttempt)
		switch {
		case err == nil:
			return a, nil
		case ctx.Err() != nil: // the caller gave up; whatever failed is moot
			return Answer{}, fmt.Errorf("reading %s: %w", path, ctx.Err())
		case !retry:
			return Answer{}, err
		}
		last = err
	}
	return Answer{}, last
}

// attempt sends one request; retry says whether its failure may pass.
func (c *Client) attempt(ctx context.Context, path, target string, timeout time.Duration) (a Answer, retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return Answer{}, false, fmt.Errorf("building request for %s: %w", path, err)
	}
	req.Header.Set(FlavorHeader, Flavor)
	resp, err := c.http.Do(req)
	if err != nil {
		return Answer{}, true, fmt.Errorf("reading %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	_ = resp.Body.Close()
	switch {
	case err != nil:
		return Answer{}, true, fmt.Errorf("reading %s: %w", path, err)
	case len(data) > MaxAnswer:
		return Answer{}, false, fmt.Errorf("answer for %s is larger than %d bytes; refusing it", path, MaxAnswer)
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return Answer{}, true, fmt.Errorf("reading %s: metadata server answered %s", path, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return Answer{}, false, fmt.Errorf("reading %s: metadata server answered %s: %s", path, resp.Status, quote(strings.TrimSpace(string(data))))
	case resp.Header.Get(FlavorHeader) != Flavor:
		return Answer{}, false, fmt.Errorf("reading %s: the answer lacks %q, so no metadata server sent it", path, FlavorHeader+": "+Flavor)
	case resp.Header.Get("ETag") == "":
		return Answer{}, false, fmt.Errorf("reading %s: the answer has no ETag", path)
	}
	return Answer{Value: string(data), ETag: resp.Header.Get("ETag")}, false, nil
}
