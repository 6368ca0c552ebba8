package termination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/drain"
)

// fakeDrains stands in for the drain engine: each drain runs until the test
// finishes it (or the queue cancels it).
type fakeDrains struct {
	mu      sync.Mutex
	running map[string]chan struct{}
	started []string
	// unwind, when set, holds a canceled drain until it is closed, as a
	// real drain takes a moment to release its claim on the node.
	unwind chan struct{}
	// starts, when set, is sent each drain as it starts.
	starts chan string
	// live counts each node's drains that have not returned; overlaps
	// records every drain that started while another of its node's had
	// not, which the real engine would refuse as a second claim.
	live     map[string]int
	overlaps []string
}

func (f *fakeDrains) run(ctx context.Context, req Request) (*drain.Report, error) {
	f.mu.Lock()
	done := make(chan struct{})
	f.running[req.Node] = done
	f.started = append(f.started, req.Node+"/"+req.Key)
	if f.live[req.Node]++; f.live[req.Node] > 1 {
		f.overlaps = append(f.overlaps, req.Node+"/"+req.Key)
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.live[req.Node]--
		f.mu.Unlock()
	}()
	if f.starts != nil {
		f.starts <- req.Node + "/" + req.Key
	}
	select {
	case <-done:
		return &drain.Report{Nodes: []drain.NodeReport{{Name: req.Node, Outcome: drain.NodeDrained}}}, nil
	case <-ctx.Done():
		if f.unwind != nil {
			<-f.unwind
		}
		return nil, ctx.Err()
	}
}

func (f *fakeDrains) finish(t *testing.T, node string) {
	t.Helper()
	f.mu.Lock()
	done := f.running[node]
	delete(f.running, node)
	f.mu.Unlock()
	if done == nil {
		t.Fatalf("%s is not draining", node)
	}
	close(done)
}

func (f *fakeDrains) startedSoFar() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.started...)
}

func newTestQueue(t *testing.T, limits Limits) (*Queue, *fakeDrains) {
	t.Helper()
	return newTestQueueWithClock(t, limits, nil)
}

func newTestQueueWithClock(t *testing.T, limits Limits, clk clock.WithTicker) (*Queue, *fakeDrains) {
	t.Helper()
	return newTestQueueWithMetrics(t, limits, clk, nil)
}

func newTestQueueWithMetrics(t *testing.T, limits Limits, clk clock.WithTicker, m *Metrics) (*Queue, *fakeDrains) {
	t.Helper()
	q, err := New(nil, clk, nil, limits, "test", nil, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDrains{running: map[string]chan struct{}{}, live: map[string]int{}}
	q.drain = f.run
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = q.Start(ctx) }()
	<-q.started
	t.Cleanup(func() { cancel(); <-done })
	return q, f
}

func submit(t *testing.T, q *Queue, node, pool, key string, involuntary bool, want Admission) {
	t.Helper()
	got, err := q.Submit(Request{Node: node, Pool: pool, Key: key, Involuntary: involuntary})
	if err != nil || got != want {
		t.Fatalf("Submit(%s): %s, %v; want %s", node, got, err, want)
	}
}

// eventually polls cond until it holds or a few seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestCapsHoldVoluntaryWorkAndCountInvoluntary(t *testing.T) {
	q, f := newTestQueue(t, Limits{MaxNodes: 2, MaxNodesPerPool: 1})
	submit(t, q, "a1", "a", "k", false, Started)
	submit(t, q, "a2", "a", "k", false, Queued) // pool a is at its cap of 1
	submit(t, q, "b1", "b", "k", false, Started)
	submit(t, q, "c1", "c", "k", false, Queued) // the cluster is at its cap of 2
	// The cloud takes c2 whatever the caps say; it counts against them.
	submit(t, q, "c2", "c", "k", true, Started)
	submit(t, q, "c2", "c", "k", true, Running) // the same request again
	if total, byPool := q.Disrupting(); total != 3 || byPool["a"] != 1 || byPool["c"] != 1 {
		t.Fatalf("disrupting %d %v; want 3 with one in a and one in c", total, byPool)
	}
	eventually(t, "three drains", func() bool { return len(f.startedSoFar()) == 3 })

	f.finish(t, "a1") // a2 may go now by its pool, not yet by the cluster (b1, c2 run)
	eventually(t, "a1 to leave the queue", func() bool { total, _ := q.Disrupting(); return total == 2 })
	if q.Holds("a2", "k") == false {
		t.Fatal("a2 was forgotten")
	}
	if got := f.startedSoFar(); len(got) != 3 {
		t.Fatalf("started %v; want a2 held back by the cluster cap", got)
	}
	f.finish(t, "c2") // room for one: a2 was queued first
	eventually(t, "a2 to start", func() bool { return len(f.startedSoFar()) == 4 })
	if got := f.startedSoFar()[3]; got != "a2/k" {
		t.Fatalf("started %s; want the oldest queued request, a2", got)
	}
}

func TestANewKeyReplacesTheRunningDrain(t *testing.T) {
	q, f := newTestQueue(t, Limits{})
	submit(t, q, "n", "", "event@10:00", true, Started)
	eventually(t, "the first drain", func() bool { return len(f.startedSoFar()) == 1 })
	submit(t, q, "n", "", "event@10:05", true, Started) // the cloud moved the deadline
	eventually(t, "the second drain", func() bool { return len(f.startedSoFar()) == 2 })
	if !q.Holds("n", "event@10:05") || q.Holds("n", "event@10:00") {
		t.Fatal("the queue holds the old request")
	}
	q.Cancel("n")
	if q.Holds("n", "event@10:05") {
		t.Fatal("Cancel left the request")
	}
}

