package azurearm

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{"Retry-After": {"17"}}, 17 * time.Second},
		{http.Header{"Retry-After": {"17"}, "Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond},
		{http.Header{"X-Ms-Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {"Tue, 24 Nov 2026 14:00:30 GMT"}, "Date": {"Tue, 24 Nov 2026 14:00:00 GMT"}}, 30 * time.Second},
		{http.Header{"Retry-After": {"Tue, 24 Nov 2026 15:00:30 GMT"}, "Date": {"Tue, 24 Nov 2026 14:00:00 GMT"}}, 5 * time.Minute},
		{http.Header{"Retry-After": {"soon"}}, DefaultRetryAfter},
		{http.Header{"Retry-After": {"-3"}}, DefaultRetryAfter},
		{http.Header{}, DefaultRetryAfter},
	} {
		if got := RetryAfter(tt.header); got != tt.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

// answers is a transport answering each request with the next status.
type answers struct {
	statuses []int
	sent     int
}

func (a *answers) Do(req *http.Request) (*http.Response, error) {
	status := a.statuses[min(a.sent, len(a.statuses)-1)]
	a.sent++
	h := http.Header{}
	if status == http.StatusTooManyRequests {
		h.Set("Retry-After", "30")
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
}

// A 429 to one client of a subscription holds the subscription's other
// clients until the Retry-After has passed; another subscription's are not
// held.
func TestAThrottledSubscriptionPausesAllItsClients(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 14, 0, 0, 0, time.UTC))
	ts := NewThrottles(clk)
	send := func(ctx context.Context, subscription string, a *answers) error {
		pl := runtime.NewPipeline("test", "v0", runtime.PipelineOptions{PerRetry: []policy.Policy{ts.For(subscription)}},
			&policy.ClientOptions{Transport: a, Retry: policy.RetryOptions{MaxRetries: -1}})
		req, err := runtime.NewRequest(ctx, http.MethodGet, "https://management.azure.com/x")
		if err != nil {
			return err
		}
		_, err = pl.Do(req)
		return err
	}
	ctx := context.Background()
	if err := send(ctx, "SUB-A", &answers{statuses: []int{http.StatusTooManyRequests}}); err != nil {
		t.Fatal(err)
	}
	if err := send(ctx, "sub-b", &answers{statuses: []int{http.StatusOK}}); err != nil {
		t.Errorf("another subscription's request: %v; want it sent at once", err)
	}
	held := &answers{statuses: []int{http.StatusOK}}
	done := make(chan error, 1)
	go func() { done <- send(ctx, "sub-a", held) }()
	deadline := time.Now().Add(5 * time.Second) //nolint:forbidigo // a test's wall-clock deadline for a goroutine, not a decision
	for !clk.HasWaiters() {
		if time.Now().After(deadline) { //nolint:forbidigo // as above
			t.Fatal("the same subscription's next request did not wait out the Retry-After")
		}
		time.Sleep(time.Millisecond)
	}
	if held.sent != 0 {
		t.Fatal("the request was sent during the pause")
	}
	clk.Step(30 * time.Second)
	if err := <-done; err != nil || held.sent != 1 {
		t.Errorf("after the pause: %v, sent %d; want it sent once", err, held.sent)
	}
}
