package aksagentpool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/sluice-dev/sluice/internal/provider"
)

// answer is an ARM error as the SDK returns it.
func answer(status int, code, message string, header http.Header) error {
	if header == nil {
		header = http.Header{}
	}
	body := fmt.Sprintf(`{"error":{"code":%q,"message":%q}}`, code, message)
	req, _ := http.NewRequest(http.MethodPut, "https://management.azure.com/x", nil)
	return runtime.NewResponseError(&http.Response{StatusCode: status, Header: header, Body: io.NopCloser(bytes.NewBufferString(body)), Request: req})
}

func TestRefusalCodes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		code      string
		retryable bool
	}{
		// github.com/Azure/AKS/issues/1561: AKS busy with another operation.
		{"operation in progress", answer(409, "OperationNotAllowed", "Operation is not allowed: Another operation (Scaling) is in progress, please wait for it to finish before starting a new operation.", nil), CodeOperationInProgress, true},
		// github.com/cilium/cilium/issues/25944: the agent pool form.
		{"agent pool operation in progress", answer(409, "OperationNotAllowed", "Operation is not allowed: Another agentpool operation (nodepool1 - Creating) is in progress, please wait for it to finish before starting a new operation.", nil), CodeOperationInProgress, true},
		// Our own wording (AKS's text for a stopped pool was not found):
		// any OperationNotAllowed that is not "another operation" lasts.
		{"not allowed otherwise", answer(400, "OperationNotAllowed", "Operation is not allowed because the agent pool is stopped.", nil), CodeOperationNotAllowed, false},
		{"stale eTag", answer(412, "PreconditionFailed", "changed", nil), CodeOperationInProgress, true},
		// github.com/1ChristianAlex/motordesk/issues/14 and Azure/AKS#5808.
		{"vCPU quota", answer(400, "ErrCode_InsufficientVCPUQuota", "Insufficient vcpu quota requested 2, remaining 0", nil), provider.CodeQuotaExceeded, false},
		{"regional cores", answer(409, "QuotaExceeded", "Operation could not be completed as it results in exceeding approved Total Regional Cores quota.", nil), provider.CodeQuotaExceeded, false},
		{"Compute's core quota", answer(409, "OperationNotAllowed", "Operation results in exceeding quota limits of Core.", nil), provider.CodeQuotaExceeded, false},
		// jenkins-infra/helpdesk#3584: allocation failures end the operation.
		{"zonal allocation", answer(200, "OverconstrainedZonalAllocationRequest", "Allocation failed.", nil), provider.CodeInsufficientCapacity, true},
		{"allocation", answer(200, "AllocationFailed", "Allocation failed.", nil), provider.CodeInsufficientCapacity, true},
		{"sku", answer(409, "SkuNotAvailable", "The requested size is currently not available.", nil), provider.CodeInsufficientCapacity, true},
		{"throttled", answer(429, "TooManyRequests", "throttled", http.Header{"Retry-After": {"7"}}), provider.CodeThrottled, true},
		{"denied", answer(403, "AuthorizationFailed", "no", nil), CodeAccessDenied, false},
		{"no such pool", answer(404, "NotFound", "no", nil), provider.CodeInvalidTemplate, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := provider.AsError(refusal("raising", tc.err))
			if !ok || e.Code != tc.code || e.Retryable != tc.retryable {
				t.Fatalf("refusal = %+v; want %s retryable %v", e, tc.code, tc.retryable)
			}
			if tc.code == provider.CodeThrottled && e.RetryAfter != 7*time.Second {
				t.Errorf("RetryAfter = %v, want 7s", e.RetryAfter)
			}
		})
	}
	if _, ok := provider.AsError(refusal("raising", errors.New("connection reset"))); ok {
		t.Error("a transport error became a cloud refusal")
	}
}
