package doctor

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// podIndex finds the pods a label selector matches without testing every pod
// of the cluster against every budget: budgets nearly always name a label's
// value (app=web), so pods are indexed by namespace and by the values of the
// label keys selectors ask for, one key at a time as they are first asked.
type podIndex struct {
	pods        []corev1.Pod
	byNamespace map[string][]int
	byLabel     map[string]map[string][]int // label key -> namespace/value -> pods, in listed order
}

func newPodIndex(pods []corev1.Pod) *podIndex {
	x := &podIndex{pods: pods, byNamespace: map[string][]int{}, byLabel: map[string]map[string][]int{}}
	for i := range pods {
		x.byNamespace[pods[i].Namespace] = append(x.byNamespace[pods[i].Namespace], i)
	}
	return x
}

// selected returns the pods of namespace that sel matches, in listed order.
func (x *podIndex) selected(namespace string, sel labels.Selector) []corev1.Pod {
	candidates := x.byNamespace[namespace]
	if reqs, ok := sel.Requirements(); ok {
		for _, r := range reqs {
			if op := r.Operator(); op == selection.Equals || op == selection.DoubleEquals || op == selection.In {
				candidates = nil
				values := x.withLabel(r.Key())
				for _, v := range r.Values().List() {
					candidates = append(candidates, values[namespace+"/"+v]...)
				}
				sort.Ints(candidates)
				break
			}
		}
	}
	var out []corev1.Pod
	for _, i := range candidates {
		if sel.Matches(labels.Set(x.pods[i].Labels)) {
			out = append(out, x.pods[i])
		}
	}
	return out
}

func (x *podIndex) withLabel(key string) map[string][]int {
	if m, ok := x.byLabel[key]; ok {
		return m
	}
	m := map[string][]int{}
	for i := range x.pods {
		if v, ok := x.pods[i].Labels[key]; ok {
			k := x.pods[i].Namespace + "/" + v
			m[k] = append(m[k], i)
		}
	}
	x.byLabel[key] = m
	return m
}
