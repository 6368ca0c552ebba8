package agent

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the agent's Prometheus metrics: whether it can read its
// machine's metadata service, write its node, and approve events, and
// whether its OS asks for a reboot. An agent that reads nothing for long is
// blind to the maintenance it is there to see (the chart's
// SluiceAgentNotReading alert).
type Metrics struct {
	Reads     *prometheus.CounterVec
	LastRead  prometheus.Gauge
	Events    prometheus.Gauge
	Writes    *prometheus.CounterVec
	Approvals *prometheus.CounterVec
	Cordons   *prometheus.CounterVec
	// RebootRequired is 1 while the reboot sentinel asks for a reboot; it
	// keeps its value while the sentinel cannot be read, and is 0 with the
	// check off.
	RebootRequired prometheus.Gauge
}

// Outcomes of the counted calls.
const (
	outcomeOK    = "ok"
	outcomeError = "error"
)

// NewMetrics registers the agent's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_agent_metadata_reads_total",
			Help: "Answers of the metadata service, by outcome: ok (read, perhaps with parts rejected) or error (unreachable, or not an answer at all)."}, []string{"outcome"}),
		LastRead: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_agent_last_read_timestamp_seconds",
			Help: "When the metadata service last gave an answer the agent could read, in Unix seconds."}),
		Events: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_agent_events",
			Help: "Maintenance events in the agent's last report on its node."}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_agent_report_writes_total",
			Help: "Writes of the agent's report onto its node, by outcome."}, []string{"outcome"}),
		Approvals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_agent_approvals_total",
			Help: "Events the agent asked the platform to start early, as the controller asked, by outcome."}, []string{"outcome"}),
		Cordons: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_agent_cordons_total",
			Help: "Cordons of its own node in the write that first reported a Preempt or Terminate, by outcome (error: the report went out alone and the controller cordons)."}, []string{"outcome"}),
		RebootRequired: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_agent_reboot_required",
			Help: "1 while the OS's reboot-required sentinel asks for a reboot (the last reading that could tell), else 0."}),
	}
	for _, o := range []string{outcomeOK, outcomeError} {
		m.Reads.WithLabelValues(o)
		m.Writes.WithLabelValues(o)
		m.Approvals.WithLabelValues(o)
		m.Cordons.WithLabelValues(o)
	}
	reg.MustRegister(m.Reads, m.LastRead, m.Events, m.Writes, m.Approvals, m.Cordons, m.RebootRequired)
	return m
}

func outcome(err error) string {
	if err != nil {
		return outcomeError
	}
	return outcomeOK
}
