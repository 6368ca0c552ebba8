package awsasg

import (
	"errors"
	"fmt"
	"regexp"
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

// CodeInstanceNotRunning means Auto Scaling would not attach an instance that
// is not running yet; the next Create or Get of the machine attaches it.
const CodeInstanceNotRunning = "InstanceNotRunning"

// CodeGroupAtMaxSize means the group is at its MaxSize: attaching another
// instance (or raising its desired capacity) would pass it. Only a person
// raising MaxSize helps.
const CodeGroupAtMaxSize = "GroupAtMaxSize"

// CodeMinSizeReached means the group is at its MinSize, so an instance
// cannot leave it with the desired capacity lowered. Only a person lowering
// MinSize helps.
const CodeMinSizeReached = "MinSizeReached"

// CodeInvalidRequest is any other ValidationError: the request was wrong,
// and asking again the same way will not help.
const CodeInvalidRequest = "InvalidRequest"

// validationReadings read Auto Scaling's ValidationError, whose code says
// only that a request was refused, by its message, first match wins; one
// that matches none is CodeInvalidRequest. Each pattern is the message as
// Auto Scaling sends it (quoted in errors_test.go).
var validationReadings = []struct {
	message   *regexp.Regexp
	code      string
	retryable bool
	advice    string
}{
	// AttachInstances of an instance that is not running yet.
	{regexp.MustCompile(`^Instance i-[0-9a-f]+ is not in correct state`), CodeInstanceNotRunning, true, ""},
	// AttachInstances past MaxSize, then SetDesiredCapacity past it.
	{regexp.MustCompile(`^AutoScalingGroup .+ has min-size=\d+, max-size=\d+, and desired-size=\d+\. To attach \d+ instances?, please update the AutoScalingGroup sizes`),
		CodeGroupAtMaxSize, false, " (raise the Auto Scaling group's MaxSize: sluice attaches each machine it makes to the group)"},
	{regexp.MustCompile(`^New SetDesiredCapacity value \d+ is above max value \d+`),
		CodeGroupAtMaxSize, false, " (raise the Auto Scaling group's MaxSize)"},
	// TerminateInstanceInAutoScalingGroup, ShouldDecrementDesiredCapacity, at MinSize.
	{regexp.MustCompile(`^Currently, desiredSize equals minSize \(\d+\)\. Terminating instance without replacement will violate group's min size constraint`),
		CodeMinSizeReached, false, " (lower the Auto Scaling group's MinSize: sluice removes a machine from its group with the desired capacity lowered, so that the group does not replace it)"},
}

// codeInstanceNotFound is EC2's code for an instance ID it does not know
// (API reference, error codes).
const codeInstanceNotFound = "InvalidInstanceID.NotFound"

// apiError is the code and message of an EC2 or Auto Scaling answer within
// err; false for errors that are not the API's.
func apiError(err error) (code, message string, ok bool) {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return "", "", false
	}
	return api.ErrorCode(), api.ErrorMessage(), true
}

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
	if code == "ValidationError" {
		for _, r := range validationReadings {
			if r.message.MatchString(msg) {
				e.Code, e.Retryable = r.code, r.retryable
				e.Message += r.advice
				return e
			}
		}
		e.Code = CodeInvalidRequest
		return e
	}
	switch {
	case code == "InsufficientInstanceCapacity", code == "InsufficientHostCapacity", code == "InsufficientReservedInstanceCapacity",
		code == "Unsupported" && strings.Contains(msg, "not supported in your requested Availability Zone"):
		e.Code, e.Retryable = provider.CodeInsufficientCapacity, true
	case code == "VcpuLimitExceeded", code == "InstanceLimitExceeded", code == "MaxSpotInstanceCountExceeded",
		code == "LimitExceeded": // Auto Scaling: the account's group or launch-configuration limit
		e.Code = provider.CodeQuotaExceeded
	case strings.HasPrefix(code, "InvalidAMIID"), strings.HasPrefix(code, "InvalidLaunchTemplate"),
		code == "InvalidParameterValue", code == "InvalidParameterCombination", code == "InvalidSubnetID.NotFound":
		e.Code = provider.CodeInvalidTemplate
	case code == "UnauthorizedOperation", code == "AccessDenied", code == "AccessDeniedException":
		e.Code = CodeAccessDenied
	case code == "Throttling", code == "ThrottlingException", code == "RequestLimitExceeded":
		e.Code, e.Retryable = CodeThrottled, true
	case code == "ResourceContention": // Auto Scaling: another update to the group is pending
		e.Code, e.Retryable = "ResourceContention", true
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
	return e
}
