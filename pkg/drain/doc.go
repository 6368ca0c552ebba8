// Package drain empties Kubernetes nodes: it cordons them, decides what each
// pod may do, evicts pods in priority order under their PodDisruptionBudgets,
// waits for them by watching, honours a deadline, and reports for every pod
// that did not leave a stable reason code and what to change.
//
// The library never prints. Progress goes to an Observer; the result is a
// Report that callers render as they like. See docs/design/drain-engine.md.
//
// A drain holds the node it drains by a claim, and owns the cordon it
// places, through pkg/ownership, which every other reader of those marks
// (controllers, agents, `sluice explain`) uses too.
package drain
