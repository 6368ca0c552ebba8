// Package termination takes nodes out of service. Every reason sluice has to
// empty a node (a maintenance event today; expiry, drift, consolidation and
// upgrades next) goes through one Queue, which owns the cordon and the drain
// under one cross-node budget: a cap on the nodes disrupting at once,
// cluster-wide and per pool, and one drain.Shared, so every drain sees the
// same pods and budgets, spends from the same PodDisruptionBudget ledger and
// waits on the same limit of evictions in flight.
//
// docs/design/termination.md has the state machine and who writes what.
package termination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/timeline"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// Reason is why a node is taken out of service.
type Reason string

// Reasons. Maintenance is involuntary (the cloud takes the node); the rest,
// coming with node pools, are voluntary.
const (
	ReasonMaintenance Reason = "Maintenance"
)

// Request asks the queue to empty a node.
type Request struct {
	Node string
	// Pool is the node's NodePool; "" for a node no pool selects.
	Pool   string
	Reason Reason
	// Key tells this request from another for the same node (the event ID):
	// submitting the same node and key again is the same work.
	Key string
	// Involuntary requests are the cloud's: they start at once, past the
	// caps, because the node goes whether or not sluice drains it; they still
	// count against the caps, so voluntary work waits while the cloud is
	// taking nodes away.
	Involuntary bool
	// Options are the drain's; Shared, Recorder and Holder are the queue's.
	Options drain.Options
	// Done receives the drain's outcome once it ends by itself (not when it
	// is canceled); it runs on the drain's goroutine while the queue still
	// holds the request, so the outcome is recorded before anyone may start
	// the node's next drain.
	Done func(*drain.Report, error)
	// Released, when set, is called once the queue no longer holds the
	// request after Done: the moment to look at the node again.
	Released func()
	// Observer, when set, also receives the drain's progress (the Cluster
	// API hook reports a drain's blockers on the Machine from it).
	Observer drain.Observer
}

// Limits cap the nodes disrupting at once; zero means no cap.
type Limits struct {
	MaxNodes        int
	MaxNodesPerPool int
}

// Validate refuses negative caps.
func (l Limits) Validate() error {
	if l.MaxNodes < 0 || l.MaxNodesPerPool < 0 {
		return fmt.Errorf("max disrupting nodes %d and per pool %d: must not be negative (0 means no cap)", l.MaxNodes, l.MaxNodesPerPool)
	}
	return nil
}

// Admission is what Submit did with a request.
type Admission string

// Admissions.
const (
	Started Admission = "Started"
	// Queued: over a cap; it starts when a disrupting node finishes.
	Queued Admission = "Queued"
	// Running: the same request is already running (or queued).
	Running Admission = "Running"
)

// ErrNotStarted is returned by Submit before Start has run.
var ErrNotStarted = errors.New("the termination queue has not started yet")

// Queue runs the drains of every node being taken out of service.
type Queue struct {
	client   kubernetes.Interface
	clock    clock.WithTicker
	shared   *drain.Shared
	limits   Limits
	identity string
	recorder record.EventRecorder
	log      *slog.Logger
	metrics  *Metrics
	blockers *blockers // nil without metrics
	// drain empties one node; the drain engine, or a stand-in in tests.
	drain func(ctx context.Context, req Request) (*drain.Report, error)
	// awaitingUnwind, when set, is told that a drain is about to wait for
	// the one it replaces to unwind: a test sees the wait begin, so it can
	// assert that the drain does not start before, without sleeping.
	awaitingUnwind func(req Request)
	// timelines, when set, keeps each drain's timeline once it returns;
	// writes orders the writes of one node's timelines.
	timelines Timelines
	writes    timelineWrites
	drains    atomic.Uint64 // drains started, numbering them for writes

	mu      sync.Mutex
	ctx     context.Context // Start's; nil until then
	started chan struct{}
	active  map[string]*job // by node: running or queued
	waiting []*job          // queued, oldest first
	// stopping holds, per node, the last canceled drain until it has
	// unwound (released its claim on the node): its successor waits for it.
	stopping map[string]*job
	// outside are nodes drained by someone else (a person's `sluice drain`,
	// another program using pkg/drain), seen through their claim on the
	// node: they count against the caps until the claim lapses.
	outside map[string]outsideDrain
	wg      sync.WaitGroup
}

type outsideDrain struct {
	pool, holder string
	until        time.Time
}

type job struct {
	req    Request
	cancel context.CancelFunc // nil while queued
	done   chan struct{}      // closed when its drain has returned
}

