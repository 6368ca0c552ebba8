// Package audit watches a sandbox cluster and checks, as each change is
// committed, the promises sluice makes to the people who run it: no PDB taken
// below its floor, no pool disrupted beyond its budget, no person's cordon
// undone, no do-not-disrupt pod or node voluntarily disrupted, no machine
// deleted before its pods left, one replacement per node, and no node
// touched because of metadata sluice rejected.
//
// It shares none of sluice's logic: its budget arithmetic, PDB floors and
// "out of service" are written here from the user documentation
// (docs/pools.md, docs/maintenance.md, docs/drain.md), and it imports only
// the API types, so a bug in the controller cannot agree with itself.
//
// It orders changes seen on different watches (a pod's deletion and its
// node's) by resourceVersion, which a single etcd makes one sequence. That
// holds in the sandbox, not as an API guarantee: this is a test tool.
//
//	a, err := audit.Start(ctx, cfg, t.Logf)
//	... run the scenario ...
//	sum := a.Finish()
//	t.Log(sum)
//	if sum.Violations() > 0 { t.Fatal(...) }
//
// See docs/design/fault-proof.md.
package audit
