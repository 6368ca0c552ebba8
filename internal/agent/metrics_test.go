package agent

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

type approver struct{ err error }

func (a *approver) Approve(context.Context, string) error { return a.err }

// The agent's metrics say what it read, wrote and approved, and are lint
// clean. (The fake clientset stands in for the agent's own writes; nothing
// here is the API server's to decide.)
func TestAgentMetricsCountReadsWritesAndApprovals(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{contract.AnnotationMaintenanceApprove: "A1"}}}
	client := fake.NewClientset(node)
	appr := &approver{err: errors.New("the platform refused: 409")}
	a := New(client, slog.New(slog.DiscardHandler), Config{Node: "n1", Source: maintenance.SourceAzure, Clock: clk, Metrics: m, Approver: appr})
	ctx := context.Background()

	e := maintenance.Event{ID: "A1", Source: maintenance.SourceAzure, Type: maintenance.TypeRedeploy, Status: maintenance.StatusScheduled}
	r, ok := a.take(maintenance.Observation{Events: []maintenance.Event{e}}, nil)
	if !ok {
		t.Fatal("a readable answer was not taken")
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	if _, ok := a.take(maintenance.Observation{}, errors.New("dial tcp 169.254.169.254:80: i/o timeout")); ok {
		t.Fatal("an error was taken as an answer")
	}
	if err := a.publish(ctx, node, r); err != nil {
		t.Fatal(err)
	}
	if err := a.approve(ctx, node, &r); err == nil {
		t.Fatal("a refused approval was not an error")
	}
	appr.err = nil
	if err := a.approve(ctx, node, &r); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"reads ok", testutil.ToFloat64(m.Reads.WithLabelValues("ok")), 1},
		{"reads error", testutil.ToFloat64(m.Reads.WithLabelValues("error")), 1},
		{"last read", testutil.ToFloat64(m.LastRead), 1_800_000_000}, // the failed read a minute later moved nothing
		{"events", testutil.ToFloat64(m.Events), 1},
		{"writes ok", testutil.ToFloat64(m.Writes.WithLabelValues("ok")), 1},
		{"approvals error", testutil.ToFloat64(m.Approvals.WithLabelValues("error")), 1},
		{"approvals ok", testutil.ToFloat64(m.Approvals.WithLabelValues("ok")), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v; want %v", c.name, c.got, c.want)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
