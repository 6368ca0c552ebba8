package simulate

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// index counts the placed pods that match a selector in some namespaces, per
// topology domain (when topologyKey is set) or per node. It is built from every
// placed pod when first asked for, and kept current as pods are added.
type index struct {
	namespaces  map[string]bool // nil: every namespace
	selector    labels.Selector
	topologyKey string
	counts      map[string]int // domain (or node name) -> pods
	total       int
}

func (ix *index) matches(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	if ix.namespaces != nil && !ix.namespaces[pod.Namespace] {
		return false
	}
	return ix.selector.Matches(labels.Set(pod.Labels))
}

// add counts a pod placed on ns (delta 1) or removed from it (delta -1).
func (ix *index) add(pod *corev1.Pod, ns *nodeState, delta int) {
	if !ix.matches(pod) {
		return
	}
	key := ns.node.Name
	if ix.topologyKey != "" {
		var ok bool
		if key, ok = ns.node.Labels[ix.topologyKey]; !ok {
			return
		}
	}
	ix.counts[key] += delta
	ix.total += delta
}

// indexFor returns the index for namespaces, selector and topology key ("" to
// count per node), building it on first use.
func (c *Cluster) indexFor(namespaces map[string]bool, sel labels.Selector, topologyKey string) *index {
	nsKeys := make([]string, 0, len(namespaces))
	for n := range namespaces {
		nsKeys = append(nsKeys, n)
	}
	sort.Strings(nsKeys)
	key := strings.Join(nsKeys, ",") + "\x00" + sel.String() + "\x00" + topologyKey
	if namespaces == nil {
		key = "*" + key
	}
	if ix, ok := c.indexes[key]; ok {
		return ix
	}
	ix := &index{namespaces: namespaces, selector: sel, topologyKey: topologyKey, counts: map[string]int{}}
	for _, p := range c.pods {
		if ns, ok := c.byName[p.Spec.NodeName]; ok {
			ix.add(p, ns, 1)
		}
	}
	c.indexes[key] = ix
	c.buckets.file(ix)
	return ix
}

// indexBuckets file indexes under a label a pod must carry to match them
// ("app=web"), so adding or removing a pod touches only the indexes it might
// count in, not every index the cluster has built.
type indexBuckets struct {
	byLabel map[string][]*index // key=value -> indexes
	any     []*index            // selectors that require no particular value
}

func (b *indexBuckets) file(ix *index) {
	if reqs, ok := ix.selector.Requirements(); ok {
		for _, r := range reqs {
			if op := r.Operator(); op == selection.Equals || op == selection.DoubleEquals || op == selection.In {
				if b.byLabel == nil {
					b.byLabel = map[string][]*index{}
				}
				for _, v := range r.Values().UnsortedList() {
					b.byLabel[r.Key()+"="+v] = append(b.byLabel[r.Key()+"="+v], ix)
				}
				return
			}
		}
	}
	b.any = append(b.any, ix)
}

// each calls f with every index pod might count in, once each (a pod has one
// value per label, so it meets an index in one bucket at most).
func (b *indexBuckets) each(pod *corev1.Pod, f func(*index)) {
	for _, ix := range b.any {
		f(ix)
	}
	if len(b.byLabel) == 0 {
		return
	}
	for k, v := range pod.Labels {
		for _, ix := range b.byLabel[k+"="+v] {
			f(ix)
		}
	}
}

// termScope resolves an affinity term's namespaces, relative to the pod that
// carries it: its own namespace by default, the listed ones, or every
// namespace for a namespaceSelector. (A non-empty namespaceSelector needs the
// namespaces' labels, which a Cluster does not hold; it is taken as every
// namespace, which can only make the answer stricter.)
func termScope(owner *corev1.Pod, term corev1.PodAffinityTerm) map[string]bool {
	if term.NamespaceSelector != nil {
		return nil
	}
	if len(term.Namespaces) == 0 {
		return map[string]bool{owner.Namespace: true}
	}
	out := map[string]bool{}
	for _, n := range term.Namespaces {
		out[n] = true
	}
	return out
}

// termSelector is the term's label selector with matchLabelKeys and
// mismatchLabelKeys resolved against the owner's labels. A nil selector
// matches nothing.
func termSelector(owner *corev1.Pod, sel *metav1.LabelSelector, match, mismatch []string) labels.Selector {
	if sel == nil {
		return labels.Nothing()
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return labels.Nothing()
	}
	for _, k := range match {
		if v, ok := owner.Labels[k]; ok {
			if r, err := labels.NewRequirement(k, selection.In, []string{v}); err == nil {
				s = s.Add(*r)
			}
		}
	}
	for _, k := range mismatch {
		if v, ok := owner.Labels[k]; ok {
			if r, err := labels.NewRequirement(k, selection.NotIn, []string{v}); err == nil {
				s = s.Add(*r)
			}
		}
	}
	return s
}

