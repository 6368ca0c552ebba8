// Package disruption decides, without a client, which of a pool's nodes
// sluice should replace of its own accord and which it must leave alone: a
// node has drifted from its pool's template (Drift), grown older than the
// pool's expireAfter (Expiry), or is held by a do-not-disrupt annotation or a
// paused pool (Protected). Candidates puts the first two together in the
// order a rollout takes them, and Explain tells, for one node, what all of
// them and the pool's budgets make of it (`sluice explain node`).
//
// Everything here is a pure function of the objects and the time passed in,
// so the disruption controller, `sluice explain` and a dry run reach the same
// answers from the same code. Maintenance is not voluntary disruption: a
// protected node is still drained when the cloud takes it.
package disruption

import "github.com/sluice-dev/sluice/pkg/contract"

// The cluster contract this package reads, as the providers write it
// (pkg/apis/v1alpha1 holds every such name).
const (
	LabelNodePool          = contract.LabelNodePool
	AnnotationImage        = contract.AnnotationImage
	AnnotationTemplateHash = contract.AnnotationTemplateHash
	LabelCapacityType      = contract.LabelCapacityType
)
