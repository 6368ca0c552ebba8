package awsasg

import (
	"errors"
	"strings"
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
		// AttachInstances past the group's MaxSize: the API reference says only
		// that "the operation fails"; this is the message Auto Scaling sends
		// (quoted in LeanerCloud/AutoSpotting issues 407 and 428). moto 5.2.1
		// answers ResourceContention instead ("You already have a pending
		// update to an Auto Scaling resource"), which is Auto Scaling's code
		// for a pending update, a retryable refusal, not this one.
		{"ValidationError", "AutoScalingGroup web-asg has min-size=1, max-size=3, and desired-size=3. To attach 1 instance, please update the AutoScalingGroup sizes appropriately.", CodeGroupAtMaxSize, false},
		{"ValidationError", "New SetDesiredCapacity value 4 is above max value 3 for the AutoScalingGroup.", CodeGroupAtMaxSize, false},
		// TerminateInstanceInAutoScalingGroup with ShouldDecrementDesiredCapacity
		// at MinSize (quoted in hashicorp/nomad-autoscaler PR 1290 and
		// buildkite/elastic-ci-stack-for-aws issue 1261; moto 5.2.1 does not
		// check MinSize).
		{"ValidationError", "Currently, desiredSize equals minSize (2). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size.", CodeMinSizeReached, false},
		// AttachInstances of an instance that is not running (the user guide
		// requires the running state).
		{"ValidationError", "Instance i-0abc123def4567890 is not in correct state.", CodeInstanceNotRunning, true},
		// Other ValidationErrors, the word "max" in them or not, are requests
		// that were wrong: UpdateAutoScalingGroup's range check, a DetachInstances
		// of more than 20.
		{"ValidationError", "Desired capacity:4 must be between the specified min size:0 and max size:3", CodeInvalidRequest, false},
		{"ValidationError", "List exceeds the maximum number of instances to detach. Please retry your request with fewer instances.", CodeInvalidRequest, false},
		{"ResourceContention", "You already have a pending update to an Amazon EC2 Auto Scaling resource (for example, an Auto Scaling group, instance, or load balancer).", "ResourceContention", true},
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
		case ok && !strings.HasPrefix(perr.Message, "launching web-1: "+c.code+": "+c.msg):
			t.Errorf("%s: message %q; want what and the cloud's own words", c.code, perr.Message)
		}
	}
	for code, advice := range map[string]string{CodeGroupAtMaxSize: "raise the Auto Scaling group's MaxSize", CodeMinSizeReached: "lower the Auto Scaling group's MinSize"} {
		for _, r := range validationReadings {
			if r.code == code && !strings.Contains(r.advice, advice) {
				t.Errorf("%s says %q; want it to say %q", code, r.advice, advice)
			}
		}
	}
	if _, ok := provider.AsError(refusal("x", errors.New("dial tcp: connection refused"))); ok {
		t.Error("a connection error became a refusal; want it passed on (retryable)")
	}
}
