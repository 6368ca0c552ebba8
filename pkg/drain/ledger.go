package drain

import (
	"sync"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ledger is the budget shared by every node of one Drain call. The API server
// already makes each eviction atomic against its PDB; the ledger keeps the
// drain from asking more often than a budget allows, so pods on several nodes
// do not race each other into a storm of 429s. It holds, per PDB, the
// disruptionsAllowed last watched (a version of the status) and how many of
// them this drain has spent since; a fresh status from the watch replaces both.
//
// The ledger only ever saves requests: when it has said no for probeAfter with
// no status change, it lets one eviction through to ask the API server itself,
// so a wrong local view can delay a pod but never strand it.
type ledger struct {
	mu      sync.Mutex
	entries map[types.UID]*ledgerEntry
}

type ledgerEntry struct {
	allowed int32
	version string
	spent   int32
	changed chan struct{} // closed when the entry is replaced by a newer status
	lastTry time.Time     // last time an eviction was let through
}

// probeAfter is how long the ledger may hold pods back without seeing any
// change before it lets one eviction ask the API server.
const probeAfter = 10 * time.Second

func newLedger() *ledger { return &ledger{entries: map[types.UID]*ledgerEntry{}} }

// observe records a PDB status seen on the watch.
func (l *ledger) observe(pdb *policyv1.PodDisruptionBudget) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[pdb.UID]
	if ok && e.version == pdb.ResourceVersion {
		return
	}
	fresh := &ledgerEntry{allowed: pdb.Status.DisruptionsAllowed, version: pdb.ResourceVersion, changed: make(chan struct{})}
	if ok {
		fresh.lastTry = e.lastTry
		close(e.changed)
	}
	l.entries[pdb.UID] = fresh
}

// forget drops a deleted PDB, waking whoever waits on its status.
func (l *ledger) forget(pdb types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[pdb]; ok {
		close(e.changed)
		delete(l.entries, pdb)
	}
}

// take spends one disruption of the budget if one is left, returning the
// status version it was spent against. Otherwise it returns a channel closed
// when the budget's status next changes.
func (l *ledger) take(pdb types.UID, now time.Time) (ok bool, version string, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, seen := l.entries[pdb]
	if !seen {
		e = &ledgerEntry{allowed: 1, changed: make(chan struct{})} // unseen: let the API server decide
		l.entries[pdb] = e
	}
	if e.allowed-e.spent > 0 || now.Sub(e.lastTry) >= probeAfter {
		e.spent++
		e.lastTry = now
		return true, e.version, nil
	}
	return false, e.version, e.changed
}

// refund returns a disruption the drain took but did not use.
func (l *ledger) refund(pdb types.UID, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[pdb]; ok && e.version == version && e.spent > 0 {
		e.spent--
	}
}

// exhausted records that the API server refused an eviction made against
// status version: that status has no disruption left. A newer status seen
// since is left alone; it already says what the server thinks.
func (l *ledger) exhausted(pdb types.UID, version string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[pdb]
	if !ok {
		e = &ledgerEntry{changed: make(chan struct{})}
		l.entries[pdb] = e
	}
	if e.version == version {
		e.spent = e.allowed
	}
	return e.changed
}
