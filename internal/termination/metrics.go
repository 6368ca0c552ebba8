package termination

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Metrics are the queue's Prometheus metrics.
type Metrics struct {
	Disrupting     prometheus.Gauge
	Queued         prometheus.Gauge
	PoolDisrupting *prometheus.GaugeVec
	Evictions      *prometheus.CounterVec
	Forced         *prometheus.CounterVec
	Blocked        *prometheus.GaugeVec
	// overdue is set by the queue it is given to: a gauge read at scrape time.
	overdue func() float64
}

// NewMetrics registers the queue's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Disrupting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_termination_disrupting_nodes",
			Help: "Nodes being drained now, for every reason, the drains of others (a person's sluice drain, seen by its claim on the node) included."}),
		Queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_termination_queued_nodes",
			Help: "Nodes waiting for room under the cross-node caps."}),
		PoolDisrupting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_termination_pool_disrupting_nodes",
			Help: "Nodes being drained now, by NodePool (\"\" for nodes no pool selects): what the pool's budgets are spending."}, []string{"pool"}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_drain_evictions_total",
			Help: "Pods the controller's drains asked to leave and the API server accepted, by why their node is drained."}, []string{"reason"}),
		Forced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_drain_forced_deletions_total",
			Help: "Pods a budget or do-not-disrupt still held that were deleted because the node's deadline left no time to wait, by why their node is drained."}, []string{"reason"}),
		Blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_drain_blocked_pods",
			Help: "Pods the controller's drains cannot move now, by blocker (PDBBlocked, PDBDeadlock, DoNotDisrupt, ...; see docs/drain.md)."}, []string{"blocker"}),
	}
	overdue := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_termination_overdue_nodes",
		Help: "Nodes still draining after their event's deadline: the platform takes them whatever is left on them."},
		func() float64 {
			if m.overdue == nil {
				return 0
			}
			return m.overdue()
		})
	// Every known reason starts at zero, so the first drain's evictions show
	// as a rate (a counter that appears at its first value shows none).
	for _, r := range append([]v1alpha1.DisruptionReason{v1alpha1.DisruptionReason(ReasonMaintenance)}, v1alpha1.DisruptionReasons...) {
		m.Evictions.WithLabelValues(string(r))
		m.Forced.WithLabelValues(string(r))
	}
	reg.MustRegister(m.Disrupting, m.Queued, m.PoolDisrupting, m.Evictions, m.Forced, m.Blocked, overdue)
	return m
}
