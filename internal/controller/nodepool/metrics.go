package nodepool

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Metrics are the NodePool controller's metrics, labelled by pool (never by
// node).
type Metrics struct {
	Ready              *prometheus.GaugeVec
	Drifted            *prometheus.GaugeVec
	Allowed            *prometheus.GaugeVec
	Decisions          *prometheus.CounterVec
	ProviderErrors     *prometheus.CounterVec
	ReplacementSeconds prometheus.Histogram
	// Consolidation counts decisions by outcome: decided, acted, dropped
	// (the cluster moved before revalidation), failed.
	Consolidation *prometheus.CounterVec
	// ConsolidationSeconds is how long one pass took to decide.
	ConsolidationSeconds prometheus.Histogram
	// UpgradeNodes counts a pool's nodes by where its upgrade has them;
	// UpgradePhase is 1 for the upgrade's phase.
	UpgradeNodes *prometheus.GaugeVec
	UpgradePhase *prometheus.GaugeVec
	// OrphansDeleted counts machines deleted because nothing accounted for
	// them (no Node, no record).
	OrphansDeleted *prometheus.CounterVec
	// Unhealthy counts the pool's nodes that look broken now;
	// RepairHalted is 1 while repairs are held, by why (TooManyUnhealthy,
	// PoolPaused); Repairs counts repairs by step and outcome; Reboots
	// counts reboots in place by reason; RebootWaiting is how long the
	// oldest node asking for a reboot has waited.
	Unhealthy     *prometheus.GaugeVec
	RepairHalted  *prometheus.GaugeVec
	Repairs       *prometheus.CounterVec
	Reboots       *prometheus.CounterVec
	RebootWaiting *prometheus.GaugeVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_nodepool_ready",
			Help: "1 when the NodePool can be applied, 0 when its Ready condition is False (see the condition's reason)."}, []string{"nodepool"}),
		Drifted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_nodes_drifted",
			Help: "Nodes of the pool that differ from its template."}, []string{"pool"}),
		Allowed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_budget_allowed",
			Help: "How many more of the pool's nodes may be disrupted now for the reason, under the budgets in force."}, []string{"pool", "reason"}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_disruption_decisions_total",
			Help: "Nodes chosen for disruption (replaced, or removed by consolidation), by pool and reason."}, []string{"pool", "reason"}),
		ProviderErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_provider_create_errors_total",
			Help: "Replacements the provider refused or that never joined, by pool and error code."}, []string{"pool", "code"}),
		ReplacementSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_provider_replacement_ready_seconds",
			Help:    "From asking the provider for a replacement machine to its node being Ready.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		Consolidation: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_consolidation_decisions_total",
			Help: "Consolidation commands by pool, kind (Empty, MultiNode, SingleNode) and outcome (decided, acted, dropped, failed)."}, []string{"pool", "kind", "outcome"}),
		ConsolidationSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_consolidation_pass_seconds",
			Help:    "How long one consolidation pass over a pool took to decide.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		UpgradeNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_upgrade_nodes",
			Help: "Nodes of the pool's image upgrade by state: total, upgraded, in_flight, blocked, quarantined."}, []string{"pool", "state"}),
		UpgradePhase: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_upgrade_phase",
			Help: "1 for the phase the pool's image upgrade is in (Progressing, Paused, Aborted, Succeeded, Failed), 0 for the others."}, []string{"pool", "phase"}),
		OrphansDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_orphaned_machines_deleted_total",
			Help: "Machines the pool's provider made that had no Node and no record naming them, long after they should have registered, deleted."}, []string{"pool"}),
		Unhealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_nodes_unhealthy",
			Help: "Nodes of the pool showing a condition its spec.repair names, tolerated yet or not."}, []string{"pool"}),
		RepairHalted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_repair_halted",
			Help: "1 while the pool's repairs are held: by its circuit breaker (reason TooManyUnhealthy) or a pause with broken nodes waiting (PoolPaused)."}, []string{"pool", "reason"}),
		Repairs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_repairs_total",
			Help: "Repairs by pool and the step that mended the node (Reboot) or was started (Replace is counted in sluice_disruption_decisions_total as Unhealthy)."}, []string{"pool", "step"}),
		Reboots: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_reboots_total",
			Help: "Nodes the provider was asked to reboot in place, by pool and reason (Unhealthy, RebootRequired)."}, []string{"pool", "reason"}),
		RebootWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_reboot_required_oldest_seconds",
			Help: "How long the pool's node that has asked for a reboot the longest has waited; 0 when none asks."}, []string{"pool"}),
	}
	reg.MustRegister(m.Unhealthy, m.RepairHalted, m.Repairs, m.Reboots, m.RebootWaiting)
	reg.MustRegister(m.Ready, m.Drifted, m.Allowed, m.Decisions, m.ProviderErrors, m.ReplacementSeconds, m.Consolidation, m.ConsolidationSeconds,
		m.UpgradeNodes, m.UpgradePhase, m.OrphansDeleted)
	return m
}

