package maintenance

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// rejectedParts remembers, per node, the unreadable parts of its metadata
// answer already announced, so each is announced once while it lasts, not on
// every reconcile. It lives in memory: a new leader announces the parts that
// still last once more.
type rejectedParts struct {
	mu        sync.Mutex
	announced map[string][]string // node → parts
}

// fresh records node's current parts and returns those not announced before.
func (r *rejectedParts) fresh(node string, parts []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.announced == nil {
		r.announced = map[string][]string{}
	}
	var out []string
	for _, p := range parts {
		if !slices.Contains(r.announced[node], p) {
			out = append(out, p)
		}
	}
	if len(parts) == 0 {
		delete(r.announced, node)
	} else {
		r.announced[node] = slices.Clone(parts)
	}
	return out
}

func (r *rejectedParts) forget(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.announced, node)
}

// announceRejected puts each part of the node's metadata answer that its
// agent could not read on the node as a Warning Event, and counts it, when
// it first appears.
func (c *Controller) announceRejected(node *corev1.Node, report maintenance.Report) {
	for _, part := range c.rejected.fresh(node.Name, report.Rejected) {
		if c.opts.Metrics != nil {
			c.opts.Metrics.Rejected.WithLabelValues(string(report.Source)).Inc()
		}
		c.recorder.Eventf(node, corev1.EventTypeWarning, "MetadataRejected",
			"sluice: the %s metadata service sent a part sluice cannot read; it is ignored, and an event it may be is kept as last read: %s", report.Source, part)
		c.opts.Log.Warn("unreadable part of a metadata answer", "node", node.Name, "source", report.Source, "part", part)
	}
}
