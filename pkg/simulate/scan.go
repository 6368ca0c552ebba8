package simulate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// scan is one reading of every node for pods of one node-local shape (the
// same requests, node name, selector, tolerations, node affinity and host
// ports): which nodes the node-local filters pass, and the first failure of
// each of the others. A scan is brought up to date by reading again only
// the nodes that changed since it was made (Cluster.changes), so pods alike
// asked about one after another read the nodes once between them, not once
// each: a doctor asking "if this node were drained" of 5,000 nodes changes
// two nodes between questions (the last one put back, the next one
// emptied), and reads those two. The inter-pod filters are not part of a
// scan: they are asked again of the nodes it passes, each time.
type scan struct {
	gen   uint64         // the cluster's gen it is up to date with
	first []int32        // per node position: its first local failure (Cluster.details), 0 when it passes
	pass  []int          // positions of the nodes the local filters pass, in Place's order
	tally map[string]int // the others' first failures, counted
}

// scansKept bounds the scans a cluster keeps; past it, it starts again.
const scansKept = 1024

// touch notes a change to a node: the scans read it again.
func (c *Cluster) touch(ns *nodeState) {
	c.gen++
	if len(c.scans) == 0 {
		c.changes = c.changes[:0]
		return
	}
	c.changes = append(c.changes, ns.pos)
	// Past a few readings of every node, a scan that far behind is read
	// again in full: the oldest half of the log goes.
	if keep := 4*len(c.nodes) + 64; len(c.changes) > keep {
		c.changes = append(c.changes[:0], c.changes[len(c.changes)-keep/2:]...)
	}
}

// scanFor returns the cluster's scan for pod, up to date.
func (c *Cluster) scanFor(pod *corev1.Pod, info *podInfo) *scan {
	key := localShape(pod, info)
	if s := c.scans[key]; s != nil && c.catchUp(s, pod, info) {
		return s
	}
	s := &scan{gen: c.gen, first: make([]int32, len(c.nodes)), tally: map[string]int{}}
	for i, ns := range c.nodes {
		if id := c.localFirst(pod, ns, info); id != 0 {
			s.first[i] = id
			s.tally[c.details[id]]++
			continue
		}
		s.pass = append(s.pass, i)
	}
	if c.scans == nil || len(c.scans) >= scansKept {
		c.scans = map[string]*scan{}
		c.changes = c.changes[:0]
	}
	c.scans[key] = s
	return s
}

// scanned is the scan of pod's shape, up to date, if the cluster keeps
// one; nil if it does not.
func (c *Cluster) scanned(pod *corev1.Pod, info *podInfo) *scan {
	if len(c.scans) == 0 {
		return nil
	}
	if s := c.scans[localShape(pod, info)]; s != nil && c.catchUp(s, pod, info) {
		return s
	}
	return nil
}

// catchUp reads again the nodes changed since the scan, and says false
// when the log no longer reaches back that far.
func (c *Cluster) catchUp(s *scan, pod *corev1.Pod, info *podInfo) bool {
	if s.gen == c.gen {
		return true
	}
	behind := c.gen - s.gen
	if behind > uint64(len(c.changes)) {
		return false
	}
	done := map[int]bool{}
	for _, i := range c.changes[uint64(len(c.changes))-behind:] {
		if done[i] {
			continue
		}
		done[i] = true
		s.set(i, c.localFirst(pod, c.nodes[i], info), c.details)
	}
	s.gen = c.gen
	return true
}

// set records node i's first local failure, keeping pass and tally.
func (s *scan) set(i int, id int32, details []string) {
	old := s.first[i]
	if old == id {
		return
	}
	s.first[i] = id
	if old == 0 {
		if k, found := slices.BinarySearch(s.pass, i); found {
			s.pass = slices.Delete(s.pass, k, k+1)
		}
	} else if s.tally[details[old]]--; s.tally[details[old]] == 0 {
		delete(s.tally, details[old])
	}
	if id == 0 {
		k, _ := slices.BinarySearch(s.pass, i)
		s.pass = slices.Insert(s.pass, k, i)
	} else {
		s.tally[details[id]]++
	}
}

// localFirst is the node's first local failure for the pod, as a position
// in c.details, or 0 when the node passes.
func (c *Cluster) localFirst(pod *corev1.Pod, ns *nodeState, info *podInfo) int32 {
	failures := local(pod, ns, info, true)
	if len(failures) == 0 {
		return 0
	}
	d := failures[0].Detail
	if id, ok := c.detail[d]; ok {
		return id
	}
	if c.detail == nil {
		c.detail = map[string]int32{}
		c.details = []string{""} // 0 is a pass
	}
	id := int32(len(c.details)) //nolint:gosec // G115: the failures a filter names are a handful of messages
	c.details = append(c.details, d)
	c.detail[d] = id
	return id
}

// localShape is a key for the pods every node-local filter treats alike.
func localShape(pod *corev1.Pod, info *podInfo) string {
	var b strings.Builder
	for _, r := range info.requestNames {
		b.WriteString(string(r))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(info.requests[r], 10))
		b.WriteByte(',')
	}
	b.WriteByte('|')
	b.WriteString(pod.Spec.NodeName)
	b.WriteByte('|')
	selector := make([]string, 0, len(pod.Spec.NodeSelector))
	for k, v := range pod.Spec.NodeSelector {
		selector = append(selector, k+"="+v)
	}
	slices.Sort(selector)
	b.WriteString(strings.Join(selector, ","))
	b.WriteByte('|')
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		fmt.Fprintf(&b, "%v", a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}
	b.WriteByte('|')
	for _, p := range info.ports {
		fmt.Fprintf(&b, "%s/%s/%d,", p.protocol, p.ip, p.port)
	}
	b.WriteByte('|')
	// Each toleration by value: printing the list would print a
	// tolerationSeconds' address, and pods alike would never share a key.
	for _, t := range pod.Spec.Tolerations {
		b.WriteString(t.Key)
		b.WriteByte('/')
		b.WriteString(string(t.Operator))
		b.WriteByte('/')
		b.WriteString(t.Value)
		b.WriteByte('/')
		b.WriteString(string(t.Effect))
		b.WriteByte(';')
	}
	return b.String()
}
