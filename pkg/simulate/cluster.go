package simulate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Reason names the scheduler filter that rejects a pod on a node, with the
// plugin names kube-scheduler uses.
type Reason string

// Reasons.
const (
	ReasonUnschedulable  Reason = "NodeUnschedulable"
	ReasonNodeName       Reason = "NodeName"
	ReasonTaint          Reason = "TaintToleration"
	ReasonNodeAffinity   Reason = "NodeAffinity"
	ReasonPorts          Reason = "NodePorts"
	ReasonResources      Reason = "NodeResourcesFit"
	ReasonPodAffinity    Reason = "InterPodAffinity"
	ReasonTopologySpread Reason = "PodTopologySpread"
)

// Failure is why one node cannot take a pod: the filter, and the words the
// scheduler would use ("Insufficient cpu").
type Failure struct {
	Reason Reason
	Detail string
}

// Cluster is a set of nodes and the pods bound to them. Place adds pods,
// Remove takes them away and Cordon closes nodes; Snapshot undoes all three,
// so one Cluster can answer many "what if" questions. A Cluster is not safe
// for concurrent use.
type Cluster struct {
	nodes   []*nodeState
	byName  map[string]*nodeState
	pods    []*corev1.Pod         // every placed pod, for building indexes
	loads   []load                // what each of pods holds on its node, to give back
	slots   map[string]int        // namespace/name -> position in pods
	indexes map[string]*index     // matching-pod counts, built on first use
	buckets indexBuckets          // the same indexes, by the label a pod must carry to count
	cursors map[string]int        // pod shape -> first node that may still fit it
	byLabel map[string][]int      // "key=value" -> positions of the nodes with that label, built on first use
	anti    map[string]*antiGroup // placed pods' required anti-affinity terms, grouped
	journal []change              // what to undo, while a snapshot is open
	gen     uint64                // counts changes to the nodes (touch)
	changes []int                 // the position of the node each change since gen-len(changes) was to
	scans   map[string]*scan      // node-local shape -> its last scan (scan.go)
	details []string              // the failures scans name, each once
	detail  map[string]int32      // details' positions
	open    int                   // snapshots not yet restored
	infos   map[podKey]*podInfo   // what each pod is, for the cluster's life (infoOf)
}

// podKey names a pod as its facts depend on it: its UID, and the node its
// spec names (the NodeName filter reads it).
type podKey struct {
	uid  types.UID
	node string
}

type nodeState struct {
	node        *corev1.Node
	pos         int  // in Cluster.nodes
	cordoned    bool // by Cordon; the Node object is the caller's and stays untouched
	allocatable map[corev1.ResourceName]int64
	requested   map[corev1.ResourceName]int64
	pods        int
	ports       map[string]int // host ports in use, with how many pods hold each
}

// load is what a pod takes of its node.
type load struct {
	requests map[corev1.ResourceName]int64
	ports    []portKey
}

// change is one step Snapshot's restore undoes.
type change struct {
	node     *nodeState
	pod      *corev1.Pod // added, or removed when removed is set
	load     load        // a removed pod's, to put back
	removed  bool
	cordon   bool // the node was cordoned
	uncordon bool // the node was uncordoned
}

// NewCluster builds a cluster from nodes and the pods bound to them (pods with
// no spec.nodeName, or on unknown nodes, and finished pods are ignored).
func NewCluster(nodes []*corev1.Node, pods []*corev1.Pod) *Cluster {
	c := &Cluster{byName: map[string]*nodeState{}, slots: map[string]int{}, indexes: map[string]*index{}, cursors: map[string]int{}, anti: map[string]*antiGroup{}}
	for _, n := range nodes {
		ns := &nodeState{node: n, pos: len(c.nodes), allocatable: quantities(n.Status.Allocatable), requested: map[corev1.ResourceName]int64{}, ports: map[string]int{}}
		c.nodes = append(c.nodes, ns)
		c.byName[n.Name] = ns
	}
	for _, p := range pods {
		if ns, ok := c.byName[p.Spec.NodeName]; ok && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			c.add(p, ns, loadOf(p))
		}
	}
	return c
}

// Check returns why pod cannot be placed on the named node; nil means it fits.
func (c *Cluster) Check(pod *corev1.Pod, node string) []Failure {
	ns, ok := c.byName[node]
	if !ok {
		return []Failure{{Reason: ReasonNodeName, Detail: "node " + node + " does not exist"}}
	}
	return c.check(pod, ns, c.infoOf(pod))
}

