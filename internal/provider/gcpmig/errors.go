package gcpmig

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"

	"github.com/sluice-dev/sluice/internal/provider"
)

// Codes of refusals the provider.Code constants do not name.
const (
	// CodeAccessDenied: the controller's service account lacks a
	// permission (compute.instanceGroupManagers.update and .get,
	// compute.instanceTemplates.create and .get, compute.instances.get).
	CodeAccessDenied = "AccessDenied"
	// CodeCreationFailed: the group could not create the instance for a
	// reason other than capacity, quota or the template (Compute Engine's
	// code is in the message).
	CodeCreationFailed = "CreationFailed"
	// CodeForeignInstance: a machine named by NameOf is an instance that
	// no group of a gcp-mig pool made (another group, or none), so
	// gcp-mig does not delete it.
	CodeForeignInstance = "ForeignInstance"
	// CodeUnknownPool: a machine to delete belongs to no gcp-mig pool the
	// provider can find (the NodePool is gone, or no longer gcp-mig's), so
	// gcp-mig cannot tell which group holds its instance.
	CodeUnknownPool = "UnknownPool"
)

// refusal turns a Compute Engine answer into the provider's terms, keeping
// Google's own reason for people. Errors that are not Google's answers (a
// timeout, a reset connection) stay as they are.
func refusal(what string, err error) error {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return fmt.Errorf("%s: %w", what, err)
	}
	reasons := make([]string, 0, len(ge.Errors))
	for _, e := range ge.Errors {
		reasons = append(reasons, e.Reason)
	}
	has := func(rs ...string) bool {
		return slices.ContainsFunc(reasons, func(r string) bool { return slices.Contains(rs, r) })
	}
	e := &provider.Error{Message: fmt.Sprintf("%s: %s (HTTP %d %s)", what, ge.Message, ge.Code, strings.Join(reasons, ", "))}
	switch {
	case ge.Code == http.StatusTooManyRequests, has("rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"):
		e.Code, e.Retryable, e.RetryAfter = provider.CodeThrottled, true, retryAfter(ge.Header)
	case strings.Contains(ge.Message, "RESOURCE_POOL_EXHAUSTED"), has("resourcePoolExhausted"):
		e.Code, e.Retryable = provider.CodeInsufficientCapacity, true
	case has("quotaExceeded", "QUOTA_EXCEEDED"), strings.Contains(ge.Message, "QUOTA_EXCEEDED"):
		e.Code = provider.CodeQuotaExceeded
	case ge.Code == http.StatusNotFound:
		e.Code = provider.CodeInvalidTemplate
		e.Message += ": check the pool's provider.gcp project, instance groups and their zones or regions"
	case ge.Code == http.StatusBadRequest:
		e.Code = provider.CodeInvalidTemplate
	case ge.Code == http.StatusForbidden, ge.Code == http.StatusUnauthorized:
		e.Code = CodeAccessDenied
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
	return e
}

// attemptRefusal turns the errors of an operation, or of a managed
// instance's last creation attempt (lastAttempt.errors), into a refusal.
// The codes are Compute Engine's, as cluster-autoscaler's GCE provider
// reads them (autoscaling_gce_client.go).
func attemptRefusal(what string, errs []*computepb.Errors) error {
	var msgs []string
	e := &provider.Error{Code: CodeCreationFailed, Retryable: true}
	rank := 0
	for _, x := range errs {
		msgs = append(msgs, x.GetCode()+": "+x.GetMessage())
		code, retryable, r := classify(x.GetCode())
		if r > rank {
			e.Code, e.Retryable, rank = code, retryable, r
		}
	}
	e.Message = what + ": " + strings.Join(msgs, "; ")
	return e
}

// classify is a Compute Engine error code's refusal, and how telling it is
// among several.
func classify(code string) (string, bool, int) {
	switch {
	case code == "RESOURCE_POOL_EXHAUSTED", strings.HasPrefix(code, "ZONE_RESOURCE_POOL_EXHAUSTED"), code == "REGION_RESOURCE_POOL_EXHAUSTED":
		return provider.CodeInsufficientCapacity, true, 4
	case strings.Contains(code, "QUOTA"):
		return provider.CodeQuotaExceeded, false, 3
	case code == "RATE_LIMIT_EXCEEDED":
		return provider.CodeThrottled, true, 2
	case code == "RESOURCE_NOT_FOUND", code == "NOT_FOUND", code == "INVALID_FIELD_VALUE", code == "INVALID_USAGE", code == "CONDITION_NOT_MET":
		return provider.CodeInvalidTemplate, false, 1
	}
	return CodeCreationFailed, true, 0
}

func isNotFound(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusNotFound
}

func isAlreadyExists(err error) bool {
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusConflict {
		return true
	}
	e, ok := provider.AsError(err)
	return ok && strings.Contains(e.Message, "ALREADY_EXISTS")
}

// retryAfter reads a Retry-After in seconds; zero when there is none
// (Compute Engine rarely sends one).
func retryAfter(h http.Header) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}
