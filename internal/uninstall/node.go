// Package uninstall removes what sluice put on a cluster to do its work, and
// nothing a person asked for (docs/design/uninstall.md): it stops the
// controller and the agents first, then takes sluice's finalizer, taints,
// cordons and operational annotations off every node, and deletes the
// objects sluice keeps in its namespace. `sluice uninstall` and the chart's
// pre-delete hook run it.
package uninstall

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// NodeChange is what uninstalling takes off one node, and what it leaves on
// purpose.
type NodeChange struct {
	Node        string   `json:"node"`
	Finalizer   bool     `json:"finalizer,omitempty"`
	Taints      []string `json:"taints,omitempty"`
	Uncordoned  string   `json:"uncordoned,omitempty"` // the owner of the cordon lifted
	Annotations []string `json:"annotations,omitempty"`
	Labels      []string `json:"labels,omitempty"`
	// Kept says what stays and why (a person's cordon).
	Kept string `json:"kept,omitempty"`
	// MidDrain: sluice was draining the node (it held its drain claim);
	// the drain stops where it is.
	MidDrain bool `json:"midDrain,omitempty"`
}

// Empty says whether the node carried nothing of sluice's.
func (c NodeChange) Empty() bool {
	return !c.Finalizer && len(c.Taints) == 0 && c.Uncordoned == "" && len(c.Annotations) == 0 && len(c.Labels) == 0
}

// Clean takes sluice's working state off a copy of the node and says what
// it took. A cordon is lifted only when sluice's controllers placed it: one
// a person placed (kubectl cordon, no owner) or asked for (`sluice drain`,
// owner cli) stays.
func Clean(n *corev1.Node) (*corev1.Node, NodeChange) {
	out := n.DeepCopy()
	c := NodeChange{Node: n.Name}
	if i := slices.Index(out.Finalizers, contract.FinalizerTermination); i >= 0 {
		out.Finalizers = slices.Delete(out.Finalizers, i, i+1)
		c.Finalizer = true
	}
	out.Spec.Taints = slices.DeleteFunc(out.Spec.Taints, func(t corev1.Taint) bool {
		if slices.Contains(contract.NodeWorkingTaints(), t.Key) {
			c.Taints = append(c.Taints, t.ToString())
			return true
		}
		return false
	})
	_, c.MidDrain = n.Annotations[contract.AnnotationDrain]
	switch owner := ownership.CordonedBy(n); {
	case owner != "" && owner != ownership.OwnerCLI:
		out.Spec.Unschedulable = false
		c.Uncordoned = owner
		delete(out.Annotations, contract.AnnotationCordonedBy)
		c.Annotations = append(c.Annotations, contract.AnnotationCordonedBy)
	case owner == ownership.OwnerCLI:
		c.Kept = "cordoned by a person's sluice drain (" + contract.AnnotationCordonedBy + "=" + owner + "): uncordon it yourself when it should take pods"
	case n.Spec.Unschedulable:
		c.Kept = "cordoned outside sluice: left as it is"
	default:
		if _, stale := out.Annotations[contract.AnnotationCordonedBy]; stale { // a cordon someone already lifted
			delete(out.Annotations, contract.AnnotationCordonedBy)
			c.Annotations = append(c.Annotations, contract.AnnotationCordonedBy)
		}
	}
	for _, k := range contract.NodeWorkingAnnotations() {
		if _, ok := out.Annotations[k]; ok {
			delete(out.Annotations, k)
			c.Annotations = append(c.Annotations, k)
		}
	}
	for _, k := range contract.NodeWorkingLabels() {
		if _, ok := out.Labels[k]; ok {
			delete(out.Labels, k)
			c.Labels = append(c.Labels, k)
		}
	}
	return out, c
}
