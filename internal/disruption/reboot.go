package disruption

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Waiting is a pool member whose OS asked for a reboot, and since when.
type Waiting struct {
	Node  *corev1.Node
	Since time.Time
}

// RebootWaiting lists the members whose OS asked for a reboot (the agent's
// contract.AnnotationRebootRequired) and no disruption has taken yet,
// longest waiting first: the order the RebootRequired method takes them,
// and `sluice plan reboots` forecasts them. replacements are the members
// made to replace others (View.Replacements), never rebooted meanwhile.
func RebootWaiting(members []*corev1.Node, replacements map[string]bool, now time.Time) []Waiting {
	var out []Waiting
	for _, n := range members {
		raw, ok := n.Annotations[contract.AnnotationRebootRequired]
		if !ok || replacements[n.Name] || n.DeletionTimestamp != nil {
			continue
		}
		if _, recorded := n.Annotations[contract.AnnotationDisruption]; recorded {
			continue
		}
		since, err := time.Parse(time.RFC3339, raw)
		if err != nil || since.After(now) {
			since = now
		}
		out = append(out, Waiting{Node: n, Since: since})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

// BlockingPod names the first of the pods that holds its node's reboot
// (spec.reboot.blockingPodSelectors, kured's --blocking-pod-selector), ""
// when none does. A pod on its way out does not hold it.
func BlockingPod(spec *v1alpha1.RebootSpec, pods []*corev1.Pod) (string, error) {
	for i := range spec.BlockingPodSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&spec.BlockingPodSelectors[i])
		if err != nil {
			return "", fmt.Errorf("spec.reboot.blockingPodSelectors[%d]: %w", i, err)
		}
		for _, p := range pods {
			if p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels)) {
				return fmt.Sprintf("pod %s/%s matches blockingPodSelectors[%d] (%s)", p.Namespace, p.Name, i, sel), nil
			}
		}
	}
	return "", nil
}
