package v1alpha1

// Names sluice writes on Nodes it manages for a NodePool. Every controller
// and the providers read them from here.
const (
	// FinalizerTermination is on every node of a pool whose provider sluice
	// runs: deleting such a node means cordon, drain, delete the machine,
	// then let the Node go.
	FinalizerTermination = "sluice.dev/termination"

	// AnnotationDisruption holds the disruption controller's record of a
	// node being replaced (JSON: reason, phase, replacement, since).
	AnnotationDisruption = "sluice.dev/disruption"

	// AnnotationDoNotDisrupt on a pod, node or NodePool keeps it from
	// voluntary disruption ("true", or on pods and nodes a duration).
	AnnotationDoNotDisrupt = "sluice.dev/do-not-disrupt"

	// LabelNodePool names the pool whose provider made the node.
	LabelNodePool = "sluice.dev/nodepool"
	// LabelCapacityType is on-demand or spot, on nodes a provider made.
	LabelCapacityType = "sluice.dev/capacity-type"
	// AnnotationImage is the template image a provider made the node from.
	AnnotationImage = "sluice.dev/image"
	// AnnotationTemplateHash is the hash of the template fields a Node does
	// not show (kubelet settings) the node was made from.
	AnnotationTemplateHash = "sluice.dev/template-hash"
	// AnnotationBootTime on a node sluice asked for as a replacement is how
	// long it took from the provider's request to the Node serving (Ready,
	// startup taints gone), as a Go duration: the upgrade forecast's
	// observed boot time.
	AnnotationBootTime = "sluice.dev/boot-time"
	// AnnotationMachine on a Node names the machine it is, when the Node's
	// name is not the machine's (a cloud's kubelet names its Node itself:
	// ip-10-0-3-7.ec2.internal). The controller writes it on a replacement
	// it found by its providerID.
	AnnotationMachine = "sluice.dev/machine"

	// AnnotationUpgrade on a NodePool pauses its upgrade (Paused) or
	// aborts it (Aborted); absent, the upgrade runs.
	AnnotationUpgrade = "sluice.dev/upgrade"
	// LabelUpgradeStatus marks a node an upgrade could not drain in time:
	// Blocked (put back into service) or Quarantined (left cordoned).
	LabelUpgradeStatus = "sluice.dev/upgrade-status"
	// AnnotationUpgradeImage, beside LabelUpgradeStatus, names the image
	// the node was blocked for: an upgrade to another image tries it again.
	AnnotationUpgradeImage = "sluice.dev/upgrade-image"
	// AnnotationUpgradeBlockedBy, beside LabelUpgradeStatus=Blocked, says
	// what blocked the node: DrainTimeout (it did not drain in time) or
	// HealthGate (its surge node on the new image never passed the gate).
	AnnotationUpgradeBlockedBy = "sluice.dev/upgrade-blocked-by"
)

// Values of LabelUpgradeStatus and AnnotationUpgrade.
const (
	UpgradeStatusBlocked     = "Blocked"
	UpgradeStatusQuarantined = "Quarantined"

	// Values of AnnotationUpgradeBlockedBy.
	BlockedByDrainTimeout = "DrainTimeout"
	BlockedByHealthGate   = "HealthGate"
	UpgradeControlPaused  = "Paused"
	UpgradeControlAborted = "Aborted"
)
