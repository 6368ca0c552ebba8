package nodepool

import (
	"context"
	"sync"
	"time"
)

// maxBatch is the most writes one pool's pass has in flight at once. A drift
// of a 1,000-node pool at a 10 % budget chooses 100 nodes a round and deletes
// 100 replaced ones: one after another, at 0.2–0.4 s a write on a busy API
// server, that outlived the reconcile's timeout.
const maxBatch = 16

// passWindowKey keys the time by which a pass starts its last write.
type passWindowKey struct{}

// withPassWindow gives the pass half of what is left of ctx's deadline (the
// reconcile timeout) to start writes: the other half is for the writes in
// flight and the pool's status. A pass that runs out of it leaves the rest
// to the next pass, queued at once, rather than be cut off mid-write (whose
// outcome is then unknown) and have its status write fail, which the
// workqueue answers with an exponential backoff.
func withPassWindow(ctx context.Context) context.Context {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, passWindowKey{}, deadline.Add(-time.Until(deadline)/2))
}

// windowOpen says whether the pass may still start a write.
func windowOpen(ctx context.Context) bool {
	until, ok := ctx.Value(passWindowKey{}).(time.Time)
	return !ok || time.Until(until) > 0
}

// passResumes is how soon a pass that ran out of its window runs again: at
// once, with no backoff (it failed nothing).
const passResumes = 100 * time.Millisecond

// outcome is what became of one of a batch's writes.
type outcome struct {
	// started is false for a write the batch never began: an earlier one
	// stopped it, or the pass's window closed.
	started bool
	err     error
}

// slowStart carries out do(0..n-1) in batches of 1, 2, 4, ... up to
// most at once, each batch only after the last has ended, as the
// ReplicaSet controller creates pods: a provider that refuses (quota, a bad
// template) is asked once, not a hundred times. stop says, from a write's
// error, whether no further batch should start; a batch in flight finishes.
// It returns each index's outcome.
func slowStart(ctx context.Context, n, most int, do func(ctx context.Context, i int) error, stop func(error) bool) []outcome {
	out := make([]outcome, n)
	for next, size := 0, 1; next < n; size = min(2*size, most) {
		if !windowOpen(ctx) || ctx.Err() != nil {
			break
		}
		end := min(next+size, n)
		var wg sync.WaitGroup
		for i := next; i < end; i++ {
			out[i].started = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i].err = do(ctx, i)
			}()
		}
		wg.Wait()
		stopped := false
		for i := next; i < end; i++ {
			stopped = stopped || stop(out[i].err)
		}
		next = end
		if stopped {
			break
		}
	}
	return out
}

// inParallel carries out do(0..n-1), up to most at once, starting none
// once the pass's window has closed. For writes that stand alone (a replaced
// node's delete, a replacement's check), where one's failure says nothing of
// the next.
func inParallel(ctx context.Context, n, most int, do func(ctx context.Context, i int) error) []outcome {
	out := make([]outcome, n)
	slots := make(chan struct{}, most)
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		if !windowOpen(ctx) || ctx.Err() != nil {
			<-slots
			break
		}
		out[i].started = true
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			out[i].err = do(ctx, i)
		}()
	}
	wg.Wait()
	return out
}

// batch is the most writes a pass has in flight: one at a time under
// --dry-run, whose plan lists what it would do in the order it chose.
func (c *Controller) batch() int {
	if c.opts.DryRun {
		return 1
	}
	return maxBatch
}
