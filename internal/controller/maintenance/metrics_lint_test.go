package maintenance_test

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
)

// What the controller exports after it drained a node for a preemption is
// clean by promlint (client_golang's linter: names, units, suffixes, help),
// and holds the families the docs and dashboards use.
func TestControllerMetricsAreLintClean(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.loadReplicated(t)
	s.addSpare(t)
	reg := prometheus.NewRegistry()
	startControllerWithRegistry(t, s.env, reg)
	notBefore := time.Now().Add(20 * time.Second).Truncate(time.Second)
	s.azure.Schedule(azure.RawEvent{EventID: "preempt-1", EventType: "Preempt", ResourceType: "VirtualMachine", Resources: []string{vmName(t, s)},
		EventStatus: "Scheduled", NotBefore: rfc1123(notBefore), EventSource: "Platform", DurationInSeconds: -1})
	s.waitForReason(t, 40*time.Second, "EventApproved")

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	// The event's counter started at zero with the others of its kind, and
	// counts this one.
	seen := -1.0
	for _, f := range families {
		if f.GetName() != "sluice_maintenance_events_seen_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == "azure" && labels["type"] == "Preempt" && labels["action"] == "Drain" {
				seen = m.GetCounter().GetValue()
			}
		}
	}
	if seen != 1 {
		t.Errorf("sluice_maintenance_events_seen_total{source=azure,type=Preempt,action=Drain} = %v; want 1", seen)
	}
	for _, want := range []string{"sluice_maintenance_events_seen_total", "sluice_maintenance_drains_total", "sluice_maintenance_drain_duration_seconds",
		"sluice_maintenance_approvals_total", "sluice_termination_disrupting_nodes"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s after a drain; have %v", want, names)
		}
	}
}