func (m *Metrics) observe(pool *v1alpha1.NodePool, st *v1alpha1.NodePoolStatus) {
	if m == nil {
		return
	}
	ready := 0.0
	if meta.IsStatusConditionTrue(st.Conditions, ConditionReady) {
		ready = 1
	}
	m.Ready.WithLabelValues(pool.Name).Set(ready)
	m.Drifted.WithLabelValues(pool.Name).Set(float64(st.Drifted))
	for _, a := range st.Allowed {
		m.Allowed.WithLabelValues(pool.Name, string(a.Reason)).Set(float64(a.Nodes))
	}
	m.observeUpgrade(pool.Name, st.Upgrade)
}

func (m *Metrics) observeUpgrade(pool string, u *v1alpha1.UpgradeStatus) {
	if u == nil {
		m.UpgradeNodes.DeletePartialMatch(prometheus.Labels{"pool": pool})
		m.UpgradePhase.DeletePartialMatch(prometheus.Labels{"pool": pool})
		return
	}
	for state, n := range map[string]int{"total": int(u.Nodes), "upgraded": int(u.Upgraded), "in_flight": int(u.InFlight),
		"blocked": len(u.Blocked), "quarantined": len(u.Quarantined)} {
		m.UpgradeNodes.WithLabelValues(pool, state).Set(float64(n))
	}
	for _, p := range []v1alpha1.UpgradePhase{v1alpha1.UpgradeProgressing, v1alpha1.UpgradePaused, v1alpha1.UpgradeAborted, v1alpha1.UpgradeSucceeded, v1alpha1.UpgradeFailed} {
		v := 0.0
		if p == u.Phase {
			v = 1
		}
		m.UpgradePhase.WithLabelValues(pool, string(p)).Set(v)
	}
}

func (m *Metrics) consolidation(pool, kind, outcome string) {
	if m != nil {
		m.Consolidation.WithLabelValues(pool, kind, outcome).Inc()
	}
}

func (m *Metrics) pass(d time.Duration) {
	if m != nil {
		m.ConsolidationSeconds.Observe(d.Seconds())
	}
}

func (m *Metrics) decided(pool string, r v1alpha1.DisruptionReason) {
	if m != nil {
		m.Decisions.WithLabelValues(pool, string(r)).Inc()
	}
}

func (m *Metrics) replaced(d time.Duration) {
	if m != nil {
		m.ReplacementSeconds.Observe(d.Seconds())
	}
}

func (m *Metrics) providerError(pool, code string) {
	if m != nil {
		m.ProviderErrors.WithLabelValues(pool, code).Inc()
	}
}

func (m *Metrics) forget(pool string) {
	if m == nil {
		return
	}
	m.Ready.DeleteLabelValues(pool)
	m.Drifted.DeleteLabelValues(pool)
	m.Allowed.DeletePartialMatch(prometheus.Labels{"pool": pool})
	m.Unhealthy.DeleteLabelValues(pool)
	m.RepairHalted.DeletePartialMatch(prometheus.Labels{"pool": pool})
	m.RebootWaiting.DeleteLabelValues(pool)
	m.observeUpgrade(pool, nil)
}

// nextBudgetChange is when the pool's budgets in force next change.
func nextBudgetChange(pool *v1alpha1.NodePool, now time.Time) (time.Time, bool) {
	t, ok, err := budget.NextChange(pool.DisruptionSpec().BudgetsOrDefault(), now)
	return t, ok && err == nil
}

func (m *Metrics) orphanDeleted(pool string) {
	if m != nil {
		m.OrphansDeleted.WithLabelValues(pool).Inc()
	}
}

// observeHealth sets the pool's unhealthy count and whether (and why) its
// repairs are held ("" when they are not).
func (m *Metrics) observeHealth(pool string, unhealthy int, held string) {
	if m == nil {
		return
	}
	m.Unhealthy.WithLabelValues(pool).Set(float64(unhealthy))
	for _, r := range []string{ReasonBreakerOpen, ReasonRepairPaused} {
		v := 0.0
		if r == held {
			v = 1
		}
		m.RepairHalted.WithLabelValues(pool, r).Set(v)
	}
}

func (m *Metrics) rebooted(pool string, r v1alpha1.DisruptionReason) {
	if m != nil {
		m.Reboots.WithLabelValues(pool, string(r)).Inc()
	}
}

func (m *Metrics) repaired(pool string, step v1alpha1.RepairStep) {
	if m != nil {
		m.Repairs.WithLabelValues(pool, string(step)).Inc()
	}
}

func (m *Metrics) rebootWaiting(pool string, d time.Duration) {
	if m != nil {
		m.RebootWaiting.WithLabelValues(pool).Set(d.Seconds())
	}
}
