package termination

import (
	"sync"

	"github.com/sluice-dev/sluice/pkg/drain"
)

// blockers follows the pods the queue's drains cannot move, for the
// sluice_drain_blocked_pods gauge: a pod is blocked from its Blocked step to
// its next step, or to the end of its node's drain.
type blockers struct {
	metrics *Metrics

	mu     sync.Mutex
	byNode map[string]map[string]drain.Reason // node → pod → blocker
	seen   map[drain.Reason]bool              // every blocker ever set, so one that clears reads 0
}

func newBlockers(m *Metrics) *blockers {
	return &blockers{metrics: m, byNode: map[string]map[string]drain.Reason{}, seen: map[drain.Reason]bool{}}
}

// observer is the drain observer of one request: it counts the evictions
// under the request's reason and follows its blocked pods.
func (b *blockers) observer(req Request) drain.Observer {
	reason := string(req.Reason)
	return drain.ObserverFunc(func(p drain.Progress) {
		switch p.Kind {
		case drain.ProgressEvicting:
			b.metrics.Evictions.WithLabelValues(reason).Inc()
			b.set(p.Node, p.Pod, "")
		case drain.ProgressForced:
			b.metrics.Forced.WithLabelValues(reason).Inc()
			b.set(p.Node, p.Pod, "")
		case drain.ProgressBlocked:
			b.set(p.Node, p.Pod, p.Reason)
		case drain.ProgressGone:
			b.set(p.Node, p.Pod, "")
		case drain.ProgressNodeFinished:
			b.forget(p.Node)
		}
	})
}

// set records the pod's blocker ("" for none) and updates the gauge.
func (b *blockers) set(node, pod string, blocker drain.Reason) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pods := b.byNode[node]
	if blocker == "" {
		if _, was := pods[pod]; !was {
			return
		}
		delete(pods, pod)
		if len(pods) == 0 {
			delete(b.byNode, node)
		}
	} else {
		if pods == nil {
			pods = map[string]drain.Reason{}
			b.byNode[node] = pods
		}
		pods[pod] = blocker
		b.seen[blocker] = true
	}
	b.publishLocked()
}

func (b *blockers) forget(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, known := b.byNode[node]; !known {
		return
	}
	delete(b.byNode, node)
	b.publishLocked()
}

func (b *blockers) publishLocked() {
	counts := map[drain.Reason]int{}
	for _, pods := range b.byNode {
		for _, r := range pods {
			counts[r]++
		}
	}
	for r := range b.seen {
		b.metrics.Blocked.WithLabelValues(string(r)).Set(float64(counts[r]))
	}
}
