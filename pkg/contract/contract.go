// Package contract names everything sluice writes on a cluster or a cloud
// under its own domain: every annotation, label, taint, finalizer and tag of
// sluice.dev and its subdomains (maintenance.sluice.dev, sandbox.sluice.dev),
// with what it holds and who writes it. It is the one place these keys are
// spelled: TestEveryKeyIsSpelledOnce fails when one is written anywhere else
// under cmd/, internal/ and pkg/. It imports nothing, so the API types, the
// drain library and every controller can share it.
//
// Values (what a label or annotation may say) live with the code that reads
// them; only the keys are here.
package contract

// Domain is sluice's own; every key below is under it or a subdomain.
const Domain = "sluice.dev"

// Prefix starts every key of the domain itself.
const Prefix = Domain + "/"

// The node-ownership protocol: who holds a node, and who cordoned it.
const (
	// AnnotationDrain on a Node holds the claim of the drain in progress
	// (JSON), renewed while it runs, so a crashed drain can be resumed and
	// two drains never fight over one node.
	AnnotationDrain = "sluice.dev/drain"
	// AnnotationCordonedBy on a Node records who in sluice cordoned it (the
	// CLI, a maintenance event, an upgrade); sluice only ever uncordons a
	// node whose owner it is, never a person's cordon.
	AnnotationCordonedBy = "sluice.dev/cordoned-by"
	// AnnotationDoNotDisrupt on a Pod, Node or NodePool keeps it from
	// voluntary disruption: "true", or on pods and nodes a duration from
	// their start or creation (drain.DoNotDisrupt reads it).
	AnnotationDoNotDisrupt = "sluice.dev/do-not-disrupt"
)

// NodePools and their nodes.
const (
	// FinalizerTermination is on every node of a pool whose provider sluice
	// runs: deleting such a node means cordon, drain, delete the machine,
	// then let the Node go.
	FinalizerTermination = "sluice.dev/termination"
	// AnnotationDisruption on a Node holds the NodePool controller's record
	// of the node being replaced (JSON: reason, phase, replacement, since).
	AnnotationDisruption = "sluice.dev/disruption"
	// LabelNodePool on a Node names the pool whose provider made it.
	LabelNodePool = "sluice.dev/nodepool"
	// LabelCapacityType on a Node a provider made: on-demand or spot.
	LabelCapacityType = "sluice.dev/capacity-type"
	// AnnotationImage on a Node is the template image a provider made it
	// from.
	AnnotationImage = "sluice.dev/image"
	// AnnotationTemplateHash on a Node is the hash of the template fields a
	// Node does not show (kubelet settings) it was made from.
	AnnotationTemplateHash = "sluice.dev/template-hash"
	// AnnotationBootTime on a replacement Node is how long it took from the
	// provider's request to serving, as a Go duration: the upgrade
	// forecast's observed boot time.
	AnnotationBootTime = "sluice.dev/boot-time"
	// AnnotationMachine on a Node names the machine it is when the Node's
	// name is not the machine's (a cloud's kubelet names its Node itself).
	AnnotationMachine = "sluice.dev/machine"
	// TaintConsolidation (PreferNoSchedule, value "next") steers new pods
	// away from the nodes a later consolidation round will take.
	TaintConsolidation = "sluice.dev/consolidation"
	// TaintUnregistered (NoExecute) is on a provider's new machine from its
	// kubelet's first registration (--register-with-taints, set in what the
	// provider launches) until the controller has given the Node its pool's
	// template labels and taints: no pod lands on a node that is not yet
	// what its pool says.
	TaintUnregistered = "sluice.dev/unregistered"
	// AnnotationRegistered on a Node records what registration applied (JSON:
	// the template's label keys and taints), so the controller knows the
	// fields it owns and never touches anyone else's.
	AnnotationRegistered = "sluice.dev/registered"
)

