package awsasg

import (
	"errors"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/sluice-dev/sluice/internal/provider"
)

// The cloud's error codes, as the EC2 and Auto Scaling API references list
// them, become the provider's; anything else stays the cloud's error.
func TestRefusalMapsTheCloudsCodes(t *testing.T) {
	for _, c := range []struct {
		code, msg string
		want      string // "" : not a refusal, passed on as it is
		retryable bool
	}{
		{"InsufficientInstanceCapacity", "We currently do not have sufficient m5.large capacity", provider.CodeInsufficientCapacity, true},
		{"Unsupported", "Your requested instance type (m7g.large) is not supported in your requested Availability Zone (us-east-1e).", provider.CodeInsufficientCapacity, true},
		{"VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit of 32 allows", provider.CodeQuotaExceeded, false},
		{"ValidationError", "Desired capacity:4 must be between the specified min size:0 and max size:3", provider.CodeQuotaExceeded, false},
		{"InvalidAMIID.NotFound", "The image id '[ami-0abc]' does not exist", provider.CodeInvalidTemplate, false},
		{"InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name web, does not exist.", provider.CodeInvalidTemplate, false},
		{"UnauthorizedOperation", "You are not authorized to perform this operation.", CodeAccessDenied, false},
		{"RequestLimitExceeded", "Request limit exceeded.", CodeThrottled, true},
		{"Throttling", "Rate exceeded", CodeThrottled, true},
		{"InternalError", "An internal error has occurred", "", false},
	} {
		err := refusal("launching web-1", &smithy.GenericAPIError{Code: c.code, Message: c.msg})
		perr, ok := provider.AsError(err)
		switch {
		case c.want == "" && ok:
			t.Errorf("%s became %s; want the cloud's error passed on", c.code, perr.Code)
		case c.want == "" && !errors.As(err, new(smithy.APIError)):
			t.Errorf("%s: %v lost the cloud's error", c.code, err)
		case c.want != "" && (!ok || perr.Code != c.want || perr.Retryable != c.retryable):
			t.Errorf("%s: %v; want %s (retryable %v)", c.code, err, c.want, c.retryable)
		case ok && perr.Message != "launching web-1: "+c.code+": "+c.msg:
			t.Errorf("%s: message %q; want what and the cloud's own words", c.code, perr.Message)
		}
	}
	if _, ok := provider.AsError(refusal("x", errors.New("dial tcp: connection refused"))); ok {
		t.Error("a connection error became a refusal; want it passed on (retryable)")
	}
}
