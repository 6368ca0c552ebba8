package nodepool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// batches records the writes in flight together.
type batches struct {
	mu       sync.Mutex
	inFlight int
	most     int
	order    []int
}

func (b *batches) do(hold time.Duration, fail map[int]error) func(context.Context, int) error {
	return func(_ context.Context, i int) error {
		b.mu.Lock()
		b.inFlight++
		b.most = max(b.most, b.inFlight)
		b.order = append(b.order, i)
		b.mu.Unlock()
		time.Sleep(hold)
		b.mu.Lock()
		b.inFlight--
		b.mu.Unlock()
		return fail[i]
	}
}

func TestSlowStartDoublesUpToItsBatch(t *testing.T) {
	var b batches
	out := slowStart(context.Background(), 40, maxBatch, b.do(5*time.Millisecond, nil), func(err error) bool { return err != nil })
	for i, o := range out {
		if !o.started || o.err != nil {
			t.Fatalf("write %d: %+v, want started and done", i, o)
		}
	}
	// 1, 2, 4, 8, 16, then the 9 left.
	if b.most != maxBatch {
		t.Errorf("at most %d in flight, want %d", b.most, maxBatch)
	}
	if b.order[0] != 0 {
		t.Errorf("first write %d, want 0 alone", b.order[0])
	}
}

// TestSlowStartStopsAfterARefusal: a provider that refuses is asked once
// more at most in the batch in flight, not for every chosen node.
func TestSlowStartStopsAfterARefusal(t *testing.T) {
	refused := errors.New("quota")
	var b batches
	out := slowStart(context.Background(), 40, maxBatch, b.do(0, map[int]error{0: refused}), func(err error) bool { return errors.Is(err, refused) })
	if !out[0].started || !errors.Is(out[0].err, refused) {
		t.Fatalf("first write %+v, want started and refused", out[0])
	}
	for i, o := range out[1:] {
		if o.started {
			t.Fatalf("write %d started after the first was refused", i+1)
		}
	}
	// A refusal in the second batch ends the run after that batch.
	b = batches{}
	out = slowStart(context.Background(), 40, maxBatch, b.do(0, map[int]error{2: refused}), func(err error) bool { return errors.Is(err, refused) })
	started := 0
	for _, o := range out {
		if o.started {
			started++
		}
	}
	if started != 3 {
		t.Errorf("%d writes started, want 3 (the batch of 1, then the batch of 2 that was refused)", started)
	}
}

func TestInParallelBoundsItsWrites(t *testing.T) {
	var b batches
	out := inParallel(context.Background(), 50, maxBatch, b.do(5*time.Millisecond, map[int]error{7: errors.New("gone")}))
	if b.most > maxBatch || b.most < 2 {
		t.Errorf("at most %d in flight, want 2..%d", b.most, maxBatch)
	}
	for i, o := range out {
		if !o.started {
			t.Fatalf("write %d never started: one failure stops none of the others", i)
		}
		if (o.err != nil) != (i == 7) {
			t.Errorf("write %d: err %v", i, o.err)
		}
	}
}

// TestAPassStartsNoWriteOnceItsWindowCloses: with half the reconcile's
// time spent, what is left waits for the next pass.
func TestAPassStartsNoWriteOnceItsWindowCloses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	ctx = withPassWindow(ctx)
	var n atomic.Int64
	out := inParallel(ctx, 1000, maxBatch, func(context.Context, int) error {
		n.Add(1)
		time.Sleep(50 * time.Millisecond)
		return nil
	})
	if ctx.Err() != nil {
		t.Fatalf("the pass ran out its whole deadline (%v): the window did not close", ctx.Err())
	}
	started := 0
	for _, o := range out {
		if o.started {
			started++
		}
	}
	if started == 0 || started == len(out) || int64(started) != n.Load() {
		t.Errorf("%d of %d writes started (%d ran): want some, not all", started, len(out), n.Load())
	}
	if !windowOpen(context.Background()) {
		t.Error("a context with no deadline closes no window")
	}
}
