package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// The service's fixed coordinates.
const (
	DefaultEndpoint = "http://169.254.169.254"

	TokenPath               = "/latest/api/token" //nolint:gosec // a path, not a credential
	SpotActionPath          = "/latest/meta-data/spot/instance-action"
	SpotTerminationTimePath = "/latest/meta-data/spot/termination-time"
	ScheduledPath           = "/latest/meta-data/events/maintenance/scheduled"
	HistoryPath             = "/latest/meta-data/events/maintenance/history"
	RebalancePath           = "/latest/meta-data/events/recommendations/rebalance"
	LifecyclePath           = "/latest/meta-data/autoscaling/target-lifecycle-state"

	// TokenHeader carries the session token on every GET.
	TokenHeader = "X-aws-ec2-metadata-token" //nolint:gosec // a header name, not a credential
	// TokenTTLHeader asks for a token lifetime on the PUT, in whole seconds.
	TokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds" //nolint:gosec // a header name, not a credential
	// MaxTokenTTL is the longest session AWS grants: six hours.
	MaxTokenTTL = 21600 * time.Second

	// EventTimeLayout is how scheduled events write NotBefore and NotAfter.
	EventTimeLayout = "2 Jan 2006 15:04:05 GMT"

	// MaxDocument bounds an answer; anything larger is refused, not parsed.
	MaxDocument = 1 << 20
)

// DefaultPollInterval is how often Source asks when told nothing else: every
// five seconds, as AWS recommends for Spot interruption notices and rebalance
// recommendations.
const DefaultPollInterval = 5 * time.Second

// tokenRenewal is how long before its expiry a cached token is replaced, so a
// request never travels with a token about to lapse.
const tokenRenewal = time.Minute

// SpotAction is spot/instance-action, field for field.
type SpotAction struct {
	Action string `json:"action"` // hibernate, stop or terminate
	Time   string `json:"time"`   // RFC 3339, UTC: when the action happens
}

// ScheduledEvent is one entry of events/maintenance/scheduled (or history),
// field for field.
type ScheduledEvent struct {
	NotBefore   string `json:"NotBefore"` // EventTimeLayout
	Code        string `json:"Code"`
	Description string `json:"Description"`
	EventID     string `json:"EventId"`
	NotAfter    string `json:"NotAfter,omitempty"` // EventTimeLayout; often absent
	State       string `json:"State"`              // active, canceled or completed
}

// ScheduledList is what the scheduled or history document held: the entries
// that decoded, and an error for each that did not.
type ScheduledList struct {
	Events     []ScheduledEvent
	Unreadable []error
}

// RebalanceRecommendation is events/recommendations/rebalance.
type RebalanceRecommendation struct {
	NoticeTime string `json:"noticeTime"` // RFC 3339, UTC: when the signal was emitted
}

// Client talks to one instance's metadata service. It is safe for concurrent
// use; the session token is shared and renewed before it expires.
type Client struct {
	base    string
	http    *http.Client
	clk     clock.Clock
	retries int
	backoff time.Duration
	ttl     time.Duration

	mu      sync.Mutex
	token   string
	expires time.Time
}

// NewClient returns a client for endpoint (DefaultEndpoint when empty); every
// request is bounded by timeout, and token lifetimes and retry pauses are
// measured on clk (the real clock when nil).
func NewClient(endpoint string, timeout time.Duration, clk clock.Clock) (*Client, error) {
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("--imds-endpoint %q: give a URL such as http://169.254.169.254", endpoint)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("metadata timeout %s: must be positive", timeout)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Client{
		base:    strings.TrimRight(endpoint, "/"),
		http:    maintenance.NewHTTPClient(timeout, timeout),
		clk:     clk,
		retries: 3,
		backoff: 200 * time.Millisecond,
		ttl:     MaxTokenTTL,
	}, nil
}

// SpotAction reads the Spot interruption notice; nil when there is none.
func (c *Client) SpotAction(ctx context.Context) (*SpotAction, error) {
	body, found, err := c.get(ctx, SpotActionPath)
	if err != nil || !found {
		return nil, err
	}
	var a SpotAction
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("decoding spot instance-action: %w", err)
	}
	return &a, nil
}

// ScheduledEvents reads the active scheduled events. The answer must be a
// JSON array; each entry is decoded on its own, so one unreadable entry is
// listed in Unreadable instead of spoiling the others.
func (c *Client) ScheduledEvents(ctx context.Context) (ScheduledList, error) {
	return c.eventList(ctx, ScheduledPath)
}

// MaintenanceHistory reads the canceled and completed scheduled events, as
// ScheduledEvents does.
func (c *Client) MaintenanceHistory(ctx context.Context) (ScheduledList, error) {
	return c.eventList(ctx, HistoryPath)
}

