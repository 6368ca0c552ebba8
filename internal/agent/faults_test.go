package agent

// These tests read each cloud's emulator through the real Source, and turn
// its answers into reports with the agent's own take, the step below Run
// that needs no Node: what they prove is what the agent would write.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/aws"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
	"github.com/sluice-dev/sluice/pkg/maintenance/gcp"
)

// Timings that make a fault cost little real time: the sources poll every
// 20 ms, give up on a request after 200 ms (GCP: its long poll's second
// plus that), and a slow answer takes longer than either.
const (
	testInterval = 20 * time.Millisecond
	testTimeout  = 200 * time.Millisecond
	testGCPWait  = time.Second
	slowAnswer   = testGCPWait + testTimeout + 300*time.Millisecond
)

// faulty is what the three emulators share.
type faulty interface {
	http.Handler
	SetFault(maintenance.Fault)
	Fault() maintenance.Fault
}

// machine is one cloud's emulator announcing events, the watcher that reads
// it, and how to end the events as the cloud would.
type machine struct {
	server  faulty
	watcher maintenance.Watcher
	live    int // the events announced
	end     func()
}

// clouds start a machine per cloud, each announcing events sluice drains
// for.
var clouds = []struct {
	source maintenance.Source
	start  func(t *testing.T) machine
}{
	{maintenance.SourceAzure, func(t *testing.T) machine {
		s := azure.NewServer()
		s.Schedule(azure.RawEvent{EventID: "A1", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{"aks-user-1234-vmss_3"},
			EventStatus: "Scheduled", NotBefore: azure.FormatNotBefore(time.Now().Add(time.Hour)), EventSource: "Platform", DurationInSeconds: -1})
		w := newWatcher(t, maintenance.SourceAzure, s,
			"azure:///subscriptions/s/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-user-1234-vmss/virtualMachines/3")
		return machine{server: s, watcher: w, live: 1, end: func() { s.Finish("A1") }}
	}},
	{maintenance.SourceAWS, func(t *testing.T) machine {
		s := aws.NewServer(nil)
		s.Spot(aws.SpotTerminate, time.Now().Add(2*time.Minute))
		s.ScheduleMaintenance(aws.ScheduledEvent{EventID: "instance-event-1", Code: aws.CodeInstanceRetirement,
			NotBefore: time.Now().Add(time.Hour).UTC().Format(aws.EventTimeLayout)})
		w := newWatcher(t, maintenance.SourceAWS, s, "aws:///us-east-1a/i-0123456789abcdef0")
		return machine{server: s, watcher: w, live: 2, end: func() {
			s.ClearSpot()
			s.SetMaintenanceState("instance-event-1", aws.StateCanceled)
		}}
	}},
	{maintenance.SourceGCP, func(t *testing.T) machine {
		s := gcp.NewServer(nil)
		s.Preempt()
		s.SetMaintenanceEvent(gcp.MaintenanceTerminate)
		ts := httptest.NewServer(s)
		t.Cleanup(ts.Close)
		c, err := gcp.NewClient(ts.URL, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		// NewWatcher's long poll waits a minute, as Google's guest agent
		// does; a second lets a slow answer outlast it here.
		return machine{server: s, watcher: gcp.NewSourceWaiting(c, nil, testGCPWait), live: 2, end: s.Reset}
	}},
}

func newWatcher(t *testing.T, cloud maintenance.Source, s http.Handler, providerID string) maintenance.Watcher {
	t.Helper()
	ts := httptest.NewServer(s) // 127.0.0.1 only
	t.Cleanup(ts.Close)
	w, err := NewWatcher(cloud, ts.URL, providerID, clock.RealClock{}, testInterval, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// answer is one answer of the metadata service and what the agent made of
// it.
type answer struct {
	obs    maintenance.Observation
	err    error
	report maintenance.Report
	ok     bool // a report to write
}

// recorder reads a machine through an agent until stopped, stepping the
// agent's clock by step for each answer (the sources keep real time: their
// polls, timeouts and retries race the emulator's).
type recorder struct {
	mu      sync.Mutex
	answers []answer
	stop    func()
}

func record(t *testing.T, m machine, clk *clocktesting.FakeClock, step time.Duration) *recorder {
	t.Helper()
	a := New(nil, slog.New(slog.DiscardHandler), Config{Node: "n1", Watcher: m.watcher, Clock: clk}) // take writes nothing
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &recorder{stop: func() { cancel(); <-done }}
	t.Cleanup(r.stop)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			obs, err := m.watcher.Next(ctx)
			if ctx.Err() != nil {
				return
			}
			clk.Step(step)
			report, ok := a.take(obs, err)
			r.mu.Lock()
			r.answers = append(r.answers, answer{obs, err, report, ok})
			r.mu.Unlock()
		}
	}()
	return r
}

// await waits until an answer from the from'th on meets cond, and returns
// its index.
func (r *recorder) await(t *testing.T, what string, from int, cond func(answer) bool) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for i := from; i < len(r.answers); i++ {
			if cond(r.answers[i]) {
				r.mu.Unlock()
				return i
			}
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no answer %s in 20s; answers: %s", what, r)
	return 0
}

func (r *recorder) len() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.answers) }

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for i, a := range r.answers {
		fmt.Fprintf(&b, "\n  %d: read %s, %d rejected, err %v -> report %s", i, ids(a.obs.Events), len(a.obs.Rejected), a.err, reportIDs(a))
	}
	return b.String()
}

