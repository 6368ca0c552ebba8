package consolidation

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/pkg/simulate"
)

// Scope is the part of the cluster a pass over a pool must simulate to
// decide as it would over the whole cluster: the pool's members; every node
// the members' pods could move to by their nodeSelector; every node holding
// a pod with required inter-pod affinity or anti-affinity (whose terms reach
// across nodes, a zone's for instance); and the pods on those nodes. It is
// every node when a member's pod (other than a DaemonSet's, which does not
// move) has no nodeSelector, or spreads over nodes its selector does not
// select (nodeAffinityPolicy Ignore). A pass over one pool of a cluster of
// many then costs that pool's share of it, not the whole cluster's.
//
// Topology spread counts only nodes the pod's selector selects (the
// scheduler's default, nodeAffinityPolicy Honor): those are in the scope.
func Scope(members, all []*corev1.Node, podsOn func(node string) ([]*corev1.Pod, error)) ([]*corev1.Node, []*corev1.Pod, error) {
	return ScopeWith(members, all, podsOn, func(node string) (bool, error) {
		on, err := podsOn(node)
		return holdsInterPodTerms(on), err
	})
}

// ScopeWith is Scope with the nodes holding a pod with required inter-pod
// terms known from elsewhere (the controller keeps them as an index of its
// pod cache): a pool's scope then reads the pods of its own nodes and of
// those it reaches, not of every node in the cluster, once per pool.
func ScopeWith(members, all []*corev1.Node, podsOn func(node string) ([]*corev1.Pod, error), holdsTerms func(node string) (bool, error)) ([]*corev1.Node, []*corev1.Pod, error) {
	selectors, everywhere, err := reach(members, podsOn)
	if err != nil {
		return nil, nil, err
	}
	inPool := make(map[string]bool, len(members))
	for _, n := range members {
		inPool[n.Name] = true
	}
	var (
		nodes []*corev1.Node
		pods  []*corev1.Pod
	)
	for _, n := range all {
		in := everywhere || inPool[n.Name] || selectedByAny(n, selectors)
		if !in {
			if in, err = holdsTerms(n.Name); err != nil {
				return nil, nil, err
			}
		}
		if !in {
			continue
		}
		on, err := podsOn(n.Name)
		if err != nil {
			return nil, nil, err
		}
		nodes = append(nodes, n)
		pods = append(pods, on...)
	}
	return nodes, pods, nil
}

// BudgetsIn is the PodDisruptionBudgets that may select some of pods: those
// of their namespaces.
func BudgetsIn(pdbs []*policyv1.PodDisruptionBudget, pods []*corev1.Pod) []*policyv1.PodDisruptionBudget {
	namespaces := map[string]bool{}
	for _, p := range pods {
		namespaces[p.Namespace] = true
	}
	var out []*policyv1.PodDisruptionBudget
	for _, b := range pdbs {
		if namespaces[b.Namespace] {
			out = append(out, b)
		}
	}
	return out
}

// reach is the distinct nodeSelectors of the members' pods that may move,
// or everywhere when one of them may go to any node.
func reach(members []*corev1.Node, podsOn func(string) ([]*corev1.Pod, error)) ([]labels.Selector, bool, error) {
	seen := map[string]bool{}
	var out []labels.Selector
	for _, n := range members {
		pods, err := podsOn(n.Name)
		if err != nil {
			return nil, false, err
		}
		for _, p := range pods {
			if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "DaemonSet" {
				continue
			}
			if len(p.Spec.NodeSelector) == 0 || spreadsBeyondSelector(p) {
				return nil, true, nil
			}
			sel := labels.SelectorFromSet(p.Spec.NodeSelector)
			if key := sel.String(); !seen[key] {
				seen[key] = true
				out = append(out, sel)
			}
		}
	}
	return out, false, nil
}

func spreadsBeyondSelector(p *corev1.Pod) bool {
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.NodeAffinityPolicy != nil && *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore {
			return true
		}
	}
	return false
}

func selectedByAny(n *corev1.Node, selectors []labels.Selector) bool {
	set := labels.Set(n.Labels)
	for _, sel := range selectors {
		if sel.Matches(set) {
			return true
		}
	}
	return false
}

func holdsInterPodTerms(pods []*corev1.Pod) bool {
	return slices.ContainsFunc(pods, simulate.HasRequiredPodAffinity)
}