// Upgrades.
const (
	// AnnotationUpgrade on a NodePool pauses its upgrade (Paused) or aborts
	// it (Aborted); absent, the upgrade runs.
	AnnotationUpgrade = "sluice.dev/upgrade"
	// LabelUpgradeStatus on a Node an upgrade could not drain in time:
	// Blocked (put back into service) or Quarantined (left cordoned).
	LabelUpgradeStatus = "sluice.dev/upgrade-status"
	// AnnotationUpgradeImage, beside LabelUpgradeStatus, names the image the
	// node was blocked for: an upgrade to another image tries it again.
	AnnotationUpgradeImage = "sluice.dev/upgrade-image"
	// AnnotationUpgradeBlockedBy, beside LabelUpgradeStatus=Blocked, says
	// what blocked the node: DrainTimeout or HealthGate.
	AnnotationUpgradeBlockedBy = "sluice.dev/upgrade-blocked-by"
)

// Maintenance events: the agent writes the first two (and, once, the
// cordon), the controller the rest.
const (
	// AnnotationMaintenanceEvents on a Node holds the agent's latest report
	// of its metadata service's events (JSON).
	AnnotationMaintenanceEvents = "maintenance.sluice.dev/events"
	// AnnotationMaintenanceApproved on a Node lists, comma-separated, the
	// events the agent has approved with the platform.
	AnnotationMaintenanceApproved = "maintenance.sluice.dev/approved"
	// AnnotationMaintenanceApprove on a Node names the event the controller
	// asks the agent to approve, once the node is drained.
	AnnotationMaintenanceApprove = "sluice.dev/maintenance-approve"
	// AnnotationMaintenanceState on a Node holds the controller's record of
	// the event it is acting on (JSON).
	AnnotationMaintenanceState = "sluice.dev/maintenance"
	// TaintMaintenance (PreferNoSchedule, value: the event type) marks a
	// node cordoned for a maintenance event, for tools that read taints.
	TaintMaintenance = "sluice.dev/maintenance"
	// LabelEvictOnFreeze on a Pod opts it in to eviction before a Freeze.
	LabelEvictOnFreeze = "sluice.dev/evict-on-freeze"
	// AnnotationAWSLifecycleHooks on a Node holds the Auto Scaling lifecycle
	// actions waiting for it (JSON: event ID -> hook), so a restarted queue
	// reader completes them too.
	AnnotationAWSLifecycleHooks = "sluice.dev/aws-lifecycle-hooks"
	// AnnotationRebootRequired on a Node: the agent found its OS's
	// reboot-required sentinel; the value is when it first did (RFC 3339).
	// The agent removes it once the sentinel is gone (docs/design/health.md).
	AnnotationRebootRequired = "maintenance.sluice.dev/reboot-required"
)

// Node health (docs/design/health.md).
const (
	// AnnotationUnhealthy on a Node is the repair's debounced record of its
	// health (JSON): since when it has been unhealthy, by which condition,
	// and since when it has looked healthy again, so that a flap shorter
	// than the pool's flapGrace does not reset the clock and a restarted
	// controller agrees.
	AnnotationUnhealthy = "sluice.dev/unhealthy"
	// AnnotationRepairRebooted on a Node: when a repair last rebooted it
	// (RFC 3339); broken again while its health record lasts, the repair's
	// next step is not another reboot. The health record's writes never
	// touch it; it goes with that record.
	AnnotationRepairRebooted = "sluice.dev/repair-rebooted"
)

// Drain timelines, kept as ConfigMaps in the controller's namespace.
const (
	// LabelTimeline marks the ConfigMaps the timeline store owns.
	LabelTimeline = "sluice.dev/timeline"
	// AnnotationTimelineNode names the node drained.
	AnnotationTimelineNode = "sluice.dev/node"
	// AnnotationTimelineReason is why the node was drained.
	AnnotationTimelineReason = "sluice.dev/reason"
	// AnnotationTimelineEnded is when the drain ended, RFC 3339.
	AnnotationTimelineEnded = "sluice.dev/ended"
)

// Tags the aws-asg provider writes on every EC2 instance it launches.
const (
	// TagMachine names the machine (the Node's name, or the record's).
	TagMachine = "sluice.dev/machine"
	// TagNodePool names the pool the instance was launched for.
	TagNodePool = "sluice.dev/nodepool"
	// TagAutoscalingGroup records the group the instance is launched for,
	// so an attach cut short is finished by the next Create.
	TagAutoscalingGroup = "sluice.dev/autoscaling-group"
)