// Place finds the first node that can take pod, binds the pod there (it counts
// for later pods), and returns the node's name. When no node fits it returns
// "" and the scheduler-style summary of why, e.g.
// "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) were unschedulable".
// It reads every node; pods alike that fail one after another, nothing
// placed between them, share one reading (scan.go).
func (c *Cluster) Place(pod *corev1.Pod) (string, string) {
	info := c.infoOf(pod)
	s := c.scanFor(pod, info)
	var refused []string
	for _, i := range s.pass {
		failures := c.interPod(pod, c.nodes[i], info)
		if len(failures) == 0 {
			return c.bind(pod, i, info), ""
		}
		refused = append(refused, failures[0].Detail)
	}
	tally := make(map[string]int, len(s.tally)+1)
	for detail, n := range s.tally {
		tally[detail] = n
	}
	for _, detail := range refused {
		tally[detail]++
	}
	return "", summarize(len(c.nodes), tally)
}

// Fit is Place without the reasons: it binds the pod to the first node
// that takes it, in Place's order, and returns its name, or "" when none
// does. It tries only the nodes that carry every label of the pod's
// nodeSelector (an index, built on first use): on a cluster of many pools a
// pool's pods are checked against the pool's nodes, not every node.
func (c *Cluster) Fit(pod *corev1.Pod) string {
	info := c.infoOf(pod)
	if s := c.scanned(pod, info); s != nil {
		for _, i := range s.pass {
			if len(c.interPod(pod, c.nodes[i], info)) == 0 {
				return c.bind(pod, i, info)
			}
		}
		return ""
	}
	start := 0
	if info.shape != "" {
		start = c.cursors[info.shape]
	}
	positions := c.selected(pod.Spec.NodeSelector)
	from, count := 0, len(c.nodes)-start
	if positions != nil {
		from = sort.SearchInts(positions, start)
		count = len(positions) - from
	}
	for k := range count {
		i := start + k
		if positions != nil {
			i = positions[from+k]
		}
		if len(c.check(pod, c.nodes[i], info)) == 0 {
			return c.bind(pod, i, info)
		}
		// Every node from the cursor to this one failed this shape: those
		// the selector skipped lack its labels, which never change here.
		if info.shape != "" {
			c.cursors[info.shape] = i + 1
		}
	}
	return ""
}

// bind places a copy of pod on the i-th node, which takes it.
func (c *Cluster) bind(pod *corev1.Pod, i int, info *podInfo) string {
	ns := c.nodes[i]
	if info.shape != "" {
		c.cursors[info.shape] = i
	}
	// A copy of the struct with its node set: the cluster only reads a
	// pod, so what the copy shares with the caller's stays as it is.
	copied := *pod
	copied.Spec.NodeName = ns.node.Name
	placed := &copied
	c.add(placed, ns, info.load)
	c.record(change{node: ns, pod: placed})
	return ns.node.Name
}

// selected is the positions, in order, of the nodes carrying every label of
// selector; nil for an empty selector (every node may do). It answers from
// the label with the fewest nodes; check still tests the others.
func (c *Cluster) selected(selector map[string]string) []int {
	if len(selector) == 0 {
		return nil
	}
	var best []int
	for k, v := range selector {
		if pos := c.labelled(k, v); best == nil || len(pos) < len(best) {
			best = pos
		}
	}
	return best
}

// labelled is the positions of the nodes labelled k=v, indexed once.
func (c *Cluster) labelled(k, v string) []int {
	key := k + "=" + v
	if pos, ok := c.byLabel[key]; ok {
		return pos
	}
	pos := []int{}
	for i, ns := range c.nodes {
		if got, ok := ns.node.Labels[k]; ok && got == v {
			pos = append(pos, i)
		}
	}
	if c.byLabel == nil {
		c.byLabel = map[string][]int{}
	}
	c.byLabel[key] = pos
	return pos
}

// Remove takes the pod with this namespace and name off its node, as if it
// were deleted, and reports whether the cluster held it. Pods are known by
// namespace and name, as in the API server.
func (c *Cluster) Remove(namespace, name string) bool {
	i, ok := c.slots[namespace+"/"+name]
	if !ok {
		return false
	}
	pod, l := c.pods[i], c.loads[i]
	ns := c.byName[pod.Spec.NodeName]
	c.remove(pod, ns)
	c.record(change{node: ns, pod: pod, load: l, removed: true})
	return true
}