// RebalanceRecommendation reads the rebalance recommendation; nil when there
// is none.
func (c *Client) RebalanceRecommendation(ctx context.Context) (*RebalanceRecommendation, error) {
	body, found, err := c.get(ctx, RebalancePath)
	if err != nil || !found {
		return nil, err
	}
	var r RebalanceRecommendation
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding rebalance recommendation: %w", err)
	}
	return &r, nil
}

// TargetLifecycleState reads the Auto Scaling target lifecycle state; empty
// when the service has none. An answer that cannot be a state name (HTML, a
// paragraph) is an error.
func (c *Client) TargetLifecycleState(ctx context.Context) (string, error) {
	body, found, err := c.get(ctx, LifecyclePath)
	if err != nil || !found {
		return "", err
	}
	return ParseLifecycleState(body)
}

// ParseLifecycleState reads the target lifecycle state document; an answer
// that cannot be a state name (HTML, a paragraph) is an error.
func ParseLifecycleState(body []byte) (string, error) {
	state := strings.TrimSpace(string(body))
	if !stateName(state) {
		return "", fmt.Errorf("target lifecycle state %q is not a state name", clip(state))
	}
	return state, nil
}

// Observe reads all four documents and maps them. Any document that cannot
// be read or decoded makes the whole observation an error, because a missing
// document must not look like an event that is over. An entry that decodes
// but cannot be mapped, or an entry of the scheduled list that does not
// decode, is listed in Rejected as a maintenance.RejectedError that names
// the events it may have been.
func (c *Client) Observe(ctx context.Context) (maintenance.Observation, error) {
	var obs maintenance.Observation
	spot, err := c.SpotAction(ctx)
	if err != nil {
		return maintenance.Observation{}, err
	}
	if spot != nil {
		e, err := spot.Event()
		add(&obs, e, maintenance.RejectPrefix("", err, spotPrefix))
	}
	scheduled, err := c.ScheduledEvents(ctx)
	if err != nil {
		return maintenance.Observation{}, err
	}
	obs.Rejected = append(obs.Rejected, scheduled.Unreadable...)
	for _, s := range scheduled.Events {
		e, err := s.Event()
		if s.EventID == "" {
			add(&obs, e, maintenance.Reject("", err))
		} else {
			add(&obs, e, maintenance.Reject("", err, s.EventID))
		}
	}
	rebalance, err := c.RebalanceRecommendation(ctx)
	if err != nil {
		return maintenance.Observation{}, err
	}
	if rebalance != nil {
		e, err := rebalance.Event()
		add(&obs, e, maintenance.RejectPrefix("", err, rebalancePrefix))
	}
	state, err := c.TargetLifecycleState(ctx)
	if err != nil {
		return maintenance.Observation{}, err
	}
	if e, ok, err := LifecycleEvent(state); ok || err != nil {
		add(&obs, e, maintenance.RejectPrefix("", err, lifecyclePrefix))
	}
	return obs, nil
}

func (c *Client) eventList(ctx context.Context, path string) (ScheduledList, error) {
	body, found, err := c.get(ctx, path)
	if err != nil || !found {
		return ScheduledList{}, err
	}
	list, err := ParseScheduledList(body)
	if err != nil {
		return ScheduledList{}, fmt.Errorf("decoding %s: %w", path, err)
	}
	return list, nil
}

// ParseScheduledList reads events/maintenance/scheduled (or history). The
// answer must be a JSON array; each entry is decoded on its own, and one that
// does not decode is listed in Unreadable (as a maintenance.RejectedError
// naming its EventId when that much could be read).
func ParseScheduledList(body []byte) (ScheduledList, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return ScheduledList{}, err
	}
	var list ScheduledList
	for i, r := range raw {
		var e ScheduledEvent
		if err := json.Unmarshal(r, &e); err != nil {
			err = fmt.Errorf("scheduled event #%d: decoding: %w", i, err)
			var id struct{ EventID string }
			if json.Unmarshal(r, &id) == nil && id.EventID != "" {
				list.Unreadable = append(list.Unreadable, maintenance.Reject("", err, id.EventID))
			} else {
				list.Unreadable = append(list.Unreadable, maintenance.Reject("", err))
			}
			continue
		}
		list.Events = append(list.Events, e)
	}
	return list, nil
}

// get reads path. found is false on a 404: the document is not there. Each
// attempt uses the cached token, or a new one on a 401; transport errors and
// 5xx answers are retried with backoff.
func (c *Client) get(ctx context.Context, path string) (body []byte, found bool, err error) {
	var a *answer
	err = c.retry(ctx, func() error {
		a, err = c.getOnce(ctx, path)
		return err
	})
	switch {
	case err != nil:
		return nil, false, err
	case a.status == http.StatusOK:
		return a.body, true, nil
	case a.status == http.StatusNotFound:
		return nil, false, nil
	case a.status == http.StatusUnauthorized:
		return nil, false, fmt.Errorf("GET %s: %s even with a new token", path, a.statusText)
	default:
		return nil, false, fmt.Errorf("GET %s: %s", path, a.statusText)
	}
}

