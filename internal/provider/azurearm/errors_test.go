package azurearm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/sluice-dev/sluice/internal/provider"
)

// answer is an ARM error as the SDK returns it.
func answer(status int, code string, header http.Header) error {
	if header == nil {
		header = http.Header{}
	}
	body := fmt.Sprintf(`{"error":{"code":%q,"message":"m"}}`, code)
	req, _ := http.NewRequest(http.MethodPut, "https://management.azure.com/x", nil)
	return runtime.NewResponseError(&http.Response{StatusCode: status, Header: header, Body: io.NopCloser(bytes.NewBufferString(body)), Request: req})
}

// own is a provider's classify: it knows one code, which it answers even
// with a 403, and nothing else.
func own(re *azcore.ResponseError, e *provider.Error) bool {
	if re.ErrorCode != "OwnCode" {
		return false
	}
	e.Code = "Own"
	return true
}

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		code      string
		retryable bool
	}{
		{"429", answer(429, "TooManyRequests", http.Header{"Retry-After": {"7"}}), provider.CodeThrottled, true},
		{"throttled in a body", answer(200, "SubscriptionRequestsThrottled", http.Header{"Retry-After": {"7"}}), provider.CodeThrottled, true},
		{"sku", answer(409, "SkuNotAvailable", nil), provider.CodeInsufficientCapacity, true},
		{"zonal allocation", answer(200, "OverconstrainedZonalAllocationRequest", nil), provider.CodeInsufficientCapacity, true},
		{"the provider's own code before a 403", answer(403, "OwnCode", nil), "Own", false},
		{"authorization", answer(403, "AuthorizationFailed", nil), CodeAccessDenied, false},
		{"linked authorization", answer(400, "LinkedAuthorizationFailed", nil), CodeAccessDenied, false},
		{"a bare 403", answer(403, "Forbidden", nil), CodeAccessDenied, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := provider.AsError(Refusal("raising", tc.err, own))
			if !ok || e.Code != tc.code || e.Retryable != tc.retryable {
				t.Fatalf("Refusal = %+v; want %s retryable %v", e, tc.code, tc.retryable)
			}
			if tc.code == provider.CodeThrottled && e.RetryAfter != 7*time.Second {
				t.Errorf("RetryAfter = %v, want 7s", e.RetryAfter)
			}
		})
	}
	for _, err := range []error{answer(500, "InternalServerError", nil), errors.New("connection reset")} {
		if e, ok := provider.AsError(Refusal("raising", err, own)); ok {
			t.Errorf("Refusal(%v) = %+v; want the error as it is", err, e)
		}
	}
}

func TestIsNotFound(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{answer(404, "NotFound", nil), true},
		{answer(404, "SomethingElse", nil), true},
		{answer(400, "ResourceNotFound", nil), true},
		{answer(403, "AuthorizationFailed", nil), false},
		{errors.New("connection reset"), false},
	} {
		if got := IsNotFound(tc.err); got != tc.want {
			t.Errorf("IsNotFound(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