// Cordon marks the named node unschedulable, as kubectl cordon does, and
// reports whether the node exists.
func (c *Cluster) Cordon(node string) bool {
	ns, ok := c.byName[node]
	if !ok {
		return false
	}
	if !ns.cordoned {
		ns.cordoned = true
		c.touch(ns)
		c.record(change{node: ns, cordon: true})
	}
	return true
}

// Uncordon opens the named node again (one closed by Cordon, not a Node
// whose spec says unschedulable), and reports whether the node exists. A
// node that opens may take pods it refused, so every pod shape's scan starts
// over.
func (c *Cluster) Uncordon(node string) bool {
	ns, ok := c.byName[node]
	if !ok {
		return false
	}
	if ns.cordoned {
		ns.cordoned = false
		c.touch(ns)
		c.cursors = map[string]int{}
		c.record(change{node: ns, uncordon: true})
	}
	return true
}

// Snapshot returns a function that puts the cluster back as it is now,
// undoing every Place, Remove, Cordon and Uncordon since; asking "if this node were
// drained" of each node in turn then costs the pods that move, not a new
// Cluster. Snapshots nest: restore the inner one first.
func (c *Cluster) Snapshot() (restore func()) {
	mark := len(c.journal)
	cursors := make(map[string]int, len(c.cursors))
	for k, v := range c.cursors {
		cursors[k] = v
	}
	c.open++
	done := false
	return func() {
		if done {
			return
		}
		done = true
		for i := len(c.journal) - 1; i >= mark; i-- {
			switch ch := c.journal[i]; {
			case ch.cordon:
				ch.node.cordoned = false
				c.touch(ch.node)
			case ch.uncordon:
				ch.node.cordoned = true
				c.touch(ch.node)
			case ch.removed:
				c.add(ch.pod, ch.node, ch.load)
			default:
				c.remove(ch.pod, ch.node)
			}
		}
		c.journal = c.journal[:mark]
		// The cluster is as it was, so the cursors that held then hold again.
		c.cursors = cursors
		c.open--
	}
}

func (c *Cluster) record(ch change) {
	if c.open > 0 {
		c.journal = append(c.journal, ch)
	}
}

// Nodes returns the node names in the order Place tries them.
func (c *Cluster) Nodes() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.node.Name
	}
	return out
}

func (c *Cluster) check(pod *corev1.Pod, ns *nodeState, info *podInfo) []Failure {
	if out := local(pod, ns, info, false); len(out) > 0 {
		return out
	}
	return c.interPod(pod, ns, info)
}

// local is the filters that read only the node and what is on it; with
// first, it stops at the first failure, the one Place tallies.
func local(pod *corev1.Pod, ns *nodeState, info *podInfo, first bool) []Failure {
	var out []Failure
	fail := func(f Failure) bool {
		out = append(out, f)
		return first
	}
	n := ns.node
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != n.Name && fail(Failure{ReasonNodeName, "node(s) didn't match the requested node name"}) {
		return out
	}
	if (n.Spec.Unschedulable || ns.cordoned) && !corev1helpers.TolerationsTolerateTaint(pod.Spec.Tolerations, &unschedulableTaint) &&
		fail(Failure{ReasonUnschedulable, "node(s) were unschedulable"}) {
		return out
	}
	if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations, hardTaint); untolerated &&
		fail(Failure{ReasonTaint, fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)}) {
		return out
	}
	if ok, _ := info.affinity.Match(n); !ok && fail(Failure{ReasonNodeAffinity, "node(s) didn't match Pod's node affinity/selector"}) {
		return out
	}
	for _, port := range info.ports {
		if ns.portTaken(port) {
			if fail(Failure{ReasonPorts, "node(s) didn't have free ports for the requested pod ports"}) {
				return out
			}
			break
		}
	}
	return append(out, ns.fits(info, first)...)
}

// interPod is the filters that read other nodes' pods: inter-pod affinity
// and topology spread, asked of a node the local filters pass.
func (c *Cluster) interPod(pod *corev1.Pod, ns *nodeState, info *podInfo) []Failure {
	// Pods already placed may repel this one even if it has no terms itself.
	if info.hasPodAffinity || len(c.anti) > 0 {
		if out := c.checkPodAffinity(pod, ns, info); len(out) > 0 {
			return out
		}
	}
	if len(info.spread) > 0 {
		return c.checkSpread(pod, ns, info)
	}
	return nil
}

