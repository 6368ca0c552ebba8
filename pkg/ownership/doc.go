// Package ownership is how sluice's drains, controllers and agents share a
// node without stepping on each other or on people: who holds a node being
// drained (the drain claim, a lease in contract.AnnotationDrain that its
// drain renews), and who cordoned it (contract.AnnotationCordonedBy: a
// person's `sluice drain`, or a maintenance event), so that only the owner
// of a cordon takes it back and a person's cordon is never lifted by sluice.
//
// pkg/drain takes and renews claims through it; the maintenance controller,
// the agent, the budgets and `sluice explain` read them. It imports no other
// sluice package but pkg/contract.
package ownership
