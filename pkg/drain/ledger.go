package drain

import (
	"sync"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ledger is the budget shared by every node of one Drain call. The API server
// already makes each eviction atomic against its PDB; the ledger keeps the
// drain from asking more often than a budget allows, so pods on several nodes
// do not race each other into a storm of 429s. It holds, per PDB, the
// disruptionsAllowed last watched and how many of them this drain has spent
// since; a fresh status from the watch replaces both.
type ledger struct {
	mu      sync.Mutex
	entries map[types.UID]*ledgerEntry
}

type ledgerEntry struct {
	allowed int32
	version string
	spent   int32
	changed chan struct{} // closed when the entry is replaced by a newer status
}

func newLedger() *ledger { return &ledger{entries: map[types.UID]*ledgerEntry{}} }

// observe records a PDB status seen on the watch.
func (l *ledger) observe(pdb *policyv1.PodDisruptionBudget) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[pdb.UID]
	if ok && e.version == pdb.ResourceVersion {
		return
	}
	l.entries[pdb.UID] = &ledgerEntry{allowed: pdb.Status.DisruptionsAllowed, version: pdb.ResourceVersion, changed: make(chan struct{})}
	if ok {
		close(e.changed)
	}
}

// take spends one disruption of the budget if one is left. Otherwise it
// returns a channel closed when the budget's status next changes.
func (l *ledger) take(pdb types.UID) (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[pdb]
	if !ok {
		e = &ledgerEntry{allowed: 1, changed: make(chan struct{})} // unseen: let the API server decide
		l.entries[pdb] = e
	}
	if e.allowed-e.spent > 0 {
		e.spent++
		return true, nil
	}
	return false, e.changed
}

// refund returns a disruption the drain took but did not use.
func (l *ledger) refund(pdb types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[pdb]; ok && e.spent > 0 {
		e.spent--
	}
}

// exhausted records that the API server refused an eviction: the budget is at
// zero until the watch says otherwise.
func (l *ledger) exhausted(pdb types.UID) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[pdb]
	if !ok {
		e = &ledgerEntry{changed: make(chan struct{})}
		l.entries[pdb] = e
	}
	e.spent = e.allowed
	return e.changed
}
