// Package azurearm holds what sluice's Azure providers share: a
// subscription-wide pause after Azure Resource Manager throttles a request
// (Throttles, RetryAfter), the mapping of the refusals every Resource
// Manager API gives alike (Refusal, IsNotFound), and a store of
// per-machine records kept in one ConfigMap (Store), which the providers
// use for the claims they write before they ask Azure for a machine whose
// name Azure picks.
package azurearm
