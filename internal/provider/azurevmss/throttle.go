package azurevmss

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"k8s.io/utils/clock"
)

// throttle is one subscription's share of Azure Resource Manager's limits:
// every client of the subscription (each pool, each scale set) sends its
// requests through it. When Azure answers 429 it holds all of them until
// the Retry-After has passed, not only the request that was refused, so
// that one busy pool does not keep the subscription throttled for the
// others. (The SDK's retry policy already waits Retry-After before
// retrying the refused request itself.)
type throttle struct {
	clock clock.WithTicker

	mu    sync.Mutex
	until time.Time
}

// defaultRetryAfter is the pause when a 429 names none (Azure always does).
const defaultRetryAfter = 10 * time.Second

// Do waits out a pause, sends the request, and starts a pause on a 429.
func (t *throttle) Do(req *policy.Request) (*http.Response, error) {
	if err := t.wait(req); err != nil {
		return nil, err
	}
	resp, err := req.Next()
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		t.pause(retryAfter(resp.Header))
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

// retryAfter reads a 429's wait: retry-after-ms, x-ms-retry-after-ms, then
// Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header) time.Duration {
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
	return defaultRetryAfter
}

// throttles hands out one throttle per subscription.
type throttles struct {
	clock clock.WithTicker

	mu  sync.Mutex
	bys map[string]*throttle
}

func (ts *throttles) For(subscription string) *throttle {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.bys == nil {
		ts.bys = map[string]*throttle{}
	}
	t, ok := ts.bys[subscription]
	if !ok {
		t = &throttle{clock: ts.clock}
		ts.bys[subscription] = t
	}
	return t
}
