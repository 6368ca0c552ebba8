// Package budget is a pool's disruption budget ledger: how many more of a
// pool's nodes may be disrupted now, for a reason, and when that changes.
//
// It reads nothing from the cluster. Callers count the pool's nodes that are
// out of service with Disrupting, which reads only the node itself, so every
// replica and every restart of the controller counts the same; Allowed then
// weighs the count against the budgets active now, and NextChange says when
// a scheduled budget next opens or closes, so the caller knows when to look
// again. Validate judges what the API server cannot: that a schedule parses,
// fires, and is read in a time zone that exists.
package budget