func TestDoneRunsOnceWithTheOutcomeAndNotOnCancel(t *testing.T) {
	q, f := newTestQueue(t, Limits{})
	outcomes := make(chan string, 2)
	done := func(r *drain.Report, err error) {
		if r == nil { // what a canceled drain returns
			outcomes <- fmt.Sprintf("no report (%v)", err)
			return
		}
		outcomes <- string(r.Nodes[0].Outcome)
	}
	if _, err := q.Submit(Request{Node: "n", Key: "k", Involuntary: true, Done: done}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the drain", func() bool { return len(f.startedSoFar()) == 1 })
	f.finish(t, "n")
	if got := <-outcomes; got != string(drain.NodeDrained) {
		t.Fatalf("outcome %s", got)
	}
	if _, err := q.Submit(Request{Node: "m", Key: "k", Involuntary: true, Done: done}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second drain", func() bool { return len(f.startedSoFar()) == 2 })
	q.mu.Lock()
	canceled := q.active["m"]
	q.mu.Unlock()
	q.Cancel("m")
	// The drain's goroutine would call Done before it closes done, so once
	// done is closed, Done has run or never will.
	select {
	case <-canceled.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the canceled drain never returned")
	}
	select {
	case got := <-outcomes:
		t.Fatalf("Done ran for a canceled drain: %s", got)
	default:
	}
}

func TestSubmitBeforeStartAndBadLimits(t *testing.T) {
	q, err := New(nil, nil, nil, Limits{}, "test", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(Request{Node: "n"}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Submit before Start: %v; want ErrNotStarted", err)
	}
	if _, err := New(nil, nil, nil, Limits{MaxNodes: -1}, "test", nil, nil, nil); err == nil {
		t.Fatal("a negative cap was accepted")
	}
}

func TestAReplacementWaitsForTheDrainItReplacesToUnwind(t *testing.T) {
	q, f := newTestQueue(t, Limits{})
	unwind := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(unwind) }) }
	t.Cleanup(release) // runs before the queue's own cleanup waits for its drains
	f.unwind = unwind
	f.starts = make(chan string, 2)
	awaiting := make(chan string, 1)
	q.awaitingUnwind = func(req Request) { awaiting <- req.Node + "/" + req.Key }
	submit(t, q, "n", "", "event@10:00", true, Started)
	if got := receive(t, f.starts, "the first drain"); got != "n/event@10:00" {
		t.Fatalf("started %s; want n/event@10:00", got)
	}
	submit(t, q, "n", "", "event@10:05", true, Started)
	// The old drain cannot return before release: the replacement either
	// starts now, overlapping it, or says it waits, and then cannot start
	// before release, however slow the machine.
	select {
	case got := <-f.starts:
		t.Fatalf("%s started while the drain it replaces still held the node", got)
	case got := <-awaiting:
		if got != "n/event@10:05" {
			t.Fatalf("%s waits; want the replacement, n/event@10:05", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the replacement neither started nor waited for the drain it replaces")
	}
	if !q.Holds("n", "event@10:05") {
		t.Fatal("the replacement is not held while it waits")
	}
	release()
	if got := receive(t, f.starts, "the replacement"); got != "n/event@10:05" {
		t.Fatalf("started %s; want the replacement", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.overlaps) > 0 {
		t.Fatalf("%v started before the drain they replace returned", f.overlaps)
	}
}

// receive takes the next value from ch, failing after a few seconds.
func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

func TestReleasedRunsAfterTheQueueLetsGo(t *testing.T) {
	q, f := newTestQueue(t, Limits{})
	released := make(chan bool, 1)
	req := Request{Node: "n", Key: "k", Involuntary: true}
	req.Released = func() { released <- q.Holds("n", "k") }
	if _, err := q.Submit(req); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the drain", func() bool { return len(f.startedSoFar()) == 1 })
	f.finish(t, "n")
	if held := <-released; held {
		t.Fatal("Released ran while the queue still held the request")
	}
}

// A person's `sluice drain` (seen through its claim on the node) holds the
// controller's voluntary work behind the same caps, until the claim is
// released or lapses; a node the queue drains itself is counted once.
func TestDrainsByOthersCountAgainstTheCaps(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	q, f := newTestQueueWithClock(t, Limits{MaxNodesPerPool: 1}, clk)
	q.Outside("a1", "a", "alice@laptop", clk.Now().Add(30*time.Second))
	if total, byPool := q.Disrupting(); total != 1 || byPool["a"] != 1 {
		t.Fatalf("disrupting %d %v; want alice's drain counted in pool a", total, byPool)
	}
	submit(t, q, "a2", "a", "k", false, Queued) // pool a is at its cap: alice's drain
	submit(t, q, "b1", "b", "k", false, Started)

	q.OutsideEnded("a1") // alice's drain released its claim
	eventually(t, "a2 to start", func() bool { return slices.Contains(f.startedSoFar(), "a2/k") })
	f.finish(t, "a2")
	eventually(t, "a2 to leave", func() bool { total, _ := q.Disrupting(); return total == 1 })

	// A claim that lapses without being released stops counting by itself.
	q.Outside("a3", "a", "bob@laptop", clk.Now().Add(30*time.Second))
	submit(t, q, "a4", "a", "k", false, Queued)
	clk.Step(31 * time.Second)
	if total, byPool := q.Disrupting(); byPool["a"] != 0 || total != 1 {
		t.Fatalf("disrupting %d %v after bob's claim lapsed; want only b1", total, byPool)
	}

	// The queue's own drain of a node also carries a claim: counted once.
	q.Outside("b1", "b", "test", clk.Now().Add(30*time.Second))
	if total, byPool := q.Disrupting(); total != 1 || byPool["b"] != 1 {
		t.Fatalf("disrupting %d %v; want b1 counted once", total, byPool)
	}
}
