package kube

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMayHaveApplied(t *testing.T) {
	node := schema.GroupResource{Resource: "nodes"}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"conflict", apierrors.NewConflict(node, "n", errors.New("stale")), false},
		{"not found", apierrors.NewNotFound(node, "n"), false},
		{"forbidden", apierrors.NewForbidden(node, "n", errors.New("no")), false},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), false},
		{"invalid", apierrors.NewBadRequest("bad"), false},
		{"wrapped conflict", fmt.Errorf("marking node n: %w", apierrors.NewConflict(node, "n", errors.New("stale"))), false},
		{"internal error", apierrors.NewInternalError(errors.New("boom")), true},
		{"server timeout", apierrors.NewTimeoutError("later", 1), true},
		{"service unavailable", apierrors.NewServiceUnavailable("down"), true},
		{"client timeout", &url.Error{Op: "Patch", URL: "https://x", Err: context.DeadlineExceeded}, true},
		{"wrapped connection reset", fmt.Errorf("marking node n: %w", errors.New("connection reset by peer")), true},
	}
	for _, c := range cases {
		if got := MayHaveApplied(c.err); got != c.want {
			t.Errorf("%s: MayHaveApplied(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