// faultCases are the faults every emulator plays, and how each shows.
var faultCases = []struct {
	name  string
	fault maintenance.Fault
	// seen says the fault took effect in this answer; it is cleared
	// once lasting answers have shown it.
	seen    func(answer, int) bool
	lasting int
	// step is how far the agent's clock moves per answer.
	step time.Duration
}{
	{"slow", maintenance.Fault{Kind: maintenance.FaultSlow, Delay: slowAnswer}, failed, 1, time.Second},
	{"server errors", maintenance.Fault{Kind: maintenance.FaultServerError}, failed, 1, time.Second},
	// Three answers, six seconds apart: longer than an end takes to be
	// confirmed, so only the source's Holder keeps the events through a
	// part it cannot read (GCP).
	{"truncated", maintenance.Fault{Kind: maintenance.FaultTruncated}, func(a answer, _ int) bool { return a.err != nil || len(a.obs.Rejected) > 0 }, 3, 6 * time.Second},
	// Four answers a second apart, shorter than an end takes to be
	// confirmed: on AWS and GCP two documents announce, so both vanish
	// for two polls; on Azure the event vanishes for four.
	{"flapping", maintenance.Fault{Kind: maintenance.FaultFlap, Answers: 4}, func(a answer, live int) bool { return a.err == nil && len(a.obs.Events) < live }, 1, time.Second},
}

// Under every fault, on every cloud, every report the agent would write
// holds exactly the events announced before the fault: a fault never ends
// one (no node is put back into service by a bad answer) and never makes
// one up (no node is drained by one). Each fault is seen to take effect
// (an error, a rejected part, or an event missing from what was read), and
// the machine is seen to answer well again after it.
func TestMetadataFaultsNeverChangeTheReport(t *testing.T) {
	for _, cloud := range clouds {
		for _, f := range faultCases {
			t.Run(string(cloud.source)+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				m := cloud.start(t)
				clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
				r := record(t, m, clk, f.step)
				first := r.await(t, "with the events", 0, func(a answer) bool { return a.ok })
				want := reportIDs(r.answers[first])
				if got := len(r.answers[first].report.Events); got != m.live {
					t.Fatalf("first report %s; want %d events", want, m.live)
				}

				m.server.SetFault(f.fault)
				seen := r.len()
				for range f.lasting {
					seen = r.await(t, "showing the fault", seen, func(a answer) bool { return f.seen(a, m.live) }) + 1
				}
				if f.fault.Answers == 0 {
					m.server.SetFault(maintenance.Fault{})
				}
				r.await(t, "well read again", seen, func(a answer) bool {
					return a.err == nil && len(a.obs.Rejected) == 0 && len(a.obs.Events) == m.live && m.server.Fault() == maintenance.Fault{}
				})
				r.stop()

				for i, a := range r.answers {
					if a.ok && reportIDs(a) != want {
						t.Errorf("answer %d: report %s; want %s throughout%s", i, reportIDs(a), want, r)
						break
					}
				}
			})
		}
	}
}

// An event that is over leaves the report once two answers, ten seconds
// apart, have gone without it; not before.
func TestAgentEndsAnEventOnceItsEndIsConfirmed(t *testing.T) {
	for _, cloud := range clouds {
		t.Run(string(cloud.source), func(t *testing.T) {
			t.Parallel()
			m := cloud.start(t)
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
			r := record(t, m, clk, 4*time.Second)
			first := r.await(t, "with the events", 0, func(a answer) bool { return a.ok })
			events := r.answers[first].report.Events
			m.end()
			r.await(t, "reporting the end", first+1, func(a answer) bool { return a.ok && len(a.report.Events) == 0 })
			r.stop()
			// Answers come every 4 s on the agent's clock: the first without
			// an event keeps it, and so do those until 10 s after it.
			for _, e := range events {
				has := func(events []maintenance.Event) bool {
					return slices.ContainsFunc(events, func(o maintenance.Event) bool { return o.ID == e.ID })
				}
				gone := slices.IndexFunc(r.answers[first:], func(a answer) bool { return a.err == nil && !has(a.obs.Events) })
				over := slices.IndexFunc(r.answers[first:], func(a answer) bool { return a.ok && !has(a.report.Events) })
				if gone < 0 || over-gone != 3 {
					t.Errorf("%s left the report %d answers after the first without it; want 3%s", e.ID, over-gone, r)
				}
			}
		})
	}
}

func failed(a answer, _ int) bool { return a.err != nil }

func reportIDs(a answer) string {
	if !a.ok {
		return "(none)"
	}
	return ids(a.report.Events)
}

func ids(events []maintenance.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.ID)
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}
