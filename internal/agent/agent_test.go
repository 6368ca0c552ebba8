package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// repeating answers the same observation every call, as a metadata service
// with one unchanged event does, n times; then it waits for the end.
type repeating struct {
	obs maintenance.Observation
	n   int

	mu    sync.Mutex
	calls int
}

func (r *repeating) Next(ctx context.Context) (maintenance.Observation, error) {
	r.mu.Lock()
	r.calls++
	done := r.calls > r.n
	r.mu.Unlock()
	if done {
		<-ctx.Done()
		return maintenance.Observation{}, ctx.Err()
	}
	time.Sleep(time.Millisecond) // let the agent take in each answer
	return r.obs, nil
}

func (r *repeating) Calls() int { r.mu.Lock(); defer r.mu.Unlock(); return r.calls }

// records counts log records by message.
type records struct {
	mu  sync.Mutex
	msg map[string]int
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msg[rec.Message]++
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }
func (r *records) count(msg string) int               { r.mu.Lock(); defer r.mu.Unlock(); return r.msg[msg] }

// Issue 11, item 7: one unchanged event and one unreadable entry, answered
// 50 times, are logged once each, even when writing the node fails every
// time (the write failure is logged once too).
func TestAgentLogsChangesNotPolls(t *testing.T) {
	for _, failWrites := range []bool{false, true} {
		client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
		if failWrites {
			client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("the API server is away")
			})
		}
		notBefore := time.Date(2026, 11, 21, 10, 15, 0, 0, time.UTC)
		w := &repeating{n: 50, obs: maintenance.Observation{
			Events: []maintenance.Event{{ID: "A1", Source: maintenance.SourceAzure, Type: maintenance.TypeRedeploy,
				Status: maintenance.StatusScheduled, NotBefore: notBefore, Deadline: notBefore}},
			Rejected: []error{maintenance.Reject(`event "B2"`, errors.New(`NotBefore "tomorrow" is neither RFC 1123 nor RFC 3339`), "B2")},
		}}
		logs := &records{msg: map[string]int{}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		done := make(chan error, 1)
		go func() {
			done <- New(client, slog.New(logs), Config{Node: "n1", Source: maintenance.SourceAzure, Watcher: w}).Run(ctx)
		}()
		for w.Calls() <= w.n && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		if !failWrites {
			waitForReport(ctx, t, client)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		for msg, want := range map[string]int{
			"maintenance event": 1,
			"ignoring an unreadable part of the metadata answer": 1,
		} {
			if got := logs.count(msg); got != want {
				t.Errorf("failing writes %v: %q logged %d times for 50 equal answers; want %d", failWrites, msg, got, want)
			}
		}
		if got := logs.count("writing events onto the node"); failWrites && got != 1 {
			t.Errorf("the same write failure logged %d times; want once", got)
		}
	}
}

func waitForReport(ctx context.Context, t *testing.T, client *fake.Clientset) {
	t.Helper()
	for ctx.Err() == nil {
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err == nil {
			if r, ok, err := maintenance.ReportOf(n); ok && err == nil && len(r.Events) == 1 {
				if len(r.Rejected) != 1 || r.Rejected[0] != `event "B2": NotBefore "tomorrow" is neither RFC 1123 nor RFC 3339` {
					t.Errorf("report's rejected parts %q; want the one entry", r.Rejected)
				}
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the report never reached the node")
}

// The agent logs an event again when its status changes, and when it is
// over.
func TestAgentLogsEachChangeOnce(t *testing.T) {
	logs := &records{msg: map[string]int{}}
	a := New(fake.NewClientset(), slog.New(logs), Config{Node: "n1"})
	e := maintenance.Event{ID: "A1", Type: maintenance.TypeReboot, Status: maintenance.StatusScheduled}
	for _, r := range []maintenance.Report{
		{Events: []maintenance.Event{e}},
		{Events: []maintenance.Event{e}},
		{Events: []maintenance.Event{{ID: "A1", Type: maintenance.TypeReboot, Status: maintenance.StatusStarted}}},
		{Events: []maintenance.Event{{ID: "A1", Type: maintenance.TypeReboot, Status: maintenance.StatusStarted}}},
		{},
		{},
	} {
		a.logChanges(r)
	}
	if got, over := logs.count("maintenance event"), logs.count("maintenance event over"); got != 2 || over != 1 {
		t.Errorf("logged %d event lines and %d ends; want 2 (Scheduled, Started) and 1", got, over)
	}
}

// scripted answers, one per Next, the observations the test sends it.
type scripted chan maintenance.Observation

func (s scripted) Next(ctx context.Context) (maintenance.Observation, error) {
	select {
	case <-ctx.Done():
		return maintenance.Observation{}, ctx.Err()
	case obs := <-s:
		return obs, nil
	}
}

// A restarted agent takes the events its node's report holds as known: an
// answer that lacks them ends them only once their end is confirmed, as for
// an agent that never stopped. (The fake clientset stands in for the agent's
// own write onto its node; nothing here is the API server's to decide.)
func TestARestartedAgentKeepsItsNodesEventsUntilTheirEndIsConfirmed(t *testing.T) {
	report := maintenance.NewReport(maintenance.SourceAzure, false, []maintenance.Event{{ID: "A1", Source: maintenance.SourceAzure,
		Type: maintenance.TypeRedeploy, Status: maintenance.StatusScheduled}})
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Annotations: map[string]string{contract.AnnotationMaintenanceEvents: report.Encode()}}})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	w := make(scripted)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- New(client, slog.New(slog.DiscardHandler), Config{Node: "n1", Source: maintenance.SourceAzure, Watcher: w, Clock: clk}).Run(ctx)
	}()
	for i, step := range []struct {
		after time.Duration
		want  bool // A1 still in the report
	}{{0, true}, {5 * time.Second, true}, {5 * time.Second, false}} {
		clk.Step(step.after)
		// Each answer lists, instead of A1, a Freeze of its own, by which
		// the test knows the report written for it.
		marker := fmt.Sprintf("marker-%d", i)
		select {
		case w <- maintenance.Observation{Events: []maintenance.Event{{ID: marker, Source: maintenance.SourceAzure,
			Type: maintenance.TypeFreeze, Status: maintenance.StatusScheduled}}}:
		case <-ctx.Done():
			t.Fatal("the agent never read the metadata service")
		}
		for {
			n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			r, _, _ := maintenance.ReportOf(n)
			if _, ok := r.Find(marker); ok {
				if _, has := r.Find("A1"); has != step.want {
					t.Errorf("answer %d, %s after the first without A1: report %+v; want A1 there: %v", i, clk.Since(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)), r, step.want)
				}
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("no report for answer %d", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("agent: %v", err)
	}
}