// New returns a queue; Start runs it (it is a controller-runtime Runnable that
// needs the leader's Lease).
func New(client kubernetes.Interface, clk clock.WithTicker, shared *drain.Shared, limits Limits, identity string,
	recorder record.EventRecorder, metrics *Metrics, log *slog.Logger) (*Queue, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	q := &Queue{client: client, clock: clk, shared: shared, limits: limits, identity: identity, recorder: recorder,
		log: log, metrics: metrics, started: make(chan struct{}), active: map[string]*job{}, stopping: map[string]*job{}, outside: map[string]outsideDrain{}}
	q.drain = q.drainNode
	if metrics != nil {
		q.blockers = newBlockers(metrics)
		metrics.overdue = q.overdue
	}
	return q, nil
}

// overdue counts the drains still running past their deadline.
func (q *Queue) overdue() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	now, n := q.clock.Now(), 0
	for _, j := range q.active {
		if dl := j.req.Options.Deadline; j.cancel != nil && !dl.IsZero() && now.After(dl) {
			n++
		}
	}
	return float64(n)
}

// drainNode runs the drain engine on the request's node with the queue's
// shared view, ledger and eviction limit.
func (q *Queue) drainNode(ctx context.Context, req Request) (*drain.Report, error) {
	opts := req.Options
	opts.Shared = q.shared
	opts.Holder = q.identity
	hooks := drain.Hooks{Recorder: q.recorder}
	var observers []drain.Observer
	if q.blockers != nil {
		observers = append(observers, q.blockers.observer(req))
	}
	if req.Observer != nil {
		observers = append(observers, req.Observer)
	}
	var steps *timeline.Recorder
	if q.timelines != nil {
		steps = &timeline.Recorder{}
		observers = append(observers, steps)
	}
	hooks.Observer = fanOut(observers)
	d, err := drain.New(q.client, q.clock, opts, hooks)
	if err != nil {
		return nil, fmt.Errorf("configuring the drain of %s: %w", req.Node, err)
	}
	seq := q.drains.Add(1)
	report, err := d.Drain(ctx, []string{req.Node})
	if steps != nil && report != nil {
		q.keepTimeline(req, seq, steps, report)
	}
	return report, err
}

// fanOut hands each step to every observer; nil for none.
func fanOut(observers []drain.Observer) drain.Observer {
	switch len(observers) {
	case 0:
		return nil
	case 1:
		return observers[0]
	}
	return drain.ObserverFunc(func(p drain.Progress) {
		for _, o := range observers {
			o.Observe(p)
		}
	})
}

// Start lets requests run until ctx ends, then stops every drain (each
// releases its claim on its node, so a successor takes over at once) and
// returns when they have.
func (q *Queue) Start(ctx context.Context) error {
	q.mu.Lock()
	q.ctx = ctx
	close(q.started)
	q.mu.Unlock()
	<-ctx.Done()
	q.mu.Lock()
	for _, j := range q.active {
		if j.cancel != nil {
			j.cancel()
		}
	}
	q.active, q.waiting = map[string]*job{}, nil
	q.mu.Unlock()
	q.wg.Wait()
	return nil
}

// NeedLeaderElection says the queue runs only on the leader.
func (q *Queue) NeedLeaderElection() bool { return true }

// Submit starts the request, queues it behind the caps, or reports that it
// runs already. A request for a node that runs another request replaces it.
func (q *Queue) Submit(req Request) (Admission, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ctx == nil {
		return "", ErrNotStarted
	}
	if q.ctx.Err() != nil {
		return "", q.ctx.Err()
	}
	if cur := q.active[req.Node]; cur != nil {
		if cur.req.Key == req.Key {
			return Running, nil
		}
		q.stopLocked(req.Node)
	}
	j := &job{req: req, done: make(chan struct{})}
	q.active[req.Node] = j
	if !req.Involuntary && !q.roomLocked(req.Pool) {
		q.waiting = append(q.waiting, j)
		q.observeLocked()
		return Queued, nil
	}
	q.startLocked(j)
	return Started, nil
}

// Cancel stops the node's drain (or forgets its queued request), if any.
func (q *Queue) Cancel(node string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopLocked(node)
	q.promoteLocked()
}

// Holds reports whether the queue runs or queues the node's request key.
func (q *Queue) Holds(node, key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	j := q.active[node]
	return j != nil && j.req.Key == key
}

