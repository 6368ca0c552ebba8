package drain

import (
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func budget(version string, allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{UID: "pdb-1", ResourceVersion: version},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

func TestLedgerSpendsWhatTheBudgetAllows(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLedger()
	l.observe(budget("1", 2))
	for i := range 2 {
		if ok, _, _ := l.take("pdb-1", now); !ok {
			t.Fatalf("take %d: want allowed", i)
		}
	}
	ok, _, changed := l.take("pdb-1", now)
	if ok || changed == nil {
		t.Fatalf("third take: want refused with a channel to wait on")
	}
	l.observe(budget("2", 1))
	select {
	case <-changed:
	default:
		t.Fatal("a new status must wake the waiters")
	}
	if ok, _, _ := l.take("pdb-1", now); !ok {
		t.Fatal("after a new status with room: want allowed")
	}
}

// A 429 that answers a request made against an older status must not mark a
// newer status exhausted: when the cluster then settles, no further status
// would ever clear it and the drain would stall (found by make bench).
func TestLedgerIgnoresRefusalsAgainstOlderStatus(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLedger()
	l.observe(budget("1", 1))
	ok, v1, _ := l.take("pdb-1", now)
	if !ok {
		t.Fatal("want allowed")
	}
	l.observe(budget("2", 5))
	l.exhausted("pdb-1", v1)
	if ok, _, _ := l.take("pdb-1", now); !ok {
		t.Fatal("a stale refusal exhausted the newer status")
	}
	_, v2, _ := l.take("pdb-1", now)
	l.exhausted("pdb-1", v2)
	if ok, _, _ := l.take("pdb-1", now); ok {
		t.Fatal("a refusal against the current status must exhaust it")
	}
}

func TestLedgerProbesWhenNothingChanges(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLedger()
	l.observe(budget("1", 0))
	if ok, _, _ := l.take("pdb-1", now); !ok {
		t.Fatal("the first ask of a budget never tried should go through as a probe")
	}
	if ok, _, _ := l.take("pdb-1", now.Add(time.Second)); ok {
		t.Fatal("want refused right after a probe")
	}
	if ok, _, _ := l.take("pdb-1", now.Add(probeAfter+time.Second)); !ok {
		t.Fatalf("after %s without a change: want one probe through", probeAfter)
	}
}
