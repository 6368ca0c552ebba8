// Package disruption decides, without a client, which of a pool's nodes
// sluice should replace of its own accord and which it must leave alone: a
// node has drifted from its pool's template (Drift), grown older than the
// pool's expireAfter (Expiry), or is held by a do-not-disrupt annotation or a
// paused pool (Protected). Candidates puts the first two together in the
// order a rollout takes them.
//
// Everything here is a pure function of the objects and the time passed in,
// so the disruption controller, `sluice explain` and a dry run reach the same
// answers from the same code. Maintenance is not voluntary disruption: a
// protected node is still drained when the cloud takes it.
package disruption

// The cluster contract this package reads. The provider writes the same
// names; they move to one shared file once both exist.
const (
	// LabelNodePool names the pool a node was made for.
	LabelNodePool = "sluice.dev/nodepool"
	// AnnotationImage is the image the provider made the node from.
	AnnotationImage = "sluice.dev/image"
	// AnnotationTemplateHash is the hash of the template settings that cannot
	// be read back from a Node (kubelet's), as the provider made the node.
	AnnotationTemplateHash = "sluice.dev/template-hash"
	// LabelCapacityType is how the provider bought the machine: spot or
	// on-demand, spelled as v1alpha1.CapacityType.
	LabelCapacityType = "sluice.dev/capacity-type"
)
