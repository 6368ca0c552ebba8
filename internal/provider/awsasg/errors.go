package awsasg

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"

	"github.com/sluice-dev/sluice/internal/provider"
)

// CodeThrottled means the API kept refusing for the request rate after the SDK's
// own retries with backoff; trying again later works.
const CodeThrottled = provider.CodeThrottled

// CodeAccessDenied means the controller's role lacks a permission the provider
// needs (docs/providers.md lists them); only a person changing it helps.
const CodeAccessDenied = "AccessDenied"

// refusal turns an EC2 or Auto Scaling error into the provider's terms,
// keeping the cloud's own code and message for people. Errors that are not
// the API's (a timeout, a connection refused) stay as they are: retryable,
// and nothing is made or cordoned because of them.
func refusal(what string, err error) error {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return fmt.Errorf("%s: %w", what, err)
	}
	code, msg := api.ErrorCode(), api.ErrorMessage()
	e := &provider.Error{Message: fmt.Sprintf("%s: %s: %s", what, code, msg)}
	switch {
	case code == "InsufficientInstanceCapacity", code == "InsufficientHostCapacity", code == "InsufficientReservedInstanceCapacity",
		code == "Unsupported" && strings.Contains(msg, "not supported in your requested Availability Zone"):
		e.Code, e.Retryable = provider.CodeInsufficientCapacity, true
	case code == "VcpuLimitExceeded", code == "InstanceLimitExceeded", code == "MaxSpotInstanceCountExceeded",
		code == "LimitExceeded", // Auto Scaling: the account's group or launch-configuration limit
		code == "ValidationError" && strings.Contains(strings.ToLower(msg), "max"): // attaching past the group's MaxSize
		e.Code = provider.CodeQuotaExceeded
	case strings.HasPrefix(code, "InvalidAMIID"), strings.HasPrefix(code, "InvalidLaunchTemplate"),
		code == "InvalidParameterValue", code == "InvalidParameterCombination", code == "InvalidSubnetID.NotFound":
		e.Code = provider.CodeInvalidTemplate
	case code == "UnauthorizedOperation", code == "AccessDenied", code == "AccessDeniedException":
		e.Code = CodeAccessDenied
	case code == "Throttling", code == "ThrottlingException", code == "RequestLimitExceeded":
		e.Code, e.Retryable = CodeThrottled, true
	case code == "ResourceContentionError": // Auto Scaling: another update to the group is pending
		e.Code, e.Retryable = "ResourceContention", true
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
	return e
}
