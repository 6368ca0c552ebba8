package nodepool

import (
	"sync"
	"time"
)

// machineRecheck is how often the provider is asked about one replacement
// on its way. A pass runs on every change of the pool's nodes, many a
// second while a large pool turns over; asking the cloud about each of a
// round's machines on each of them would spend its API quota on answers
// that cannot have changed (a machine fails or goes missing rarely, and a
// few seconds late is soon enough to give its node back).
const machineRecheck = launchingRecheck

// machineChecks remembers when each replacement was last asked about.
type machineChecks struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// due says whether the replacement may be asked about now, and if so notes
// that it is.
func (m *machineChecks) due(name string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if at, ok := m.last[name]; ok && now.Sub(at) < machineRecheck && !now.Before(at) {
		return false
	}
	if m.last == nil {
		m.last = map[string]time.Time{}
	}
	if len(m.last) >= 4096 {
		for n, at := range m.last {
			if now.Sub(at) >= machineRecheck {
				delete(m.last, n)
			}
		}
	}
	m.last[name] = now
	return true
}
