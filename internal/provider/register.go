package provider

import (
	"encoding/json"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// AnnotationScaleDownDisabled is cluster-autoscaler's: a node carrying it
// "true" is never scaled down by it. sluice sets it on the nodes of a pool it
// consolidates, so the two never take the same node.
const AnnotationScaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

// Applied is what registration gave a Node, kept on it as
// contract.AnnotationRegistered: the fields sluice owns there.
type Applied struct {
	// Labels are the template's label keys it set.
	Labels []string `json:"labels,omitempty"`
	// Taints are the template's taints (and startup taints) it added, as
	// key=value:Effect.
	Taints []string `json:"taints,omitempty"`
	// Image is the image the cloud reported for the machine, when it did.
	Image string `json:"image,omitempty"`
	// Late says the Node joined without contract.TaintUnregistered: pods
	// may have landed on it before its labels and taints did.
	Late bool      `json:"late,omitempty"`
	At   time.Time `json:"at"`
}

// Registered reads what registration applied to the node; false when it has
// not registered it.
func Registered(n *corev1.Node) (Applied, bool) {
	raw, ok := n.Annotations[contract.AnnotationRegistered]
	if !ok {
		return Applied{}, false
	}
	var a Applied
	_ = json.Unmarshal([]byte(raw), &a) // unreadable still means registered
	return a, true
}

// Tainted says whether the node still waits for registration.
func Tainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == contract.TaintUnregistered })
}

// Apply gives n (a copy the caller patches from) its pool's template: every
// template label, every template taint and startup taint it lacks (a taint
// of the same key and effect takes the template's value), the image the
// cloud reported when the node does not say one, cluster-autoscaler's
// scale-down-disabled when sluice consolidates the pool, and removes
// contract.TaintUnregistered, all in the one change. It returns what it
// applied.
func Apply(n *corev1.Node, pool *v1alpha1.NodePool, image string, now time.Time) Applied {
	a := Applied{Late: !Tainted(n), At: now}
	if t := pool.Spec.Template; t != nil {
		keys := make([]string, 0, len(t.Labels))
		for k := range t.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[k] = t.Labels[k]
			a.Labels = append(a.Labels, k)
		}
		for _, want := range append(slices.Clone(t.Taints), t.StartupTaints...) {
			if want.Key == contract.TaintUnregistered {
				continue
			}
			i := slices.IndexFunc(n.Spec.Taints, func(got corev1.Taint) bool { return got.Key == want.Key && got.Effect == want.Effect })
			switch {
			case i < 0:
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: want.Key, Value: want.Value, Effect: want.Effect})
			case n.Spec.Taints[i].Value != want.Value:
				n.Spec.Taints[i].Value = want.Value
			default:
				continue // the kubelet registered it already
			}
			a.Taints = append(a.Taints, want.ToString())
		}
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == contract.TaintUnregistered })
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	if image != "" && n.Annotations[contract.AnnotationImage] == "" {
		n.Annotations[contract.AnnotationImage] = image
		a.Image = image
	}
	if pool.Consolidates() {
		n.Annotations[AnnotationScaleDownDisabled] = "true"
	}
	b, err := json.Marshal(a)
	if err != nil { // strings and a time always marshal
		panic(err)
	}
	n.Annotations[contract.AnnotationRegistered] = string(b)
	return a
}
