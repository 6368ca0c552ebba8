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
// disruptionsAllowed last watched (a version of the status) and the pods this
// drain has asked to evict that the status does not show yet: an eviction the
// API server granted appears in status.disruptedPods of the next status it
// writes, and until the watch brings that status the ledger counts it itself.
// (Counting spent evictions per status version instead, as an earlier version
// did, forgets the evictions still in flight whenever any new status arrives,
// and a busy API server, slow to answer, turned that into a 429 per straddling
// request.)
//
// The ledger only ever saves requests: when it has said no for probeAfter with
// no status change, it lets one eviction through to ask the API server itself,
// so a wrong local view can delay a pod but never strand it.
type ledger struct {
	mu      sync.Mutex
	entries map[types.UID]*ledgerEntry
}

type ledgerEntry struct {
	allowed   int32
	version   string
	disrupted map[string]bool      // status.disruptedPods: evictions the status counts
	asked     map[string]time.Time // pods this drain asked to evict, not yet in disrupted
	refused   bool                 // the API server refused an eviction against this version
	changed   chan struct{}        // closed when the entry is replaced by a newer status
	lastTry   time.Time            // last time an eviction was let through
	lastRoom  time.Time            // last time one was let through because the budget had room (not a probe)
}

// probeAfter is how long the ledger may hold pods back without seeing any
// change before it lets one eviction ask the API server; askedTTL is how
// long an eviction the status never showed is still counted (the disruption
// controller drops a disrupted pod that was not deleted after two minutes).
const (
	probeAfter = 10 * time.Second
	askedTTL   = 2 * time.Minute
)

func newLedger() *ledger { return &ledger{entries: map[types.UID]*ledgerEntry{}} }

func newEntry() *ledgerEntry {
	return &ledgerEntry{disrupted: map[string]bool{}, asked: map[string]time.Time{}, changed: make(chan struct{})}
}

// observe records a PDB status seen on the watch.
func (l *ledger) observe(pdb *policyv1.PodDisruptionBudget) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[pdb.UID]
	if ok && e.version == pdb.ResourceVersion {
		return
	}
	fresh := newEntry()
	fresh.allowed, fresh.version = pdb.Status.DisruptionsAllowed, pdb.ResourceVersion
	for pod := range pdb.Status.DisruptedPods {
		fresh.disrupted[pod] = true
	}
	if ok {
		fresh.lastTry, fresh.lastRoom = e.lastTry, e.lastRoom
		for pod, at := range e.asked {
			// Shown in this status (or shown before and since dropped, the
			// pod gone): the status counts it now.
			if !fresh.disrupted[pod] && !e.disrupted[pod] {
				fresh.asked[pod] = at
			}
		}
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

// room is what the entry's status allows less the evictions it does not
// show yet.
func (e *ledgerEntry) room(now time.Time) int32 {
	if e.refused {
		return 0
	}
	pending := int32(0)
	for pod, at := range e.asked {
		if now.Sub(at) > askedTTL {
			delete(e.asked, pod)
			continue
		}
		pending++
	}
	return e.allowed - pending
}

// take spends one disruption of the budget on pod if one is left, returning
// the status version it was spent against. Otherwise it returns a channel
// closed when the budget's status next changes.
func (l *ledger) take(pdb types.UID, pod string, now time.Time) (ok bool, version string, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(pdb)
	room := e.room(now) > 0
	if room || now.Sub(e.lastTry) >= probeAfter {
		e.asked[pod] = now
		e.lastTry = now
		if room {
			e.lastRoom = now
		}
		return true, e.version, nil
	}
	return false, e.version, e.changed
}

// changes returns a channel closed when the PDB's status next changes, or
// the PDB is deleted.
func (l *ledger) changes(pdb types.UID) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entry(pdb).changed
}

// entry is the PDB's entry, made for one not seen yet; l.mu is held.
func (l *ledger) entry(pdb types.UID) *ledgerEntry {
	e, seen := l.entries[pdb]
	if !seen {
		e = newEntry()
		e.allowed = 1 // unseen: let the API server decide
		l.entries[pdb] = e
	}
	return e
}

// hadRoomSince reports whether the budget had room for one of the drain's
// evictions at or after since: a budget that does is moving, and a pod it
// holds is waiting its turn, not stuck.
func (l *ledger) hadRoomSince(pdb types.UID, since time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[pdb]
	return ok && !e.lastRoom.IsZero() && !e.lastRoom.Before(since)
}

// release stops counting pod's eviction: it failed for another reason than
// the budget, or the pod is gone (a budget's status no longer counts a pod
// that is gone as healthy, and an unhealthy pod's eviction never spent
// anything).
func (l *ledger) release(pdb types.UID, pod string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[pdb]; ok {
		delete(e.asked, pod)
	}
}

// exhausted records that the API server refused pod's eviction, made against
// status version: that status has no disruption left. A newer status seen
// since is left alone; it already says what the server thinks.
func (l *ledger) exhausted(pdb types.UID, pod, version string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[pdb]
	if !ok {
		e = newEntry()
		l.entries[pdb] = e
	}
	delete(e.asked, pod)
	if e.version == version {
		e.refused = true
	}
	return e.changed
}
