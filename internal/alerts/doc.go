// Package alerts says which of Prometheus's active alerts hold a reboot.
//
// The reboot method asks it before it takes a node: a pool's
// spec.reboot.prometheus names a Prometheus, and while an alert that blocks
// is pending or firing there, no node of the pool is rebooted. The knobs are
// kured's, with kured's meaning, so a kured configuration carries over:
//
//	kured flag                  Checker field
//	--prometheus-url            URL
//	--alert-filter-regexp       Filter: alertnames it matches do not block
//	--alert-filter-match-only   MatchOnly: only alertnames Filter matches block
//	--alert-firing-only         FiringOnly: pending alerts do not block
//
// Two things differ from kured, both towards holding: an alert without an
// alertname label blocks (kured skips it), and an answer sluice cannot read
// whole is an error, never an empty list.
//
// Kured reads the ALERTS series through /api/v1/query; sluice reads
// GET /api/v1/alerts, the alerts of the rules that server evaluates. On a
// single Prometheus the two agree. A querier that merges ALERTS series
// federated or remote-written from other servers answers the query with
// their alerts too, but may list only its own (or none) on /api/v1/alerts:
// point URL at the server that evaluates the rules.
//
// Package promtest serves /api/v1/alerts as Prometheus documents it, for
// tests.
package alerts
