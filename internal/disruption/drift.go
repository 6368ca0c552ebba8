package disruption

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider/registry"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Difference is one way a node differs from its pool's template.
type Difference struct {
	// Field is what differs: labels[key], taints[key=value:Effect],
	// instanceType, image, capacity or kubelet.
	Field string `json:"field"`
	// Want is what the template asks for, Got what the node has ("" when it
	// has none).
	Want string `json:"want"`
	Got  string `json:"got"`
	// Left says why sluice does not replace the node for this difference
	// ("" when it does): replacing it would not remove the difference.
	Left string `json:"left,omitempty"`
}

// String reads as a line of kubectl describe: "image: want X, node has Y".
func (d Difference) String() string {
	want, got := d.Want, d.Got
	if want == "" {
		want = `""`
	}
	if got == "" {
		got = "none"
	}
	line := fmt.Sprintf("%s: want %s, node has %s", d.Field, want, got)
	if d.Left != "" {
		line += " (left alone: " + d.Left + ")"
	}
	return line
}

// PoolDrift is Drift for a member of pool, each difference that replacing
// the node would not remove marked Left: the image, on a pool whose provider
// cannot choose one (its replacement would boot the same image, drifted at
// birth, and be replaced again, without end).
//
// A node still waiting for registration (contract.TaintUnregistered) has not
// drifted yet: registration is about to give it the template, and a real
// kubelet (a cloud's, Cluster API's) registers without the pool's labels.
func PoolDrift(node *corev1.Node, pool *v1alpha1.NodePool, hash string) []Difference {
	diffs := Drift(node, pool.Spec.Template, hash)
	if !pool.Spec.Provider.Manages() {
		return diffs // sluice makes no machines: it only reports
	}
	if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == contract.TaintUnregistered }) {
		return nil
	}
	images := registry.Images(pool.Spec.Provider.Name)
	if images.Sets() {
		return diffs
	}
	for i := range diffs {
		if diffs[i].Field == "image" {
			diffs[i].Left = fmt.Sprintf("provider %s cannot set a machine's image: %s", pool.Spec.Provider.Name, images.Unsupported)
		}
	}
	return diffs
}

// Replaceable says whether any of diffs is a reason to replace the node.
func Replaceable(diffs []Difference) bool {
	return slices.ContainsFunc(diffs, func(d Difference) bool { return d.Left == "" })
}

// Cloud labels drift reads on nodes sluice did not make.
const (
	labelAKSNodeImage    = "kubernetes.azure.com/node-image-version"
	labelEKSNodeImage    = "eks.amazonaws.com/nodegroup-image"
	labelKarpenterCapTy  = "karpenter.sh/capacity-type"
	labelAKSPriority     = "kubernetes.azure.com/scalesetpriority"
	labelEKSCapacityType = "eks.amazonaws.com/capacityType"
)

// Drift compares node with its pool's template t and returns every
// difference, sorted by Field; nil when the node is what t describes, or t is
// nil. hash is the template's hash of what cannot be read from a Node
// (kubelet settings), computed by the caller; "" skips that comparison.
//
// Drift only reports what it can see: a node that does not say its instance
// type, image or capacity type has not drifted in that respect. Taints on the
// node that the template does not name never count (startup, cordon and
// maintenance taints come and go), and neither do template taints on keys
// that Kubernetes or sluice manage (node.kubernetes.io/, sluice.dev/), nor
// the template's startupTaints.
func Drift(node *corev1.Node, t *v1alpha1.NodeTemplate, hash string) []Difference {
	if node == nil || t == nil {
		return nil
	}
	var diffs []Difference
	for _, check := range []func(*corev1.Node, *v1alpha1.NodeTemplate) []Difference{
		labelDrift, taintDrift, instanceTypeDrift, imageDrift, capacityDrift,
	} {
		diffs = append(diffs, check(node, t)...)
	}
	diffs = append(diffs, kubeletDrift(node, hash)...)
	slices.SortStableFunc(diffs, func(a, b Difference) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Want, b.Want))
	})
	return diffs
}

func labelDrift(node *corev1.Node, t *v1alpha1.NodeTemplate) []Difference {
	var diffs []Difference
	for key, want := range t.Labels {
		got, ok := node.Labels[key]
		if ok && got == want {
			continue
		}
		diffs = append(diffs, Difference{Field: "labels[" + key + "]", Want: want, Got: got})
	}
	return diffs
}

