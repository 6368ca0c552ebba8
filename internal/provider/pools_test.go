package provider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A listing of the NodePools is given again for PoolListTTL on the given
// clock, not made once per call; a pool added since is seen once the
// listing is older; a failed listing is not kept.
func TestCachedPoolList(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	var pools []v1alpha1.NodePool
	var fail error
	lists := 0
	list := provider.CachedPoolList(func(context.Context) ([]v1alpha1.NodePool, error) {
		lists++
		return append([]v1alpha1.NodePool(nil), pools...), fail
	}, clk, provider.PoolListTTL)

	if got, err := list(ctx); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("first listing = %v, %v; want an empty, non-nil list", got, err)
	}
	pools = append(pools, v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web"}})
	clk.Step(provider.PoolListTTL - time.Second)
	for range 5 {
		if got, _ := list(ctx); len(got) != 0 {
			t.Errorf("%s after the listing: %d pools; want the listing before the pool was made", provider.PoolListTTL-time.Second, len(got))
		}
	}
	clk.Step(2 * time.Second)
	if got, _ := list(ctx); len(got) != 1 {
		t.Errorf("past %s: %d pools; want the new one", provider.PoolListTTL, len(got))
	}
	if lists != 2 {
		t.Errorf("listed %d times for 7 calls over %s; want 2", lists, provider.PoolListTTL+time.Second)
	}

	clk.Step(provider.PoolListTTL)
	fail = errors.New("the API server is away")
	if _, err := list(ctx); err == nil {
		t.Error("a failed listing answered with the old one; want the error")
	}
	fail = nil
	if _, err := list(ctx); err != nil || lists != 4 {
		t.Errorf("after a failure: %v, %d listings; want a fresh listing (4)", err, lists)
	}
}
