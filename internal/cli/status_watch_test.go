package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// syncBuffer is a bytes.Buffer safe to write from the watch and read from
// the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls until the output holds want.
func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !strings.Contains(out.String(), want) {
		select {
		case <-deadline.C:
			t.Fatalf("no %q in:\n%s", want, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// status -w prints the status, then a line when a node's cordon takes one
// more of spot's nodes out of service (a watch delivered it), and a line
// when office hours end and spot's closed drift budget opens (nothing was
// delivered: its own timer, from the pool's next change, woke it).
func TestStatusWatchPrintsALinePerChange(t *testing.T) {
	kc, dyn := cluster(t)
	clk := clocktesting.NewFakeClock(now)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- runStatusWatch(ctx, &out, kc, dyn, nil, []string{"spot"}, outputText, clk) }()
	waitFor(t, &out, "CHANGE")
	if !strings.Contains(out.String(), "NAME  PROVIDER") || strings.Contains(out.String(), "gpu") {
		t.Fatalf("status -w spot did not start with spot's status only:\n%s", out.String())
	}

	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := kc.CoreV1().Nodes().Patch(ctx, "spot-2", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// 2 nodes, 50 %: 1 allowed; with one out of service, none.
	waitFor(t, &out, "spot                 disrupting 0 -> 1; allowed Empty,Underutilized,Expired,Upgrade,RebootRequired 1 -> 0")

	for !clk.HasWaiters() {
		time.Sleep(10 * time.Millisecond)
	}
	clk.SetTime(time.Date(2026, 6, 1, 17, 0, 1, 0, time.UTC))
	// The office-hours budget (drift 0) closes: the 50 % budget binds, and
	// spot-2 is out of service, so Drifted stays at 0 allowed but its limit
	// rises from 0 to 1.
	waitFor(t, &out, "limit Drifted 0 -> 1")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("status -w ended with %v", err)
	}
}

func TestStatusWatchJSONIsOneObjectPerLine(t *testing.T) {
	kc, dyn := cluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runStatusWatch(ctx, &out, kc, dyn, nil, nil, outputJSON, clocktesting.NewFakeClock(now))
	}()
	waitFor(t, &out, `"pool":"spot"`)
	if err := kc.CoreV1().Nodes().Delete(ctx, "gpu-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, `"event":"changed"`)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines (gpu and spot initial, gpu changed), got:\n%s", out.String())
	}
	var changed watchLine
	if err := json.Unmarshal([]byte(lines[2]), &changed); err != nil {
		t.Fatalf("line %q: %v", lines[2], err)
	}
	if changed.Pool != "gpu" || changed.Status == nil || changed.Status.Nodes != 1 || len(changed.Changes) == 0 ||
		changed.Changes[0].Field != "nodes" || changed.Changes[0].From != float64(2) || changed.Changes[0].To != float64(1) {
		t.Errorf("changed line %+v", changed)
	}
}

func TestStatusWatchRefusesAPoolThatDoesNotExist(t *testing.T) {
	kc, dyn := cluster(t)
	err := runStatusWatch(context.Background(), &bytes.Buffer{}, kc, dyn, nil, []string{"nope"}, outputText, clocktesting.NewFakeClock(now))
	if err == nil || !strings.Contains(err.Error(), "node pool nope not found") {
		t.Fatalf("err %v", err)
	}
}