// Running reports whether the queue runs or queues any request for node.
func (q *Queue) Running(node string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active[node] != nil
}

// Disrupting counts the nodes draining now, in all and per pool, the drains
// of others (Outside) included.
func (q *Queue) Disrupting() (total int, byPool map[string]int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.countLocked()
}

func (q *Queue) countLocked() (int, map[string]int) {
	total, byPool := 0, map[string]int{}
	for _, j := range q.active {
		if j.cancel != nil {
			total++
			byPool[j.req.Pool]++
		}
	}
	now := q.clock.Now()
	for node, o := range q.outside {
		if _, ours := q.active[node]; !ours && now.Before(o.until) {
			total++
			byPool[o.pool]++
		}
	}
	return total, byPool
}

// Outside records that someone else drains node (of pool) until the given
// time, when their claim on it lapses unless renewed: a person's `sluice
// drain` counts against the same caps as the queue's own drains, so the
// controller's voluntary work waits for it. Recording it again moves until.
func (q *Queue) Outside(node, pool, holder string, until time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, known := q.outside[node]; !known {
		q.log.Info("a drain by someone else counts against the caps", "node", node, "pool", pool, "holder", holder)
	}
	q.outside[node] = outsideDrain{pool: pool, holder: holder, until: until}
	q.observeLocked()
}

// OutsideEnded forgets a drain by someone else (its claim was released or
// lapsed, or the node is gone); queued work may start.
func (q *Queue) OutsideEnded(node string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, known := q.outside[node]; !known {
		return
	}
	delete(q.outside, node)
	q.promoteLocked()
}

func (q *Queue) roomLocked(pool string) bool {
	total, byPool := q.countLocked()
	if q.limits.MaxNodes > 0 && total >= q.limits.MaxNodes {
		return false
	}
	return q.limits.MaxNodesPerPool == 0 || byPool[pool] < q.limits.MaxNodesPerPool
}

func (q *Queue) startLocked(j *job) {
	ctx, cancel := context.WithCancel(q.ctx)
	j.cancel = cancel
	prev := q.stopping[j.req.Node]
	q.observeLocked()
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		defer cancel()
		defer close(j.done)
		if prev != nil {
			// The drain this one replaces still holds the node's claim until
			// it has unwound; starting now would be refused as a second drain.
			if q.awaitingUnwind != nil {
				q.awaitingUnwind(j.req)
			}
			select {
			case <-prev.done:
			case <-ctx.Done():
				return
			}
		}
		report, err := q.drain(ctx, j.req)
		if ctx.Err() != nil {
			return // canceled: whoever canceled it owns what happens next
		}
		q.log.Info("drain ended", "node", j.req.Node, "reason", j.req.Reason, "key", j.req.Key, "err", err)
		if j.req.Done != nil {
			j.req.Done(report, err)
		}
		q.mu.Lock()
		if q.active[j.req.Node] == j {
			delete(q.active, j.req.Node)
		}
		q.promoteLocked()
		q.mu.Unlock()
		if j.req.Released != nil {
			j.req.Released()
		}
	}()
}

// stopLocked cancels or forgets the node's job.
func (q *Queue) stopLocked(node string) {
	j := q.active[node]
	if j == nil {
		return
	}
	delete(q.active, node)
	if j.cancel != nil {
		j.cancel()
		q.stopping[node] = j
		go func() {
			<-j.done
			q.mu.Lock()
			defer q.mu.Unlock()
			if q.stopping[node] == j {
				delete(q.stopping, node)
			}
		}()
	}
	for i, w := range q.waiting {
		if w == j {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			break
		}
	}
	q.observeLocked()
}

// promoteLocked starts queued requests, oldest first, while the caps allow.
func (q *Queue) promoteLocked() {
	if q.ctx == nil || q.ctx.Err() != nil {
		return
	}
	rest := q.waiting[:0]
	for _, j := range q.waiting {
		if q.roomLocked(j.req.Pool) {
			q.startLocked(j)
			continue
		}
		rest = append(rest, j)
	}
	q.waiting = rest
	q.observeLocked()
}

func (q *Queue) observeLocked() {
	if q.metrics == nil {
		return
	}
	total, byPool := q.countLocked()
	q.metrics.Disrupting.Set(float64(total))
	q.metrics.Queued.Set(float64(len(q.waiting)))
	q.metrics.PoolDisrupting.Reset()
	for pool, n := range byPool {
		q.metrics.PoolDisrupting.WithLabelValues(pool).Set(float64(n))
	}
}