// The sandbox's Cluster API infrastructure provider (internal/sandbox/capi);
// never on a real cluster.
const (
	// FinalizerSandboxMachine keeps a KwokMachine until its Node is gone.
	FinalizerSandboxMachine = "infrastructure.sandbox.sluice.dev/node"
)

// The sandbox's simulated kubelets (internal/sandbox/kwok.yaml); never on a
// real cluster.
const (
	// SandboxExitAfterSeconds on a Pod: after deletion its process exits
	// this many seconds later (or when the grace period ends, if sooner).
	SandboxExitAfterSeconds = "sandbox.sluice.dev/exit-after-seconds"
	// SandboxReadyAfterSeconds on a Pod: Running with Ready=False as soon as
	// it is bound, Ready this many seconds later.
	SandboxReadyAfterSeconds = "sandbox.sluice.dev/ready-after-seconds"
	// SandboxCompleteAfterSeconds on a Pod: it succeeds this many seconds
	// after it starts running.
	SandboxCompleteAfterSeconds = "sandbox.sluice.dev/complete-after-seconds"
	// SandboxNotReady on a Node: its kubelet reports NotReady while the
	// annotation is present.
	SandboxNotReady = "sandbox.sluice.dev/not-ready"
	// SandboxFaultSurvivesReboot on a Node: a reboot through the kwok
	// provider leaves its fault (not-ready, a bad condition) in place, as a
	// broken disk would; without it a reboot clears the fault.
	SandboxFaultSurvivesReboot = "sandbox.sluice.dev/fault-survives-reboot"
	// SandboxRebootedAt on a Node: when the kwok provider last rebooted it
	// (RFC 3339).
	SandboxRebootedAt = "sandbox.sluice.dev/rebooted-at"
)

// What uninstalling sluice (internal/uninstall) takes off a Node is its
// working state, the keys its controllers steer by; what only describes a
// node stays, and so does what people write. TestEveryNodeKeyIsSorted fails
// when a key is in neither list and not named as a person's or another
// object's, so a new key cannot be forgotten by uninstall.

// NodeWorkingTaints are the taints sluice puts on nodes and only sluice
// lifts.
func NodeWorkingTaints() []string {
	return []string{TaintMaintenance, TaintConsolidation, TaintUnregistered}
}

// On Cluster API's Machines (docs/design/cluster-api.md).
const (
	// ConditionMachineDrained is the condition sluice keeps on a Machine
	// whose deletion it holds with its pre-drain hook: False with the
	// blocker while it waits or drains, True once it released the Machine.
	ConditionMachineDrained = "sluice.dev/Drained"
)

// NodeWorkingAnnotations steer sluice's controllers: claims, records and
// states, and the agent's reports and approvals.
func NodeWorkingAnnotations() []string {
	return []string{
		AnnotationDrain,
		AnnotationDisruption,
		AnnotationMaintenanceState,
		AnnotationMaintenanceEvents,
		AnnotationMaintenanceApproved,
		AnnotationMaintenanceApprove,
		AnnotationAWSLifecycleHooks,
		AnnotationRebootRequired,
		AnnotationUnhealthy,
		AnnotationRepairRebooted,
		AnnotationUpgrade,
		AnnotationUpgradeImage,
		AnnotationUpgradeBlockedBy,
	}
}

// NodeWorkingLabels report sluice's work in progress on a node.
func NodeWorkingLabels() []string { return []string{LabelUpgradeStatus} }

// NodeDescriptionKeys (labels and annotations) only describe a node: its
// pool, the machine it is, the image and template it was registered with.
// They are inert without sluice, and a reinstalled sluice needs them to find
// a Node's machine.
func NodeDescriptionKeys() []string {
	return []string{LabelNodePool, LabelCapacityType, AnnotationMachine, AnnotationImage, AnnotationTemplateHash, AnnotationBootTime, AnnotationRegistered}
}
