package maintenance

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Metrics are the controller's Prometheus metrics. They are never labelled by
// node or pod, so their cardinality stays fixed.
type Metrics struct {
	EventsSeen    *prometheus.CounterVec
	Drains        *prometheus.CounterVec
	DrainDuration prometheus.Histogram
	TimeLeft      prometheus.Histogram
	Uncordons     prometheus.Counter
	Approvals     prometheus.Counter
	Rejected      *prometheus.CounterVec
	// pastDeadline is set by the controller it is given to: a gauge read at
	// scrape time.
	pastDeadline func() float64
}

// eventTypes are the event types each cloud's metadata reports: their
// counters start at zero, so the first event of a kind shows as an increase
// (a counter that appears at 1 shows none).
var eventTypes = map[maintenance.Source][]maintenance.Type{
	maintenance.SourceAzure: {maintenance.TypeFreeze, maintenance.TypeReboot, maintenance.TypeRedeploy, maintenance.TypePreempt, maintenance.TypeTerminate},
	maintenance.SourceAWS:   {maintenance.TypePreempt, maintenance.TypeRebalance, maintenance.TypeReboot, maintenance.TypeTerminate, maintenance.TypeMaintenance},
	maintenance.SourceGCP:   {maintenance.TypePreempt, maintenance.TypeFreeze, maintenance.TypeTerminate},
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		EventsSeen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_maintenance_events_seen_total",
			Help: "Maintenance events seen on nodes, by source, type and the action taken.",
		}, []string{"source", "type", "action"}),
		Drains: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_maintenance_drains_total",
			Help: "Drains started for maintenance events, by event type and outcome (Drained, Blocked, Failed, Canceled).",
		}, []string{"type", "outcome"}),
		DrainDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_maintenance_drain_duration_seconds",
			Help:    "How long maintenance drains took, from start to the last pod gone.",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800},
		}),
		TimeLeft: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_maintenance_drain_time_left_seconds",
			Help:    "Time left before the event's deadline when its drain ended; zero or less means the deadline was missed.",
			Buckets: []float64{0, 1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 900},
		}),
		Uncordons: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_maintenance_uncordons_total",
			Help: "Nodes put back into service after their event ended.",
		}),
		Approvals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_maintenance_approvals_total",
			Help: "Events the platform was told to start early, once their node was drained.",
		}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_maintenance_rejected_parts_total",
			Help: "Parts of nodes' metadata answers their agents could not read (a bad timestamp, an unknown value, garbage), by source; each counted once while it lasts.",
		}, []string{"source"}),
	}
	pastDeadline := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_maintenance_past_deadline_nodes",
		Help: "Nodes whose event's deadline has passed with pods on them that the drain had to move and could not: the platform takes them with the machine.",
	}, func() float64 {
		if m.pastDeadline == nil {
			return 0
		}
		return m.pastDeadline()
	})
	for source, types := range eventTypes {
		for _, t := range types {
			m.EventsSeen.WithLabelValues(string(source), string(t), string(nodepool.ActionFor(nil, t)))
		}
	}
	reg.MustRegister(m.EventsSeen, m.Drains, m.DrainDuration, m.TimeLeft, m.Uncordons, m.Approvals, m.Rejected, pastDeadline)
	return m
}
