package termination

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the queue's Prometheus metrics.
type Metrics struct {
	Disrupting prometheus.Gauge
	Queued     prometheus.Gauge
}

// NewMetrics registers the queue's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Disrupting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_termination_disrupting_nodes",
			Help: "Nodes being drained now, for every reason, the drains of others (a person's sluice drain, seen by its claim on the node) included."}),
		Queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_termination_queued_nodes",
			Help: "Nodes waiting for room under the cross-node caps."}),
	}
	reg.MustRegister(m.Disrupting, m.Queued)
	return m
}
