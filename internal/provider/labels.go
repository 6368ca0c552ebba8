package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Labels and annotations a provider writes on every Node it makes. Drift
// detection reads them back, so every provider must write them alike.
const (
	// LabelNodePool names the pool that made the node.
	LabelNodePool = contract.LabelNodePool
	// LabelCapacityType is the node's CapacityType: on-demand or spot.
	LabelCapacityType = contract.LabelCapacityType
	// LabelInstanceType is the well-known label of the machine's size.
	LabelInstanceType = "node.kubernetes.io/instance-type"
	// LabelZone is the well-known label of the machine's zone.
	LabelZone = "topology.kubernetes.io/zone"
	// LabelRegion is the well-known label of the machine's region.
	LabelRegion = "topology.kubernetes.io/region"

	// AnnotationImage is the template image the node was made from; a
	// label could not hold every image name (an AMI ID would do, an AKS
	// node image version with its dots and length may not).
	AnnotationImage = contract.AnnotationImage
	// AnnotationTemplateHash is TemplateHash of the template the node was
	// made from: it stands for what cannot be read from a Node.
	AnnotationTemplateHash = contract.AnnotationTemplateHash
)

// Unregistered is the taint every provider's new machine registers with
// (its kubelet's --register-with-taints): no pod lands on it until the
// controller has given it its pool's template and lifted the taint.
var Unregistered = corev1.Taint{Key: contract.TaintUnregistered, Value: "true", Effect: corev1.TaintEffectNoExecute}

// TemplateHash hashes what of a template cannot be read back from a Node (its
// kubelet settings), to be stored as AnnotationTemplateHash and compared for
// drift. It is 16 hex digits over the settings' JSON: Go writes struct fields
// in declaration order and map keys sorted, so the JSON is canonical, and
// every field is omitempty, so adding a setting leaves the hash of templates
// that do not set it alone. A nil template or kubelet hashes like an empty one.
func TemplateHash(t *v1alpha1.NodeTemplate) string {
	kubelet := &v1alpha1.KubeletSpec{}
	if t != nil && t.Kubelet != nil {
		kubelet = t.Kubelet
	}
	b, err := json.Marshal(kubelet)
	if err != nil {
		// KubeletSpec holds plain values; Marshal cannot fail on it.
		panic("provider: marshalling kubelet settings: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
