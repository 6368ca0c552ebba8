package simulate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// scan is one reading of every node for pods of one node-local shape (the
// same requests, node name, selector, tolerations, node affinity and host
// ports), at one state of the cluster: which nodes the node-local filters
// pass, and the first failure of each of the others. While nothing is
// placed, removed, cordoned or uncordoned it holds, so pods alike that fail
// one after another, as a full cluster's do when a doctor asks "if this
// node were drained", read the nodes once between them, not once each.
// The inter-pod filters are not part of it: they are asked again of the
// nodes it passes, each time.
type scan struct {
	gen   uint64
	pass  []int          // positions of the nodes the local filters pass, in Place's order
	tally map[string]int // the others' first failures, counted
}

// scansKept bounds the scans a cluster keeps; past it, it starts again.
const scansKept = 1024

// scanFor returns the cluster's scan for pod, reading every node when the
// last one of its shape no longer holds.
func (c *Cluster) scanFor(pod *corev1.Pod, info *podInfo) *scan {
	if s := c.scanned(pod, info); s != nil {
		return s
	}
	s := &scan{gen: c.gen, tally: map[string]int{}}
	for i, ns := range c.nodes {
		if failures := local(pod, ns, info, true); len(failures) > 0 {
			s.tally[failures[0].Detail]++
			continue
		}
		s.pass = append(s.pass, i)
	}
	if c.scans == nil || len(c.scans) >= scansKept {
		c.scans = map[string]*scan{}
	}
	c.scans[localShape(pod, info)] = s
	return s
}

// scanned is the scan of pod's shape if one holds, nil if none does.
func (c *Cluster) scanned(pod *corev1.Pod, info *podInfo) *scan {
	if len(c.scans) == 0 {
		return nil
	}
	if s, ok := c.scans[localShape(pod, info)]; ok && s.gen == c.gen {
		return s
	}
	return nil
}

// localShape is a key for the pods every node-local filter treats alike.
func localShape(pod *corev1.Pod, info *podInfo) string {
	var b strings.Builder
	for _, r := range info.requestNames {
		fmt.Fprintf(&b, "%s=%d,", r, info.requests[r])
	}
	var nodeAffinity any
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		nodeAffinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	selector := make([]string, 0, len(pod.Spec.NodeSelector))
	for k, v := range pod.Spec.NodeSelector {
		selector = append(selector, k+"="+v)
	}
	slices.Sort(selector)
	fmt.Fprintf(&b, "|%s|%v|%v|%v|", pod.Spec.NodeName, selector, nodeAffinity, info.ports)
	// Each toleration by value: printing the list would print a
	// tolerationSeconds' address, and pods alike would never share a key.
	for _, t := range pod.Spec.Tolerations {
		fmt.Fprintf(&b, "%s/%s/%s/%s;", t.Key, t.Operator, t.Value, t.Effect)
	}
	return b.String()
}
