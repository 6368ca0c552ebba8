// Package simulate answers, without a cluster, whether pods can be placed on
// nodes: the feasibility half of kube-scheduler (its filter plugins), not the
// scoring half. It is what `sluice doctor` asks before a drain ("if this node
// emptied now, would its pods fit elsewhere?") and what consolidation and
// upgrade planning will ask later, so it is built to place tens of thousands
// of pods in well under a second.
//
// Supported, with kube-scheduler's semantics: resource requests (cpu, memory,
// ephemeral-storage, extended resources, the pods count; init containers,
// sidecars and overhead counted as the scheduler counts them), node
// unschedulable, spec.nodeName, taints and tolerations, nodeSelector and
// required node affinity, host ports, required inter-pod affinity and
// anti-affinity (both directions) on any topology key, and hard
// (DoNotSchedule) topology spread constraints. Not modelled: volumes and
// their zones, DRA claims, preferred (soft) terms, which never make a pod
// unschedulable.
package simulate
