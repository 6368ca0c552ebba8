package gcpmig

import (
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-dev/sluice/internal/provider"
)

// Google's answers map to the provider's codes. The bodies are Google's
// JSON error bodies as the SDK reads them (googleapi.Error).
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       *googleapi.Error
		code      string
		retryable bool
		after     time.Duration
	}{
		{"429", &googleapi.Error{Code: 429, Message: "Quota exceeded for quota metric 'Queries'", Header: http.Header{"Retry-After": {"7"}},
			Errors: []googleapi.ErrorItem{{Reason: "rateLimitExceeded"}}}, provider.CodeThrottled, true, 7 * time.Second},
		{"403 rate limit", &googleapi.Error{Code: 403, Message: "Rate Limit Exceeded", Errors: []googleapi.ErrorItem{{Reason: "userRateLimitExceeded"}}},
			provider.CodeThrottled, true, 0},
		{"403 quota", &googleapi.Error{Code: 403, Message: "Quota 'INSTANCE_TEMPLATES' exceeded.  Limit: 100.0 globally.", Errors: []googleapi.ErrorItem{{Reason: "quotaExceeded"}}},
			provider.CodeQuotaExceeded, false, 0},
		{"503 exhausted", &googleapi.Error{Code: 503, Message: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: The zone 'projects/p/zones/us-east1-c' does not have enough resources"},
			provider.CodeInsufficientCapacity, true, 0},
		{"404", &googleapi.Error{Code: 404, Message: "The resource 'projects/p/zones/z/instanceGroupManagers/g' was not found", Errors: []googleapi.ErrorItem{{Reason: "notFound"}}},
			provider.CodeInvalidTemplate, false, 0},
		{"403 forbidden", &googleapi.Error{Code: 403, Message: "Required 'compute.instanceGroupManagers.update' permission", Errors: []googleapi.ErrorItem{{Reason: "forbidden"}}},
			CodeAccessDenied, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := provider.AsError(refusal("creating", tc.err))
			if !ok || e.Code != tc.code || e.Retryable != tc.retryable || e.RetryAfter != tc.after {
				t.Errorf("refusal(%v) = %+v; want %s, retryable %v, retry after %s", tc.err, e, tc.code, tc.retryable, tc.after)
			}
		})
	}
	if _, ok := provider.AsError(refusal("creating", &googleapi.Error{Code: 500, Message: "Internal Error"})); ok {
		t.Error("a 500 is a provider.Error; want it left as it is, to be tried again")
	}
}

// A managed instance's lastAttempt.errors (or an operation's) map by
// Compute Engine's codes, the most telling first.
func TestAttemptRefusal(t *testing.T) {
	for _, tc := range []struct {
		codes     []string
		code      string
		retryable bool
	}{
		{[]string{"ZONE_RESOURCE_POOL_EXHAUSTED"}, provider.CodeInsufficientCapacity, true},
		{[]string{"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"}, provider.CodeInsufficientCapacity, true},
		{[]string{"QUOTA_EXCEEDED"}, provider.CodeQuotaExceeded, false},
		{[]string{"RESOURCE_NOT_FOUND"}, provider.CodeInvalidTemplate, false},
		{[]string{"RESOURCE_NOT_FOUND", "QUOTA_EXCEEDED"}, provider.CodeQuotaExceeded, false},
		{[]string{"INTERNAL_ERROR"}, CodeCreationFailed, true},
	} {
		var errs []*computepb.Errors
		for _, c := range tc.codes {
			errs = append(errs, &computepb.Errors{Code: proto.String(c), Message: proto.String("...")})
		}
		e, _ := provider.AsError(attemptRefusal("creating", errs))
		if e == nil || e.Code != tc.code || e.Retryable != tc.retryable {
			t.Errorf("attemptRefusal(%v) = %+v; want %s, retryable %v", tc.codes, e, tc.code, tc.retryable)
		}
	}
}

// Only names provider.NewName gives a pool are its machines: not a group's
// own instances (<base>-<4 characters>), not another pool's.
func TestIsMachineOf(t *testing.T) {
	for _, tc := range []struct {
		name, pool string
		want       bool
	}{
		{provider.NewName("web"), "web", true},
		{"web-abcd", "web", false},    // the group "web"'s own instance
		{"web-x-abcde", "web", false}, // pool web-x's machine
		{"web-x-abcde", "web-x", true},
		{"webx-abcde", "web", false},
		{"web-ABCDE", "web", false},
	} {
		if got := isMachineOf(tc.name, tc.pool); got != tc.want {
			t.Errorf("isMachineOf(%q, %q) = %v; want %v", tc.name, tc.pool, got, tc.want)
		}
	}
}

// The template for an image is named after the group's template, without
// an earlier copy's suffix, and fits Compute Engine's 63 characters.
func TestImageTemplateName(t *testing.T) {
	a := imageTemplateName("nodes-tmpl", "projects/p/global/images/a")
	if a2 := imageTemplateName(a, "projects/p/global/images/b"); len(a2) != len(a) || a2[:len("nodes-tmpl")] != "nodes-tmpl" {
		t.Errorf("copy of a copy = %q; want nodes-tmpl and one suffix", a2)
	}
	if imageTemplateName("nodes-tmpl", "projects/p/global/images/a") != a {
		t.Error("the name is not the same for the same image")
	}
	long := imageTemplateName("a-very-long-instance-template-name-that-is-close-to-the-limit-xy", "projects/p/global/images/a")
	if len(long) > 63 {
		t.Errorf("name %q is %d characters; want at most 63", long, len(long))
	}
}
