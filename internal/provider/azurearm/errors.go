package azurearm

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/sluice-dev/sluice/internal/provider"
)

// CodeAccessDenied is the refusal's code when the controller's identity
// lacks a permission.
const CodeAccessDenied = "AccessDenied"

// Refusal turns an Azure error into the provider's terms, keeping Azure's
// own code for people. The answers every Azure Resource Manager API gives
// alike are mapped here: throttling (with its Retry-After), a VM size with
// no capacity, and a missing permission. classify maps the rest, the
// provider's own API's codes: it fills in e and says true, or leaves e
// alone and says false. It is asked after throttling and capacity and
// before the permission checks, so a code of its own wins over a bare 403.
// Errors that are not Azure's answers (a timeout, a refused
// connection), and answers no one maps, stay as they are: retryable, and
// nothing is made or cordoned because of them.
func Refusal(what string, err error, classify func(re *azcore.ResponseError, e *provider.Error) bool) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return fmt.Errorf("%s: %w", what, err)
	}
	code := re.ErrorCode
	e := &provider.Error{Message: fmt.Sprintf("%s: %s (HTTP %d)", what, code, re.StatusCode)}
	switch {
	case re.StatusCode == http.StatusTooManyRequests, code == "TooManyRequests", code == "SubscriptionRequestsThrottled":
		e.Code, e.Retryable = provider.CodeThrottled, true
		if re.RawResponse != nil {
			e.RetryAfter = RetryAfter(re.RawResponse.Header)
		}
	case code == "SkuNotAvailable", code == "AllocationFailed", code == "ZonalAllocationFailed",
		code == "OverconstrainedAllocationRequest", code == "OverconstrainedZonalAllocationRequest":
		e.Code, e.Retryable = provider.CodeInsufficientCapacity, true
	case classify != nil && classify(re, e):
	case code == "AuthorizationFailed", code == "LinkedAuthorizationFailed", re.StatusCode == http.StatusForbidden:
		e.Code = CodeAccessDenied
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
	return e
}

// IsNotFound says whether Azure answered that the resource is not there.
func IsNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && (re.StatusCode == http.StatusNotFound || re.ErrorCode == "NotFound" || re.ErrorCode == "ResourceNotFound")
}
