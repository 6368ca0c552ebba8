// Package promtest serves Prometheus's GET /api/v1/alerts for tests, shaped
// as Prometheus documents and writes it: the envelope
// {"status":"success","data":{"alerts":[...]}} with each alert's labels,
// annotations, state, activeAt, keepFiringSince (only when set) and value
// (a string such as "1e+00"); the error envelope
// {"status":"error","errorType":...,"error":...} with the HTTP status
// Prometheus's API gives that errorType; and the plain-text 503
// "Service Unavailable" Prometheus answers before it is ready or while it
// stops. Sources: https://prometheus.io/docs/prometheus/latest/querying/api/
// (sections "Format overview" and "Alerts") and Prometheus's
// web/api/v1/api.go (respondError) and web/web.go (testReady).
//
// What it cannot show:
//
//   - Alertmanager. Silences and inhibitions live there and never change
//     /api/v1/alerts: a silenced alert is listed, and blocks, as in kured.
//   - Rule evaluation. States change only when a test sets them: nothing
//     goes from pending to firing after a rule's for, resolves, or keeps
//     firing for keep_firing_for.
//   - Authentication, TLS and --web.route-prefix: it serves plain HTTP at
//     /api/v1/alerts and nowhere else.
//   - More than one server: not an HA pair that disagrees, not a querier
//     that merges others' alerts, and not the ALERTS series that kured
//     queries through /api/v1/query.
//   - Why a real server errs. Prometheus's own alerts handler has no error
//     of its own; the error envelope is what its API layer (and compatible
//     servers such as Thanos or Mimir) send for a failed request, and
//     FailWith sends it on demand.
package promtest
