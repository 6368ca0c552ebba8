package nodepool

import (
	"sync"
	"time"
)

// machineRecheck is how often the provider is asked about one replacement
// on its way, for one node. A pass runs on every change of the pool's
// nodes, many a second while a large pool turns over; asking the cloud
// about each of a round's machines on each of them would spend its API
// quota on answers that cannot have changed (a machine fails or goes
// missing rarely, and a few seconds late is soon enough to give its node
// back).
const machineRecheck = launchingRecheck

// machineChecks remembers when each node's replacement was last asked
// about. The key is the node and the replacement: one consolidation names
// one replacement on several nodes, and each of them must see the answer
// (a failed machine gives every one of them back in the same pass).
type machineChecks struct {
	mu     sync.Mutex
	last   map[string]time.Time
	pruned time.Time
}

// due says whether node's replacement may be asked about now, and if so
// notes that it is.
func (m *machineChecks) due(node, replacement string, now time.Time) bool {
	key := node + "/" + replacement
	m.mu.Lock()
	defer m.mu.Unlock()
	if at, ok := m.last[key]; ok && now.Sub(at) < machineRecheck && !now.Before(at) {
		return false
	}
	if m.last == nil {
		m.last = map[string]time.Time{}
	}
	if now.Sub(m.pruned) >= machineRecheck {
		// Entries older than a recheck answer nothing: drop them, at most
		// once a recheck.
		for k, at := range m.last {
			if now.Sub(at) >= machineRecheck {
				delete(m.last, k)
			}
		}
		m.pruned = now
	}
	m.last[key] = now
	return true
}