func hasRequiredAnti(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// checkPodAffinity applies the InterPodAffinity filter: the pod's required
// affinity and anti-affinity, and the required anti-affinity of pods already
// placed, which must not be violated by the newcomer either.
func (c *Cluster) checkPodAffinity(pod *corev1.Pod, ns *nodeState, info *podInfo) []Failure {
	a := pod.Spec.Affinity
	node := ns.node
	if a != nil && a.PodAffinity != nil {
		for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			scope := termScope(pod, term)
			sel := termSelector(pod, term.LabelSelector, term.MatchLabelKeys, term.MismatchLabelKeys)
			ix := c.indexFor(scope, sel, term.TopologyKey)
			domain, ok := node.Labels[term.TopologyKey]
			if ok && ix.counts[domain] > 0 {
				continue
			}
			// The first pod of a group that wants to be with its own kind may
			// go anywhere the rest of its rules allow.
			if ok && ix.total == 0 && (scope == nil || scope[pod.Namespace]) && sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			return []Failure{{ReasonPodAffinity, "node(s) didn't match pod affinity rules"}}
		}
	}
	if a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			domain, ok := node.Labels[term.TopologyKey]
			if !ok {
				continue
			}
			ix := c.indexFor(termScope(pod, term), termSelector(pod, term.LabelSelector, term.MatchLabelKeys, term.MismatchLabelKeys), term.TopologyKey)
			if ix.counts[domain] > 0 {
				return []Failure{{ReasonPodAffinity, "node(s) didn't match pod anti-affinity rules"}}
			}
		}
	}
	for _, g := range c.repellers(pod, info) {
		if domain, ok := node.Labels[g.topologyKey]; ok && g.counts[domain] > 0 {
			return []Failure{{ReasonPodAffinity, "node(s) didn't satisfy existing pods anti-affinity rules"}}
		}
	}
	return nil
}

// antiGroup is one required anti-affinity term as carried by placed pods (the
// same term, resolved against the same namespace, from every replica of a
// workload), with how many of them sit in each topology domain.
type antiGroup struct {
	scope       map[string]bool
	selector    labels.Selector
	topologyKey string
	counts      map[string]int
}

// addAnti counts a placed pod's anti-affinity terms (delta 1), or a removed
// pod's (delta -1).
func (c *Cluster) addAnti(pod *corev1.Pod, ns *nodeState, delta int) {
	for _, term := range pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		domain, ok := ns.node.Labels[term.TopologyKey]
		if !ok {
			continue
		}
		scope := termScope(pod, term)
		sel := termSelector(pod, term.LabelSelector, term.MatchLabelKeys, term.MismatchLabelKeys)
		key := fmt.Sprintf("%v\x00%s\x00%s", scope, sel.String(), term.TopologyKey)
		g, ok := c.anti[key]
		if !ok {
			g = &antiGroup{scope: scope, selector: sel, topologyKey: term.TopologyKey, counts: map[string]int{}}
			c.anti[key] = g
		}
		g.counts[domain] += delta
	}
}

// repellers are the placed pods' anti-affinity groups that select pod.
func (c *Cluster) repellers(pod *corev1.Pod, info *podInfo) []*antiGroup {
	if !info.repelledDone {
		info.repelledDone = true
		for _, g := range c.anti {
			if (g.scope == nil || g.scope[pod.Namespace]) && g.selector.Matches(labels.Set(pod.Labels)) {
				info.repelledBy = append(info.repelledBy, g)
			}
		}
	}
	return info.repelledBy
}

// checkSpread applies the PodTopologySpread filter to the pod's hard
// (DoNotSchedule) constraints.
func (c *Cluster) checkSpread(pod *corev1.Pod, ns *nodeState, info *podInfo) []Failure {
	if info.spreadCounts == nil {
		c.countSpread(pod, info)
	}
	for i, s := range info.spread {
		domain, ok := ns.node.Labels[s.TopologyKey]
		if !ok {
			return []Failure{{ReasonTopologySpread, "node(s) didn't match pod topology spread constraints (missing required label)"}}
		}
		self := 0
		if termSelector(pod, s.LabelSelector, s.MatchLabelKeys, nil).Matches(labels.Set(pod.Labels)) {
			self = 1
		}
		if info.spreadCounts[i][domain]+self-info.spreadLowest[i] > int(s.MaxSkew) {
			return []Failure{{ReasonTopologySpread, "node(s) didn't match pod topology spread constraints"}}
		}
	}
	return nil
}

// countSpread counts, per constraint, the matching pods in each eligible
// domain and the least of them, once per placement.
func (c *Cluster) countSpread(pod *corev1.Pod, info *podInfo) {
	for _, s := range info.spread {
		sel := termSelector(pod, s.LabelSelector, s.MatchLabelKeys, nil)
		perNode := c.indexFor(map[string]bool{pod.Namespace: true}, sel, "")
		counts := map[string]int{}
		for _, cand := range c.nodes {
			d, ok := cand.node.Labels[s.TopologyKey]
			if !ok || !c.spreadEligible(pod, cand, info, s) {
				continue
			}
			counts[d] += perNode.counts[cand.node.Name]
		}
		lowest := -1
		for _, n := range counts {
			if lowest < 0 || n < lowest {
				lowest = n
			}
		}
		if lowest < 0 || (s.MinDomains != nil && len(counts) < int(*s.MinDomains)) {
			lowest = 0
		}
		info.spreadCounts = append(info.spreadCounts, counts)
		info.spreadLowest = append(info.spreadLowest, lowest)
	}
}

// spreadEligible says whether a node's domain counts for a spread constraint:
// by default nodes the pod's node affinity excludes do not (Honor), and taints
// are ignored (Ignore), as in kube-scheduler.
func (c *Cluster) spreadEligible(pod *corev1.Pod, ns *nodeState, info *podInfo, s corev1.TopologySpreadConstraint) bool {
	if s.NodeAffinityPolicy == nil || *s.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		if ok, _ := info.affinity.Match(ns.node); !ok {
			return false
		}
	}
	if s.NodeTaintsPolicy != nil && *s.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(ns.node.Spec.Taints, pod.Spec.Tolerations, hardTaint); untolerated {
			return false
		}
	}
	return true
}
