package nodepool

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// countingMachines answers every Get with a machine still launching, and
// counts the Gets by name.
type countingMachines struct {
	Machines
	gets map[string]int
}

func (m *countingMachines) GetMachine(_ context.Context, _ *v1alpha1.NodePool, name string) (*provider.Machine, error) {
	m.gets[name]++
	return &provider.Machine{Name: name, State: provider.StateLaunching}, nil
}

// DeleteMachine refuses, which ends a timed-out check in an error before it
// gives the node back (this test has no API server to write to).
func (m *countingMachines) DeleteMachine(context.Context, *v1alpha1.NodePool, string) error {
	return errors.New("not in this test")
}

// A pass runs on every change of a pool's nodes; the provider is asked
// about a replacement on its way at most once a machineRecheck, except once
// its registration timeout has run out.
func TestTheProviderIsAskedAboutAReplacementOnceARecheck(t *testing.T) {
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	m := &countingMachines{gets: map[string]int{}}
	c := NewController(nil, nil, clk, m, Options{RegistrationTimeout: time.Minute})
	pool := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old-1"}}
	launched := start
	a := &disruption.Record{Phase: disruption.PhaseLaunching, Replacement: "new-a", Since: start, LaunchedAt: &launched}
	b := &disruption.Record{Phase: disruption.PhaseLaunching, Replacement: "new-b", Since: start, LaunchedAt: &launched}

	check := func(rec *disruption.Record, at time.Duration) {
		t.Helper()
		if err := c.checkMachine(context.Background(), pool, n, rec, start.Add(at)); err != nil {
			t.Fatalf("checkMachine at +%s: %v", at, err)
		}
	}
	check(a, 0)
	check(a, 100*time.Millisecond)
	check(a, machineRecheck-time.Millisecond)
	check(b, time.Second)
	if m.gets["new-a"] != 1 || m.gets["new-b"] != 1 {
		t.Fatalf("within one recheck: %v Gets, want one of each replacement", m.gets)
	}
	check(a, machineRecheck)
	if m.gets["new-a"] != 2 {
		t.Fatalf("a recheck later: %d Gets of new-a, want 2", m.gets["new-a"])
	}
	// One consolidation names one replacement on several nodes: each node
	// asks, so each sees a failure in the same pass.
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old-2"}}
	if err := c.checkMachine(context.Background(), pool, other, a, start.Add(machineRecheck)); err != nil {
		t.Fatal(err)
	}
	if m.gets["new-a"] != 3 {
		t.Fatalf("a second node naming new-a: %d Gets, want 3 (its own)", m.gets["new-a"])
	}
	// Past the registration timeout the check is the one that gives the
	// node back: it is never put off.
	_ = c.checkMachine(context.Background(), pool, n, a, start.Add(time.Minute+machineRecheck+time.Millisecond))
	_ = c.checkMachine(context.Background(), pool, n, a, start.Add(time.Minute+machineRecheck+2*time.Millisecond))
	if m.gets["new-a"] != 5 {
		t.Fatalf("past the registration timeout: %d Gets of new-a, want 5 (every check asks)", m.gets["new-a"])
	}
}
