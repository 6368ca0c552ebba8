package drain

import (
	"fmt"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func budget(version string, allowed int32, disrupted ...string) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{UID: "pdb-1", ResourceVersion: version},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
	for _, p := range disrupted {
		if pdb.Status.DisruptedPods == nil {
			pdb.Status.DisruptedPods = map[string]metav1.Time{}
		}
		pdb.Status.DisruptedPods[p] = metav1.Now()
	}
	return pdb
}

func TestLedgerSpendsWhatTheBudgetAllows(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLedger()
	l.observe(budget("1", 2))
	for i := range 2 {
		if ok, _, _ := l.take("pdb-1", fmt.Sprintf("p%d", i), now); !ok {
			t.Fatalf("take %d: want allowed", i)
		}
	}
	ok, _, changed := l.take("pdb-1", "p", now)
	if ok || changed == nil {
		t.Fatalf("third take: want refused with a channel to wait on")
	}
	// The API server granted p0 and p1: its next status shows both.
	l.observe(budget("2", 1, "p0", "p1"))
	select {
	case <-changed:
	default:
		t.Fatal("a new status must wake the waiters")
	}
	if ok, _, _ := l.take("pdb-1", "p2", now); !ok {
		t.Fatal("after a new status with room: want allowed")
	}
}

// Evictions the API server has not answered yet, or answered before the
// watch brought the status that shows them, still count when an unrelated
// status arrives: a busy API server must not turn every straddling request
// into a 429.
func TestLedgerCountsEvictionsTheStatusDoesNotShowYet(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLedger()
	l.observe(budget("1", 3))
	for _, p := range []string{"a", "b", "c"} {
		if ok, _, _ := l.take("pdb-1", p, now); !ok {
			t.Fatalf("take %s: want allowed", p)
		}
	}
	// The server has processed a alone: allowed 2, a disrupted. b and c are
	// still on their way and use up the 2.
	l.observe(budget("2", 2, "a"))
	if ok, _, _ := l.take("pdb-1", "d", now); ok {
		t.Fatal("b and c are in flight against the 2 the status allows; want d held")
	}
	// b failed for another reason: its disruption is free again.
	l.release("pdb-1", "b")
	if ok, _, _ := l.take("pdb-1", "d", now); !ok {
		t.Fatal("after b's eviction failed: want room for d")
	}
	// c and d land: the status shows them, nothing is left.
	l.observe(budget("3", 0, "a", "c", "d"))
	if ok, _, _ := l.take("pdb-1", "e", now); ok {
		t.Fatal("want e held: the status allows nothing")
	}
	// The pods left and the budget recovered: the new status is all there is.
	l.observe(budget("4", 2))
	if ok, _, _ := l.take("pdb-1", "e", now); !ok {
		t.Fatal("after the budget recovered: want room")
	}
}

// An eviction the status never shows (an unhealthy pod's, which spends no
// disruption) stops counting once the pod is gone, or at worst after askedTTL.
func TestLedgerForgetsEvictionsThatNeverShow(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLedger()
	l.observe(budget("1", 1))
	if ok, _, _ := l.take("pdb-1", "sick", now); !ok {
		t.Fatal("want allowed")
	}
	l.observe(budget("2", 1)) // the unhealthy pod's eviction did not touch the budget
	if ok, _, _ := l.take("pdb-1", "x", now.Add(time.Second)); ok {
		t.Fatal("sick is still counted until it is gone; want x held")
	}
	if ok, _, _ := l.take("pdb-1", "x", now.Add(askedTTL+time.Second)); !ok {
		t.Fatalf("after %s: want sick forgotten and room for x", askedTTL)
	}
}

// A 429 that answers a request made against an older status must not mark a
// newer status exhausted: when the cluster then settles, no further status
// would ever clear it and the drain would stall (found by make bench).
func TestLedgerIgnoresRefusalsAgainstOlderStatus(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLedger()
	l.observe(budget("1", 1))
	ok, v1, _ := l.take("pdb-1", "p", now)
	if !ok {
		t.Fatal("want allowed")
	}
	l.observe(budget("2", 5))
	l.exhausted("pdb-1", "p", v1)
	if ok, _, _ := l.take("pdb-1", "p", now); !ok {
		t.Fatal("a stale refusal exhausted the newer status")
	}
	_, v2, _ := l.take("pdb-1", "p", now)
	l.exhausted("pdb-1", "p", v2)
	if ok, _, _ := l.take("pdb-1", "p", now); ok {
		t.Fatal("a refusal against the current status must exhaust it")
	}
}

func TestLedgerProbesWhenNothingChanges(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLedger()
	l.observe(budget("1", 0))
	if ok, _, _ := l.take("pdb-1", "p", now); !ok {
		t.Fatal("the first ask of a budget never tried should go through as a probe")
	}
	if ok, _, _ := l.take("pdb-1", "p", now.Add(time.Second)); ok {
		t.Fatal("want refused right after a probe")
	}
	if ok, _, _ := l.take("pdb-1", "p", now.Add(probeAfter+time.Second)); !ok {
		t.Fatalf("after %s without a change: want one probe through", probeAfter)
	}
}

// A budget that let an eviction through lately is moving; a probe is not
// room, so a budget stuck at zero never looks as if it moved.
func TestLedgerHadRoomSince(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLedger()
	if l.hadRoomSince("pdb-1", now.Add(-time.Hour)) {
		t.Fatal("a budget never seen has had no room")
	}
	l.observe(budget("1", 1))
	if ok, _, _ := l.take("pdb-1", "a", now); !ok {
		t.Fatal("want allowed")
	}
	l.observe(budget("2", 0, "a")) // a new status keeps the time
	if !l.hadRoomSince("pdb-1", now) || l.hadRoomSince("pdb-1", now.Add(time.Second)) {
		t.Fatal("want room at now, none after")
	}
	later := now.Add(probeAfter + time.Second)
	if ok, _, _ := l.take("pdb-1", "b", later); !ok {
		t.Fatal("want a probe through")
	}
	if l.hadRoomSince("pdb-1", now.Add(time.Second)) {
		t.Fatal("a probe through a budget at zero counted as room")
	}
}
