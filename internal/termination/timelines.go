package termination

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/timeline"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// Timelines keeps the timeline of each drain the queue ran
// (timeline.Store: a ConfigMap per node).
type Timelines interface {
	Save(ctx context.Context, node, reason string, tl timeline.Timeline) error
}

// KeepTimelines has every drain's timeline kept in t once the drain returns
// (done, blocked, or canceled because the node went). Call it before Start.
func (q *Queue) KeepTimelines(t Timelines) { q.timelines = t }

// keepTimeline writes the drain's timeline beside the drain, not in its
// way: the outcome is recorded (and the next step taken) without waiting for
// it, and a failure to keep it is logged and changes nothing else. seq
// numbers the drain: a node's later drain (started once this one returned)
// is never overwritten by this one's write. A drain stopped because the
// controller is stopping is not kept: the next leader drains the node again
// and keeps that.
func (q *Queue) keepTimeline(req Request, seq uint64, steps *timeline.Recorder, report *drain.Report) {
	if q.stopped() {
		return
	}
	title := fmt.Sprintf("sluice controller: %s drain of %s", req.Reason, req.Node)
	if req.Key != "" {
		title += " (" + req.Key + ")"
	}
	tl := timeline.FromDrain(title, steps.Steps(), report)
	// Queued before this drain's goroutine lets the node's next drain
	// start, so the order of the writes is the order of the drains.
	n := q.writes.enter(req.Node)
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		defer q.writes.leave(req.Node)
		// Its own deadline: the drain's context may be over (canceled
		// because the node went).
		ctx, cancel := context.WithTimeout(context.Background(), timelineTimeout)
		defer cancel()
		err := n.write(seq, func() error { return q.timelines.Save(ctx, req.Node, string(req.Reason), tl) })
		if err != nil {
			q.log.Warn("keeping the drain's timeline", "node", req.Node, "err", err)
		}
	}()
}

// stopped reports whether the queue's Start has ended (or is ending).
func (q *Queue) stopped() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ctx != nil && q.ctx.Err() != nil
}

// timelineTimeout bounds the write of one drain's timeline (and so how long
// it can hold up the controller's shutdown).
const timelineTimeout = 10 * time.Second

// timelineWrites orders the timeline writes of each node: a drain's timeline
// is written only if no later drain of the node has had its own written.
type timelineWrites struct {
	mu    sync.Mutex
	nodes map[string]*nodeWrites
}

type nodeWrites struct {
	mu     sync.Mutex // held while writing
	latest uint64     // the latest drain whose timeline was written
	users  int        // writes holding or waiting for mu (under timelineWrites.mu)
}

// enter registers a write for node; leave must follow.
func (w *timelineWrites) enter(node string) *nodeWrites {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nodes == nil {
		w.nodes = map[string]*nodeWrites{}
	}
	n := w.nodes[node]
	if n == nil {
		n = &nodeWrites{}
		w.nodes[node] = n
	}
	n.users++
	return n
}

// leave forgets the node once no write of it is pending.
func (w *timelineWrites) leave(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.nodes[node]; n != nil {
		if n.users--; n.users == 0 {
			delete(w.nodes, node)
		}
	}
}

// write runs save for the drain numbered seq unless a later drain's
// timeline has been written.
func (n *nodeWrites) write(seq uint64, save func() error) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if seq < n.latest {
		return nil
	}
	if err := save(); err != nil {
		return err
	}
	n.latest = seq
	return nil
}
