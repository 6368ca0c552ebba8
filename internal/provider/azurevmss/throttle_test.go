package azurevmss

import (
	"net/http"
	"testing"
	"time"
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
		{http.Header{"Retry-After": {"soon"}}, defaultRetryAfter},
		{http.Header{"Retry-After": {"-3"}}, defaultRetryAfter},
		{http.Header{}, defaultRetryAfter},
	} {
		if got := retryAfter(tt.header); got != tt.want {
			t.Errorf("retryAfter(%v) = %v, want %v", tt.header, got, tt.want)
		}
	}
}
