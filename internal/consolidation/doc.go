// Package consolidation decides, without a client, how a pool could run on
// fewer or cheaper nodes: the empty nodes to delete, several underutilized
// nodes whose pods fit elsewhere (plus at most one new, cheaper node), or one
// node to delete or replace with a cheaper type. Every decision is proven by
// pkg/simulate (kube-scheduler's filters) against the whole cluster, and is
// returned as a Command: a value the controller carries out, `sluice plan
// consolidation` prints and `sluice explain node` quotes, so what sluice says
// and what it does come from one function, Decide.
//
// The nodes Decide will not touch are returned with the reason (budget,
// PodDisruptionBudget, do-not-disrupt, recently changed, no cheaper fit,
// savings below minSavings...). docs/design/consolidation.md has the
// algorithm and what was rejected.
package consolidation