func taintDrift(node *corev1.Node, t *v1alpha1.NodeTemplate) []Difference {
	var diffs []Difference
	for _, want := range t.Taints {
		if managedTaint(want.Key) || slices.ContainsFunc(t.StartupTaints, func(s corev1.Taint) bool { return s.MatchTaint(&want) }) {
			// A taint listed as a startup taint too is expected to go away.
			continue
		}
		if slices.ContainsFunc(node.Spec.Taints, func(got corev1.Taint) bool {
			return got.Key == want.Key && got.Value == want.Value && got.Effect == want.Effect
		}) {
			continue
		}
		var same []string
		for _, got := range node.Spec.Taints {
			if got.Key == want.Key {
				same = append(same, got.ToString())
			}
		}
		diffs = append(diffs, Difference{Field: "taints[" + want.ToString() + "]", Want: want.ToString(), Got: strings.Join(same, ", ")})
	}
	return diffs
}

// managedTaint says whether Kubernetes or sluice put taints with key on a
// node and take them off again, so the template cannot promise them.
func managedTaint(key string) bool {
	return strings.HasPrefix(key, "node.kubernetes.io/") || strings.HasPrefix(key, contract.Prefix)
}

func instanceTypeDrift(node *corev1.Node, t *v1alpha1.NodeTemplate) []Difference {
	got := node.Labels[corev1.LabelInstanceTypeStable]
	if len(t.InstanceTypes) == 0 || got == "" || slices.Contains(t.InstanceTypes, got) {
		return nil
	}
	return []Difference{{Field: "instanceType", Want: strings.Join(t.InstanceTypes, " or "), Got: got}}
}

func imageDrift(node *corev1.Node, t *v1alpha1.NodeTemplate) []Difference {
	got := nodeImage(node)
	if t.Image == "" || got == "" || sameImage(t.Image, got) {
		return nil
	}
	return []Difference{{Field: "image", Want: t.Image, Got: got}}
}

// galleryImageVersion is an Azure Compute Gallery image version's ID, the
// form azure-vmss takes an AKS node image in.
var galleryImageVersion = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/galleries/([^/]+)/images/([^/]+)/versions/([^/]+)$`)

// sameImage says whether a node whose image is got runs the template's
// image want: the same name (Azure resource IDs in any case), or an AKS
// node's kubernetes.azure.com/node-image-version label
// (<gallery>-<image>-<version>, e.g. AKSUbuntu-2204gen2containerd-202411.12.0)
// naming the gallery image version want is the ID of.
func sameImage(want, got string) bool {
	if got == want || strings.HasPrefix(want, "/") && strings.EqualFold(got, want) {
		return true
	}
	if m := galleryImageVersion.FindStringSubmatch(want); m != nil {
		return got == m[1]+"-"+m[2]+"-"+m[3]
	}
	return false
}

// nodeImage is the image the node runs, "" when it does not say: the
// provider's annotation on nodes sluice made, else the cloud's label.
func nodeImage(node *corev1.Node) string {
	if v := node.Annotations[AnnotationImage]; v != "" {
		return v
	}
	return cmp.Or(node.Labels[labelAKSNodeImage], node.Labels[labelEKSNodeImage])
}

func capacityDrift(node *corev1.Node, t *v1alpha1.NodeTemplate) []Difference {
	got := nodeCapacity(node)
	if t.Capacity == "" || got == "" || got == t.Capacity {
		return nil
	}
	return []Difference{{Field: "capacity", Want: string(t.Capacity), Got: string(got)}}
}

// nodeCapacity is how the node's machine was bought, "" when no label says
// so in words sluice knows (Karpenter's reserved, EKS's CAPACITY_BLOCK).
func nodeCapacity(node *corev1.Node) v1alpha1.CapacityType {
	l := node.Labels
	for _, key := range []string{LabelCapacityType, labelKarpenterCapTy} {
		switch v := v1alpha1.CapacityType(l[key]); v {
		case v1alpha1.CapacitySpot, v1alpha1.CapacityOnDemand:
			return v
		}
	}
	if v, ok := l[labelAKSPriority]; ok {
		if v == "spot" {
			return v1alpha1.CapacitySpot
		}
		return v1alpha1.CapacityOnDemand // AKS calls it regular.
	}
	switch l[labelEKSCapacityType] {
	case "SPOT":
		return v1alpha1.CapacitySpot
	case "ON_DEMAND":
		return v1alpha1.CapacityOnDemand
	}
	return ""
}

// kubeletDrift compares the hash the provider stamped on the node with the
// template's; a node sluice did not make carries none and cannot drift here.
func kubeletDrift(node *corev1.Node, hash string) []Difference {
	got := node.Annotations[AnnotationTemplateHash]
	if hash == "" || got == "" || got == hash {
		return nil
	}
	return []Difference{{Field: "kubelet", Want: hash, Got: got}}
}
