package drain

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// A drain renews its claim ClaimRenew after its last write, not on a fixed
// beat, so a node drained sooner costs no renewal; a renewal that fails is
// tried again after ClaimRetry, well before the claim lapses.
func TestKeepClaimRenewsAtHalfItsLifeAndRetriesSooner(t *testing.T) {
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	c := ownership.Claim{ID: "d1", Holder: "test", Started: start, Renewed: start}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{contract.AnnotationDrain: string(raw)}}})
	var patches atomic.Int32
	var failing atomic.Bool
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		patches.Add(1)
		if failing.Load() {
			return true, nil, errors.New("the API server is away")
		}
		return false, nil, nil
	})
	nd := &nodeDrain{run: &run{Drainer: &Drainer{client: client, clock: clk}, id: "d1"}, name: "n1", claim: c}
	stop := nd.keepClaim(context.Background())
	defer stop()

	// step moves the clock once the renewer waits on it, then lets it act.
	step := func(d time.Duration, wantPatches int32) {
		t.Helper()
		waitFor(t, "the renewer waiting on the clock", clk.HasWaiters)
		clk.Step(d)
		waitFor(t, "the renewer's patches", func() bool { return patches.Load() == wantPatches && clk.HasWaiters() })
	}
	step(ownership.ClaimRenew-time.Second, 0)
	if patches.Load() != 0 {
		t.Fatalf("renewed after %s; want no renewal before %s", ownership.ClaimRenew-time.Second, ownership.ClaimRenew)
	}
	step(time.Second, 1)
	if got := nd.lastClaim().Renewed; !got.Equal(start.Add(ownership.ClaimRenew)) {
		t.Fatalf("claim renewed at %s, want %s", got, start.Add(ownership.ClaimRenew))
	}
	// The next renewal fails (its test-and-set, then its read-and-patch):
	// the one after comes ClaimRetry later, not ClaimRenew.
	failing.Store(true)
	step(ownership.ClaimRenew, 3)
	failing.Store(false)
	step(ownership.ClaimRetry, 4)
	if got, want := nd.lastClaim().Renewed, start.Add(2*ownership.ClaimRenew+ownership.ClaimRetry); !got.Equal(want) {
		t.Fatalf("claim renewed at %s, want %s", got, want)
	}
	if ownership.ClaimRenew+ownership.ClaimRetry >= ownership.ClaimTTL {
		t.Fatalf("a failed renewal is retried at %s, after the claim lapses (%s)", ownership.ClaimRenew+ownership.ClaimRetry, ownership.ClaimTTL)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
