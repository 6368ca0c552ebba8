package simulate

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// Cluster is a set of nodes and the pods bound to them. Place adds pods; the
// Cluster is not safe for concurrent use.
type Cluster struct {
	nodes   []*nodeState
	byName  map[string]*nodeState
	pods    []*corev1.Pod         // every placed pod, for building indexes
	indexes map[string]*index     // matching-pod counts, built on first use
	cursors map[string]int        // pod shape -> first node that may still fit it
	anti    map[string]*antiGroup // placed pods' required anti-affinity terms, grouped
}

type nodeState struct {
	node        *corev1.Node
	allocatable map[corev1.ResourceName]int64
	requested   map[corev1.ResourceName]int64
	pods        int
	ports       map[string]bool
}

// NewCluster builds a cluster from nodes and the pods bound to them (pods with
// no spec.nodeName, or on unknown nodes, and finished pods are ignored).
func NewCluster(nodes []*corev1.Node, pods []*corev1.Pod) *Cluster {
	c := &Cluster{byName: map[string]*nodeState{}, indexes: map[string]*index{}, cursors: map[string]int{}, anti: map[string]*antiGroup{}}
	for _, n := range nodes {
		ns := &nodeState{node: n, allocatable: quantities(n.Status.Allocatable), requested: map[corev1.ResourceName]int64{}, ports: map[string]bool{}}
		c.nodes = append(c.nodes, ns)
		c.byName[n.Name] = ns
	}
	for _, p := range pods {
		if ns, ok := c.byName[p.Spec.NodeName]; ok && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			c.add(p, ns)
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
	return c.check(pod, ns, newPodInfo(pod))
}

// Place finds the first node that can take pod, binds the pod there (it counts
// for later pods), and returns the node's name. When no node fits it returns
// "" and the scheduler-style summary of why, e.g.
// "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) were unschedulable".
func (c *Cluster) Place(pod *corev1.Pod) (string, string) {
	info := newPodInfo(pod)
	start := 0
	if info.shape != "" {
		start = c.cursors[info.shape]
	}
	tally := map[string]int{}
	for i := start; i < len(c.nodes); i++ {
		ns := c.nodes[i]
		failures := c.check(pod, ns, info)
		if len(failures) == 0 {
			if info.shape != "" {
				c.cursors[info.shape] = i
			}
			placed := pod.DeepCopy()
			placed.Spec.NodeName = ns.node.Name
			c.add(placed, ns)
			return ns.node.Name, ""
		}
		// Nodes before the cursor failed this shape for good: pods only ever
		// add up, so a node that cannot take it now never will.
		if info.shape != "" && i == c.cursors[info.shape] {
			c.cursors[info.shape] = i + 1
		}
		tally[failures[0].Detail]++
	}
	for i := 0; i < start; i++ {
		tally[c.check(pod, c.nodes[i], info)[0].Detail]++
	}
	return "", summarize(len(c.nodes), tally)
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
	var out []Failure
	n := ns.node
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != n.Name {
		out = append(out, Failure{ReasonNodeName, "node(s) didn't match the requested node name"})
	}
	if n.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(pod.Spec.Tolerations, &unschedulableTaint) {
		out = append(out, Failure{ReasonUnschedulable, "node(s) were unschedulable"})
	}
	if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations, hardTaint); untolerated {
		out = append(out, Failure{ReasonTaint, fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)})
	}
	if ok, _ := info.affinity.Match(n); !ok {
		out = append(out, Failure{ReasonNodeAffinity, "node(s) didn't match Pod's node affinity/selector"})
	}
	for _, port := range info.ports {
		if ns.portTaken(port) {
			out = append(out, Failure{ReasonPorts, "node(s) didn't have free ports for the requested pod ports"})
			break
		}
	}
	out = append(out, ns.fits(info.requests)...)
	// Pods already placed may repel this one even if it has no terms itself.
	if len(out) == 0 && (info.hasPodAffinity || len(c.anti) > 0) {
		out = append(out, c.checkPodAffinity(pod, ns, info)...)
	}
	if len(out) == 0 && len(info.spread) > 0 {
		out = append(out, c.checkSpread(pod, ns, info)...)
	}
	return out
}

func (ns *nodeState) fits(req map[corev1.ResourceName]int64) []Failure {
	var out []Failure
	if ns.pods+1 > int(ns.allocatable[corev1.ResourcePods]) {
		out = append(out, Failure{ReasonResources, "Too many pods"})
	}
	names := make([]string, 0, len(req))
	for name := range req {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		r := corev1.ResourceName(name)
		if req[r] > 0 && ns.allocatable[r]-ns.requested[r] < req[r] {
			out = append(out, Failure{ReasonResources, "Insufficient " + name})
		}
	}
	return out
}

func (ns *nodeState) portTaken(p portKey) bool {
	if ns.ports[p.key(p.ip)] {
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
	return ns.ports[p.key("0.0.0.0")]
}

func (c *Cluster) add(pod *corev1.Pod, ns *nodeState) {
	info := newPodInfo(pod)
	ns.pods++
	for r, q := range info.requests {
		ns.requested[r] += q
	}
	for _, p := range info.ports {
		ns.ports[p.key(p.ip)] = true
	}
	c.pods = append(c.pods, pod)
	if hasRequiredAnti(pod) {
		c.addAnti(pod, ns)
	}
	for _, ix := range c.indexes {
		ix.add(pod, ns)
	}
}

// podInfo is what the filters need of a pod, computed once per Place.
type podInfo struct {
	requests       map[corev1.ResourceName]int64
	affinity       nodeaffinity.RequiredNodeAffinity
	ports          []portKey
	hasPodAffinity bool
	spread         []corev1.TopologySpreadConstraint
	// Computed on first use within one Place, while the cluster cannot change:
	repelledBy   []*antiGroup // placed pods' anti-affinity groups this pod matches
	repelledDone bool
	spreadCounts []map[string]int // per constraint: eligible domain -> matching pods
	spreadLowest []int
	// shape identifies pods whose feasibility depends only on the node's own
	// state (no inter-pod terms): such pods can resume the scan where the
	// previous one of the same shape succeeded. Empty when not applicable.
	shape string
}

func newPodInfo(pod *corev1.Pod) *podInfo {
	info := &podInfo{
		requests: quantities(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})),
		affinity: nodeaffinity.GetRequiredNodeAffinity(pod),
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				info.ports = append(info.ports, newPortKey(p))
			}
		}
	}
	a := pod.Spec.Affinity
	info.hasPodAffinity = (a != nil && ((a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0) ||
		(a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0)))
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

// shapeOf is a key for pods that every node-local filter treats alike.
func shapeOf(pod *corev1.Pod, info *podInfo) string {
	var b strings.Builder
	names := make([]string, 0, len(info.requests))
	for r := range info.requests {
		names = append(names, string(r))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%d,", n, info.requests[corev1.ResourceName(n)])
	}
	fmt.Fprintf(&b, "|%s|%v|%v|%v|%v", pod.Spec.NodeName, pod.Spec.NodeSelector, pod.Spec.Tolerations, pod.Spec.Affinity, info.ports)
	return b.String()
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
