package azurevmss

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurearm"
)

// Codes of refusals the provider.Code constants do not name.
const (
	// CodeThrottled: Azure Resource Manager kept answering 429 after the
	// SDK's retries, each after the Retry-After Azure asked for.
	CodeThrottled = provider.CodeThrottled
	// CodeAccessDenied: the controller's identity lacks a permission
	// (docs/providers.md has the role definition).
	CodeAccessDenied = "AccessDenied"
	// CodeCapacityChangedElsewhere: the scale set's instances changed in a
	// way the provider's claims do not explain (a cluster autoscaler or a
	// person scaled it), so the provider cannot tell which instance is the
	// machine it asked for.
	CodeCapacityChangedElsewhere = "CapacityChangedElsewhere"
)

// refusal turns an Azure error into the provider's terms, keeping Azure's
// own code for people. Errors that are not Azure's answers (a timeout, a
// refused connection) stay as they are: retryable, and nothing is made or
// cordoned because of them.
func refusal(what string, err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return fmt.Errorf("%s: %w", what, err)
	}
	code := re.ErrorCode
	e := &provider.Error{Message: fmt.Sprintf("%s: %s (HTTP %d)", what, code, re.StatusCode)}
	switch {
	case re.StatusCode == http.StatusTooManyRequests, code == "TooManyRequests", code == "SubscriptionRequestsThrottled":
		e.Code, e.Retryable = CodeThrottled, true
		if re.RawResponse != nil {
			e.RetryAfter = azurearm.RetryAfter(re.RawResponse.Header)
		}
	case code == "SkuNotAvailable", code == "AllocationFailed", code == "ZonalAllocationFailed",
		code == "OverconstrainedAllocationRequest", code == "OverconstrainedZonalAllocationRequest":
		e.Code, e.Retryable = provider.CodeInsufficientCapacity, true
	case code == "QuotaExceeded", code == "OperationNotAllowed" && strings.Contains(strings.ToLower(re.Error()), "quota"):
		e.Code = provider.CodeQuotaExceeded
	case code == "InvalidParameter", code == "ImageNotFound", code == "PlatformImageNotFound", code == "InvalidTemplate":
		e.Code = provider.CodeInvalidTemplate
	case code == "ResourceNotFound" || code == "ParentResourceNotFound" || code == "ResourceGroupNotFound":
		e.Code = provider.CodeInvalidTemplate
		e.Message += ": the scale set or its resource group does not exist in this subscription"
	case code == "AuthorizationFailed", code == "LinkedAuthorizationFailed", re.StatusCode == http.StatusForbidden:
		e.Code = CodeAccessDenied
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
	return e
}

// isNotFound says whether Azure answered that the resource is not there.
func isNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && (re.StatusCode == http.StatusNotFound || re.ErrorCode == "NotFound" || re.ErrorCode == "ResourceNotFound")
}
