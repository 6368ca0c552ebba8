package azurearm

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"k8s.io/utils/clock"
)

// DefaultRetryAfter is the pause when a 429 names none (Azure always does).
const DefaultRetryAfter = 10 * time.Second

// Throttles hands out one throttle policy per subscription. Every client of
// a subscription (each pool, each scale set or agent pool) sends its
// requests through its subscription's policy: when Azure answers 429 the
// policy holds all of them until the Retry-After has passed, not only the
// request that was refused, so that one busy pool does not keep the
// subscription throttled for the others. (The SDK's retry policy already
// waits Retry-After before retrying the refused request itself.) The zero
// value is not usable: build it with NewThrottles.
type Throttles struct {
	clock clock.WithTicker

	mu  sync.Mutex
	bys map[string]*throttle
}

// NewThrottles returns the throttles of a provider reading time from clk.
func NewThrottles(clk clock.WithTicker) *Throttles {
	return &Throttles{clock: clk, bys: map[string]*throttle{}}
}

// For returns the subscription's policy, for arm.ClientOptions'
// PerRetryPolicies. Subscriptions are GUIDs, compared in any case.
func (ts *Throttles) For(subscription string) policy.Policy {
	subscription = strings.ToLower(subscription)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.bys[subscription]
	if !ok {
		t = &throttle{clock: ts.clock}
		ts.bys[subscription] = t
	}
	return t
}

// throttle is one subscription's pause.
type throttle struct {
	clock clock.WithTicker

	mu    sync.Mutex
	until time.Time
}

// Do waits out a pause, sends the request, and starts a pause on a 429.
func (t *throttle) Do(req *policy.Request) (*http.Response, error) {
	if err := t.wait(req); err != nil {
		return nil, err
	}
	resp, err := req.Next()
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		t.pause(RetryAfter(resp.Header))
	}
	return resp, err
}

func (t *throttle) wait(req *policy.Request) error {
	for {
		t.mu.Lock()
		d := t.until.Sub(t.clock.Now())
		t.mu.Unlock()
		if d <= 0 {
			return nil
		}
		timer := t.clock.NewTimer(d)
		select {
		case <-req.Raw().Context().Done():
			timer.Stop()
			return req.Raw().Context().Err()
		case <-timer.C():
		}
	}
}

func (t *throttle) pause(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if until := t.clock.Now().Add(d); until.After(t.until) {
		t.until = until
	}
}

// RetryAfter reads a 429's wait: retry-after-ms, x-ms-retry-after-ms, then
// Retry-After in seconds or as an HTTP date; DefaultRetryAfter when none
// can be read.
func RetryAfter(h http.Header) time.Duration {
	for _, k := range []string{"retry-after-ms", "x-ms-retry-after-ms"} {
		if ms, err := strconv.Atoi(h.Get(k)); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	v := h.Get("Retry-After")
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil {
		// An HTTP date: the wait is from the server's Date, which a
		// skewed clock here would misread, so it is bounded.
		if date, err := http.ParseTime(h.Get("Date")); err == nil && at.After(date) {
			return min(at.Sub(date), 5*time.Minute)
		}
	}
	return DefaultRetryAfter
}
