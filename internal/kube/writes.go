package kube

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// MayHaveApplied says whether a failed write may still have been applied: a
// timeout, a 5xx or a broken connection lose the answer, not necessarily the
// write. The refusals the API server gives before writing (conflict, not
// found, invalid, forbidden, throttled, ...) say it was not. A controller that
// counts what it wrote (budgets) must count such a write as made until its
// cache shows which.
func MayHaveApplied(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer at all: a broken connection, a client timeout
	}
	switch code := status.Status().Code; {
	case code == 0, code >= 500:
		return true
	default:
		return false // 4xx: refused before anything was written
	}
}