// fits is the resources filter: the pod count, then each resource the pod
// requests, by name; with first, only the first shortfall.
func (ns *nodeState) fits(info *podInfo, first bool) []Failure {
	var out []Failure
	if ns.pods+1 > int(ns.allocatable[corev1.ResourcePods]) {
		out = append(out, Failure{ReasonResources, "Too many pods"})
		if first {
			return out
		}
	}
	for _, r := range info.requestNames {
		if q := info.requests[r]; q > 0 && ns.allocatable[r]-ns.requested[r] < q {
			out = append(out, Failure{ReasonResources, "Insufficient " + string(r)})
			if first {
				return out
			}
		}
	}
	return out
}

func (ns *nodeState) portTaken(p portKey) bool {
	if ns.ports[p.key(p.ip)] > 0 {
		return true
	}
	if p.ip == "0.0.0.0" { // a wildcard conflicts with any address on the port
		for k := range ns.ports {
			if strings.HasPrefix(k, p.protocol+"/") && strings.HasSuffix(k, fmt.Sprintf("/%d", p.port)) {
				return true
			}
		}
		return false
	}
	return ns.ports[p.key("0.0.0.0")] > 0
}

func (c *Cluster) add(pod *corev1.Pod, ns *nodeState, l load) {
	c.touch(ns)
	ns.pods++
	for r, q := range l.requests {
		ns.requested[r] += q
	}
	for _, p := range l.ports {
		ns.ports[p.key(p.ip)]++
	}
	c.slots[pod.Namespace+"/"+pod.Name] = len(c.pods)
	c.pods = append(c.pods, pod)
	c.loads = append(c.loads, l)
	if hasRequiredAnti(pod) {
		c.addAnti(pod, ns, 1)
	}
	c.buckets.each(pod, func(ix *index) { ix.add(pod, ns, 1) })
}

// remove is add undone.
func (c *Cluster) remove(pod *corev1.Pod, ns *nodeState) {
	i := c.position(pod)
	if i < 0 {
		return
	}
	l := c.loads[i]
	c.touch(ns)
	ns.pods--
	for r, q := range l.requests {
		ns.requested[r] -= q
	}
	for _, p := range l.ports {
		k := p.key(p.ip)
		if ns.ports[k]--; ns.ports[k] <= 0 {
			delete(ns.ports, k)
		}
	}
	c.forget(i)
	if hasRequiredAnti(pod) {
		c.addAnti(pod, ns, -1)
	}
	c.buckets.each(pod, func(ix *index) { ix.add(pod, ns, -1) })
	// A cursor says the nodes before it can never take its shape, which
	// held only while pods were added.
	c.cursors = map[string]int{}
}

// position finds pod in c.pods; -1 if it is not there.
func (c *Cluster) position(pod *corev1.Pod) int {
	if i, ok := c.slots[pod.Namespace+"/"+pod.Name]; ok && c.pods[i] == pod {
		return i
	}
	return slices.Index(c.pods, pod) // two pods given one name: the slot knows only the later
}

// forget drops the pod at position i from the list indexes are built from.
func (c *Cluster) forget(i int) {
	pod := c.pods[i]
	if key := pod.Namespace + "/" + pod.Name; c.slots[key] == i {
		delete(c.slots, key)
	}
	last := len(c.pods) - 1
	moved := c.pods[last]
	c.pods[i], c.loads[i] = moved, c.loads[last]
	c.pods, c.loads = c.pods[:last], c.loads[:last]
	if movedKey := moved.Namespace + "/" + moved.Name; i != last && c.slots[movedKey] == last {
		c.slots[movedKey] = i
	}
}

// podInfo is what the filters need of a pod, computed once per Place.
type podInfo struct {
	load
	affinity       nodeaffinity.RequiredNodeAffinity
	hasPodAffinity bool
	spread         []corev1.TopologySpreadConstraint
	// Computed on first use within one Place, while the cluster cannot change:
	repelledBy   []*antiGroup // placed pods' anti-affinity groups this pod matches
	repelledDone bool
	spreadCounts []map[string]int // per constraint: eligible domain -> matching pods
	spreadLowest []int
	// requestNames are the resources the pod requests, sorted: the order
	// the resources filter names shortfalls in.
	requestNames []corev1.ResourceName
	// shape identifies pods whose feasibility depends only on the node's own
	// state (no inter-pod terms): such pods can resume the scan where the
	// previous one of the same shape succeeded. Empty when not applicable.
	shape string
}

