package v1alpha1

// Values of contract.LabelUpgradeStatus and contract.AnnotationUpgrade.
const (
	UpgradeStatusBlocked     = "Blocked"
	UpgradeStatusQuarantined = "Quarantined"

	// Values of contract.AnnotationUpgradeBlockedBy.
	BlockedByDrainTimeout = "DrainTimeout"
	BlockedByHealthGate   = "HealthGate"
	UpgradeControlPaused  = "Paused"
	UpgradeControlAborted = "Aborted"
)
