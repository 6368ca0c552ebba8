package termination

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/drain"
)

// The blocked-pods gauge follows each pod from its Blocked step to its next
// step or the end of its node's drain; evictions and forced deletions count
// under the reason the node is drained for.
func TestMetricsFollowBlockersAndCountEvictions(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	b := newBlockers(m)
	obs := b.observer(Request{Reason: ReasonMaintenance})
	step := func(kind drain.ProgressKind, node, pod string, reason drain.Reason) {
		obs.Observe(drain.Progress{Kind: kind, Node: node, Pod: pod, Reason: reason})
	}
	blocked := func(r drain.Reason) float64 { return testutil.ToFloat64(m.Blocked.WithLabelValues(string(r))) }

	step(drain.ProgressBlocked, "n1", "ns/a", drain.ReasonPDBBlocked)
	step(drain.ProgressBlocked, "n1", "ns/b", drain.ReasonPDBDeadlock)
	step(drain.ProgressBlocked, "n2", "ns/c", drain.ReasonPDBBlocked)
	step(drain.ProgressBlocked, "n1", "ns/a", drain.ReasonPDBBlocked) // the same again: still one pod
	if blocked(drain.ReasonPDBBlocked) != 2 || blocked(drain.ReasonPDBDeadlock) != 1 {
		t.Fatalf("blocked PDBBlocked=%v PDBDeadlock=%v; want 2 and 1", blocked(drain.ReasonPDBBlocked), blocked(drain.ReasonPDBDeadlock))
	}
	step(drain.ProgressEvicting, "n1", "ns/a", "")
	step(drain.ProgressNodeFinished, "n1", "", "")
	step(drain.ProgressForced, "n2", "ns/c", drain.ReasonDeadlineForced)
	if blocked(drain.ReasonPDBBlocked) != 0 || blocked(drain.ReasonPDBDeadlock) != 0 {
		t.Errorf("blocked PDBBlocked=%v PDBDeadlock=%v after the pods moved and n1's drain ended; want 0 and 0",
			blocked(drain.ReasonPDBBlocked), blocked(drain.ReasonPDBDeadlock))
	}
	if e, f := testutil.ToFloat64(m.Evictions.WithLabelValues("Maintenance")), testutil.ToFloat64(m.Forced.WithLabelValues("Maintenance")); e != 1 || f != 1 {
		t.Errorf("evictions %v, forced %v; want 1 and 1", e, f)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// A drain still running past its event's deadline is overdue; the per-pool
// gauge counts what each pool is spending.
func TestMetricsCountOverdueDrainsAndPools(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	clk := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	q, f := newTestQueueWithMetrics(t, Limits{}, clk, m)

	soon := clk.Now().Add(time.Minute)
	for _, r := range []Request{
		{Node: "n1", Pool: "a", Key: "k", Options: drain.Options{Deadline: soon}},
		{Node: "n2", Pool: "a", Key: "k"},
		{Node: "n3", Pool: "b", Key: "k"},
	} {
		if _, err := q.Submit(r); err != nil {
			t.Fatal(err)
		}
	}
	pool := func(p string) float64 { return testutil.ToFloat64(m.PoolDisrupting.WithLabelValues(p)) }
	if pool("a") != 2 || pool("b") != 1 {
		t.Errorf("pool gauges a=%v b=%v; want 2 and 1", pool("a"), pool("b"))
	}
	overdue := func() float64 { return gathered(t, reg, "sluice_termination_overdue_nodes") }
	if o := overdue(); o != 0 {
		t.Errorf("overdue %v before the deadline; want 0", o)
	}
	clk.Step(2 * time.Minute)
	if o := overdue(); o != 1 {
		t.Errorf("overdue %v after n1's deadline; want 1", o)
	}
	eventually(t, "n1 to start", func() bool { return len(f.startedSoFar()) == 3 })
	f.finish(t, "n1")
	eventually(t, "n1 to leave the queue", func() bool { return overdue() == 0 })
}

// gathered is the value of the registry's one gauge of that name.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s gathered", name)
	return 0
}