// infoOf is the pod's podInfo, its per-Place state fresh. What follows from
// the pod alone (requests, affinity, shape) is computed once per pod for the
// cluster's life: consolidation's what-ifs fit the same pods try after try,
// and rebuilding it was 40 % of a pass over every pool. A pod without a UID
// (one made up by the caller) is read afresh each time.
func (c *Cluster) infoOf(pod *corev1.Pod) *podInfo {
	if pod.UID == "" {
		return newPodInfo(pod)
	}
	key := podKey{pod.UID, pod.Spec.NodeName}
	known, ok := c.infos[key]
	if !ok {
		if c.infos == nil {
			c.infos = map[podKey]*podInfo{}
		}
		known = newPodInfo(pod)
		c.infos[key] = known
	}
	// A copy: known is never used itself, so its per-Place fields stay
	// empty; the slices and maps it shares are only read.
	info := *known
	return &info
}

func newPodInfo(pod *corev1.Pod) *podInfo {
	info := &podInfo{load: loadOf(pod), affinity: nodeaffinity.GetRequiredNodeAffinity(pod)}
	for r := range info.requests {
		info.requestNames = append(info.requestNames, r)
	}
	slices.Sort(info.requestNames)
	info.hasPodAffinity = HasRequiredPodAffinity(pod)
	for _, s := range pod.Spec.TopologySpreadConstraints {
		if s.WhenUnsatisfiable == corev1.DoNotSchedule {
			info.spread = append(info.spread, s)
		}
	}
	if !info.hasPodAffinity && len(info.spread) == 0 {
		info.shape = shapeOf(pod, info)
	}
	return info
}

// HasRequiredPodAffinity says whether the pod has required inter-pod
// affinity or anti-affinity terms: terms whose reach, a zone's for
// instance, goes past its own node.
func HasRequiredPodAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	return a != nil && ((a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0) ||
		(a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0))
}

func loadOf(pod *corev1.Pod) load {
	l := load{requests: quantities(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			for _, p := range list[i].Ports {
				if p.HostPort > 0 {
					l.ports = append(l.ports, newPortKey(p))
				}
			}
		}
	}
	return l
}

// shapeOf is a key for pods that every filter treats alike: for a pod
// without inter-pod terms, the node-local filters are all of them.
func shapeOf(pod *corev1.Pod, info *podInfo) string {
	return localShape(pod, info)
}

// The unschedulable "taint" the scheduler checks cordoned nodes against, and
// the taint effects that keep pods away.
var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

func hardTaint(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

type portKey struct {
	protocol, ip string
	port         int32
}

func newPortKey(p corev1.ContainerPort) portKey {
	k := portKey{protocol: string(p.Protocol), ip: p.HostIP, port: p.HostPort}
	if k.protocol == "" {
		k.protocol = string(corev1.ProtocolTCP)
	}
	if k.ip == "" {
		k.ip = "0.0.0.0"
	}
	return k
}

func (p portKey) key(ip string) string { return fmt.Sprintf("%s/%s/%d", p.protocol, ip, p.port) }

// quantities turns a resource list into integers: cpu in millicores, the rest
// in their base units.
func quantities(list corev1.ResourceList) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(list))
	for name, q := range list {
		out[name] = value(name, q)
	}
	return out
}

func value(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// summarize words failures the way the scheduler's FailedScheduling event does.
func summarize(nodes int, tally map[string]int) string {
	details := make([]string, 0, len(tally))
	for d := range tally {
		details = append(details, d)
	}
	sort.Slice(details, func(i, j int) bool {
		if tally[details[i]] != tally[details[j]] {
			return tally[details[i]] > tally[details[j]]
		}
		return details[i] < details[j]
	})
	parts := make([]string, len(details))
	for i, d := range details {
		parts[i] = fmt.Sprintf("%d %s", tally[d], d)
	}
	return fmt.Sprintf("0/%d nodes are available: %s.", nodes, strings.Join(parts, ", "))
}