func (c *Client) getOnce(ctx context.Context, path string) (*answer, error) {
	token, err := c.sessionToken(ctx)
	if err != nil {
		return nil, err
	}
	a, err := c.send(ctx, http.MethodGet, path, TokenHeader, token)
	if err != nil || a.status != http.StatusUnauthorized {
		return a, err
	}
	// The token lapsed or the service forgot it (a restart, a live migration):
	// AWS's advice is to get a new one.
	c.forget(token)
	if token, err = c.sessionToken(ctx); err != nil {
		return nil, err
	}
	return c.send(ctx, http.MethodGet, path, TokenHeader, token)
}

// sessionToken returns the cached token, or a new one when there is none or
// it is about to expire.
func (c *Client) sessionToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clk.Now()
	if c.token != "" && now.Before(c.expires.Add(-tokenRenewal)) {
		return c.token, nil
	}
	a, err := c.send(ctx, http.MethodPut, TokenPath, TokenTTLHeader, strconv.Itoa(int(c.ttl/time.Second)))
	if err != nil {
		return "", fmt.Errorf("getting a metadata token: %w", err)
	}
	if a.status != http.StatusOK {
		return "", fmt.Errorf("getting a metadata token: %s", a.statusText)
	}
	token, ttl, err := parseToken(a.body, a.header.Get(TokenTTLHeader), c.ttl)
	if err != nil {
		return "", fmt.Errorf("getting a metadata token: %w", err)
	}
	c.token, c.expires = token, now.Add(ttl)
	return token, nil
}

// parseToken reads the service's answer to a token request for asked: the
// token, and how long it lasts, the shorter of asked and what the service
// says it granted (in whole seconds, in the TTL header).
func parseToken(body []byte, granted string, asked time.Duration) (string, time.Duration, error) {
	token := strings.TrimSpace(string(body))
	if !headerValue(token) {
		return "", 0, errors.New("the answer is not a token")
	}
	ttl := asked
	// s is bounded before it is multiplied: a huge one would wrap negative,
	// and a token that has always expired is fetched again for every read.
	if s, err := strconv.Atoi(granted); err == nil && s > 0 && time.Duration(s) <= asked/time.Second && time.Duration(s)*time.Second < asked {
		ttl = time.Duration(s) * time.Second
	}
	return token, ttl, nil
}

func (c *Client) forget(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == token {
		c.token = ""
	}
}

// answer is one HTTP answer, read in full.
type answer struct {
	status     int
	statusText string
	header     http.Header
	body       []byte
}

// transientError is a failure worth retrying: the transport, or a 5xx.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// send makes one request with one header and reads the answer. Transport
// errors and 5xx answers come back as transientError; an answer larger than
// MaxDocument is a plain error.
func (c *Client) send(ctx context.Context, method, path, header, value string) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set(header, value)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &transientError{fmt.Errorf("%s %s: %w", method, path, err)}
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocument+1))
	switch {
	case err != nil:
		return nil, &transientError{fmt.Errorf("reading %s: %w", path, err)}
	case len(body) > MaxDocument:
		return nil, fmt.Errorf("%s answer is larger than %d bytes; refusing it", path, MaxDocument)
	case resp.StatusCode >= 500:
		return nil, &transientError{fmt.Errorf("%s %s: %s", method, path, resp.Status)}
	}
	return &answer{status: resp.StatusCode, statusText: resp.Status, header: resp.Header, body: body}, nil
}

// retry runs try until it succeeds or fails for good, pausing on the clock
// between attempts (200ms, 400ms, 800ms).
func (c *Client) retry(ctx context.Context, try func() error) error {
	backoff := c.backoff
	var err error
	for attempt := 0; attempt <= c.retries; attempt++ {
		if attempt > 0 {
			if werr := c.wait(ctx, backoff); werr != nil {
				return werr
			}
			backoff *= 2
		}
		var transient *transientError
		if err = try(); !errors.As(err, &transient) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
	}
	return err
}

func (c *Client) wait(ctx context.Context, d time.Duration) error {
	t := c.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// stateName reports whether s looks like a lifecycle state: letters, with at
// most one colon inside ("Warmed:Running").
func stateName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	parts := strings.Split(s, ":")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for _, r := range p {
			if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') {
				return false
			}
		}
	}
	return true
}

// headerValue reports whether s can travel as a header value unchanged.
func headerValue(s string) bool {
	if s == "" || len(s) > 4096 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
