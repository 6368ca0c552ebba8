package consolidation

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/catalog"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/simulate"
)

// MaxMultiNode caps how many nodes one multi-node command takes away.
const MaxMultiNode = 100

// Input is everything one pass reads.
type Input struct {
	Pool *v1alpha1.NodePool
	// Members are the pool's nodes; Nodes every node of the cluster (the
	// pods may go to any of them), Members included.
	Members, Nodes []*corev1.Node
	// Pods are the pods bound to nodes.
	Pods []*corev1.Pod
	PDBs []*policyv1.PodDisruptionBudget
	// LastChurn is when a pod last left the node, as the controller saw
	// it (zero when it has not seen one).
	LastChurn func(node string) time.Time
	// Allowed is how many more of the pool's nodes the budgets let be
	// disrupted now, per reason.
	Allowed map[v1alpha1.DisruptionReason]int
	Now     time.Time
	// QualifyBy, when set (after Now), is when consolidateAfter must have
	// run out for a node to count as a candidate; everything else is
	// decided at Now. The controller's first look sets it to its second
	// look's time: a command is only carried out when that second look,
	// deciding at its own time, makes it again, so a node whose
	// consolidateAfter ends in between need not wait one more validation
	// delay. Zero is Now.
	QualifyBy time.Time
}

// Plan is a pass's answer: the command to carry out (nil when there is
// none), and why the other nodes stay.
type Plan struct {
	Pool        string   `json:"pool"`
	Nodes       int      `json:"nodes"`
	CostPerHour float64  `json:"costPerHour"`
	Command     *Command `json:"command,omitempty"`
	// Candidates are the nodes consolidation may take away.
	Candidates []string `json:"candidates"`
	// Next are the nodes the rounds after this command are expected to take
	// away, when the budgets hold the pool to fewer at a time: the nodes of
	// the largest set that could go at once, less the command's. The
	// controller steers pods away from them (a PreferNoSchedule taint), so a
	// pod moved now is not moved again next round.
	Next    []string  `json:"next,omitempty"`
	Blocked []Blocker `json:"blocked,omitempty"`
}

// Allowed is Input.Allowed for a pool of size nodes, disrupting of them out
// of service now: what its budgets leave for Empty and Underutilized.
func Allowed(pool *v1alpha1.NodePool, size, disrupting int, now time.Time) (map[v1alpha1.DisruptionReason]int, error) {
	out := map[v1alpha1.DisruptionReason]int{}
	for _, r := range []v1alpha1.DisruptionReason{v1alpha1.ReasonEmpty, v1alpha1.ReasonUnderutilized} {
		a, err := budget.Allowed(pool.DisruptionSpec().BudgetsOrDefault(), size, disrupting, r, now)
		if err != nil {
			return nil, err
		}
		out[r] = a.Nodes
	}
	return out, nil
}

// Blocker returns why the plan leaves node alone, if it says.
func (p *Plan) Blocker(node string) (Blocker, bool) {
	for _, b := range p.Blocked {
		if b.Node == node {
			return b, true
		}
	}
	return Blocker{}, false
}

// Decide runs one consolidation pass over the pool. Empty nodes go first
// (nothing moves); otherwise the multi-node and single-node commands are
// built and the one saving more per unit of disruption wins.
func Decide(in Input) *Plan {
	podsOn := map[string][]*corev1.Pod{}
	for _, p := range in.Pods {
		if p.Spec.NodeName != "" {
			podsOn[p.Spec.NodeName] = append(podsOn[p.Spec.NodeName], p)
		}
	}
	plan := &Plan{Pool: in.Pool.Name, Nodes: len(in.Members), Candidates: []string{}}
	for _, n := range in.Members {
		plan.CostPerHour += priceOf(n)
	}
	cands, blocked := in.candidates(podsOn)
	plan.Blocked = blocked
	for _, c := range cands {
		plan.Candidates = append(plan.Candidates, c.node.Name)
	}
	if len(cands) == 0 {
		return plan
	}
	if cmd := in.empty(plan, cands); cmd != nil {
		plan.Command = cmd
		return plan
	}
	var under []*candidate
	for _, c := range cands {
		if len(c.moving) > 0 {
			under = append(under, c)
		}
	}
	if len(under) == 0 {
		return plan
	}
	// Cheapest to disrupt per dollar it costs first; of those alike, the
	// emptiest.
	slices.SortStableFunc(under, func(a, b *candidate) int {
		return cmp.Or(cmp.Compare(a.cost/max(a.price, 1e-6), b.cost/max(b.price, 1e-6)), cmp.Compare(a.used, b.used), cmp.Compare(a.node.Name, b.node.Name))
	})
	s := in.newSim(podsOn)
	room := in.Allowed[v1alpha1.ReasonUnderutilized]
	if room >= 1 {
		multi := s.multi(under, min(room, MaxMultiNode, len(under)))
		single := s.single(plan, under)
		plan.Command = better(multi, single)
	} else {
		for _, c := range under {
			plan.Blocked = append(plan.Blocked, Blocker{Node: c.node.Name, Reason: BlockedBudget,
				Message: fmt.Sprintf("NodePool %s's budgets allow no Underutilized disruption now", in.Pool.Name)})
		}
	}
	plan.Next = s.next(under, room, plan.Command)
	return plan
}

// next is the nodes later rounds are expected to take when the budget holds
// this one to fewer than could go: the largest set whose pods fit on the
// nodes that stay (a set that needs a new node is not counted, so a round's
// pods always have room outside it), less the command's.
func (s *sim) next(under []*candidate, room int, cmd *Command) []string {
	most := min(MaxMultiNode, len(under))
	if room >= most {
		return nil
	}
	all := s.multi(under, most)
	if all == nil || all.Replacement != nil {
		return nil
	}
	var out []string
	for _, n := range all.Nodes {
		if cmd == nil || !slices.Contains(cmd.Nodes, n) {
			out = append(out, n)
		}
	}
	return out
}

// empty takes the empty candidates, priciest first, up to the budget.
func (in *Input) empty(plan *Plan, cands []*candidate) *Command {
	var empty []*candidate
	for _, c := range cands {
		if len(c.moving) == 0 {
			empty = append(empty, c)
		}
	}
	if len(empty) == 0 {
		return nil
	}
	slices.SortStableFunc(empty, func(a, b *candidate) int {
		return cmp.Or(cmp.Compare(b.price, a.price), cmp.Compare(a.node.Name, b.node.Name))
	})
	room := in.Allowed[v1alpha1.ReasonEmpty]
	for _, c := range empty[min(max(room, 0), len(empty)):] {
		plan.Blocked = append(plan.Blocked, Blocker{Node: c.node.Name, Reason: BlockedBudget,
			Message: fmt.Sprintf("empty, but NodePool %s's budgets allow %d more Empty disruption(s) now", in.Pool.Name, max(room, 0))})
	}
	if room < 1 {
		return nil
	}
	cmd := &Command{Kind: KindEmpty, Reason: v1alpha1.ReasonEmpty}
	for _, c := range empty[:min(room, len(empty))] {
		cmd.Nodes = append(cmd.Nodes, c.node.Name)
		cmd.CostBefore += c.price
	}
	return cmd
}

// better returns the command that saves more per unit of disruption, and of
// two that save alike, the one that saves more.
func better(a, b *Command) *Command {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	sa, sb := a.Savings()/max(a.DisruptionCost, 0.01), b.Savings()/max(b.DisruptionCost, 0.01)
	if sa > sb+1e-12 || sa > sb-1e-12 && a.Savings() >= b.Savings() {
		return a
	}
	return b
}

// sim is the cluster one pass asks its what-ifs of: every schedulable node,
// and one closed node per type a replacement may be, opened one at a time.
type sim struct {
	in      *Input
	cluster *simulate.Cluster
	// types a replacement may be, cheapest first, with its stand-in node.
	types    []newType
	capacity v1alpha1.CapacityType
	minSave  float64 // fraction
}

type newType struct {
	typ  catalog.Type
	node string
}

func (in *Input) newSim(podsOn map[string][]*corev1.Pod) *sim {
	s := &sim{in: in, capacity: v1alpha1.CapacityOnDemand, minSave: float64(in.Pool.DisruptionSpec().MinSavingsPercent()) / 100}
	t := in.Pool.Spec.Template
	if t != nil && t.Capacity != "" {
		s.capacity = t.Capacity
	}
	nodes := make([]*corev1.Node, 0, len(in.Nodes)+8)
	var gone []string
	for _, n := range in.Nodes {
		if !n.DeletionTimestamp.IsZero() {
			continue // its pods are leaving too
		}
		nodes = append(nodes, n)
		if _, marked := n.Annotations[contract.AnnotationDisruption]; marked {
			gone = append(gone, n.Name)
		}
	}
	if t != nil {
		overhead := daemonOverhead(in.Members, podsOn)
		for _, name := range t.InstanceTypes {
			typ, ok := catalog.Lookup(name)
			if !ok || !typ.Offers(s.capacity) {
				continue
			}
			n := standIn(in.Pool, typ, s.capacity, overhead)
			s.types = append(s.types, newType{typ: typ, node: n.Name})
			nodes = append(nodes, n)
		}
		slices.SortStableFunc(s.types, func(a, b newType) int { return cmp.Compare(a.typ.Price(s.capacity), b.typ.Price(s.capacity)) })
	}
	s.cluster = simulate.NewCluster(nodes, in.Pods)
	// Closed for good (no snapshot is open): nodes on their way out, and
	// the stand-ins until a what-if opens one.
	for _, name := range gone {
		s.cluster.Cordon(name)
	}
	for _, nt := range s.types {
		s.cluster.Cordon(nt.node)
	}
	return s
}

// multi binary-searches the longest prefix of the candidates that can go at
// once, and returns the best of the feasible prefixes it tried (a longer one
// may save no more and move more). Feasibility is not strictly monotone in
// the prefix, so this may miss a set; it never returns an infeasible one.
func (s *sim) multi(under []*candidate, limit int) *Command {
	if limit < 2 {
		return nil
	}
	var best *Command
	lo, hi := 2, limit
	for lo <= hi {
		mid := (lo + hi) / 2
		if cmd, _, _ := s.try(under[:mid], KindMulti); cmd != nil {
			best, lo = better(best, cmd), mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// single takes the first candidate that can go on its own, recording why
// each one before it cannot.
func (s *sim) single(plan *Plan, under []*candidate) *Command {
	for _, c := range under {
		cmd, key, why := s.try([]*candidate{c}, KindSingle)
		if cmd != nil {
			return cmd
		}
		plan.Blocked = append(plan.Blocked, Blocker{Node: c.node.Name, Reason: key, Message: why})
	}
	return nil
}

// try asks whether the nodes can all go: their pods placed on the nodes that
// stay, and what does not fit on one new node of the cheapest type that
// saves at least minSavings. It returns the command, or why not.
func (s *sim) try(set []*candidate, kind Kind) (*Command, BlockerKey, string) {
	restore := s.cluster.Snapshot()
	defer restore()
	cmd := &Command{Kind: kind, Reason: v1alpha1.ReasonUnderutilized}
	var moving []*corev1.Pod
	from := map[*corev1.Pod]string{}
	spot := false
	for _, c := range set {
		s.cluster.Cordon(c.node.Name)
		cmd.Nodes = append(cmd.Nodes, c.node.Name)
		cmd.CostBefore += c.price
		cmd.DisruptionCost += c.cost
		spot = spot || c.capacity == v1alpha1.CapacitySpot
		for _, p := range c.moving {
			s.cluster.Remove(p.Namespace, p.Name)
			// What comes back is a new pod its controller makes, bound
			// nowhere yet.
			fresh := *p
			fresh.Spec.NodeName = ""
			from[&fresh] = c.node.Name
			moving = append(moving, &fresh)
		}
	}
	sortLargestFirst(moving)
	var left []*corev1.Pod
	for _, p := range moving {
		to := s.cluster.Fit(p)
		if to == "" {
			left = append(left, p)
			continue
		}
		cmd.Moves = append(cmd.Moves, Move{Pod: p.Namespace + "/" + p.Name, From: from[p], To: to})
	}
	if len(left) == 0 {
		return cmd, "", ""
	}
	if spot && s.capacity == v1alpha1.CapacitySpot && !s.in.Pool.DisruptionSpec().SpotToSpotAllowed() {
		return nil, BlockedNoCheaperFit, fmt.Sprintf("%d pod(s) fit on no other node, and a spot node is replaced by spot only with consolidation.spotToSpot", len(left))
	}
	ceiling := cmd.CostBefore * (1 - s.minSave)
	cheaperFit := ""
	for _, nt := range s.types {
		price := nt.typ.Price(s.capacity)
		if len(set) == 1 && nt.typ.Name == set[0].instanceType && s.capacity == set[0].capacity {
			continue // never the same type again
		}
		if price >= cmd.CostBefore {
			break
		}
		moves, ok := s.placeOn(nt.node, left, from)
		if !ok {
			continue
		}
		if price > ceiling {
			cheaperFit = fmt.Sprintf("its pods fit on a %s at $%.4f/h, which saves %.0f%% of $%.4f/h; minSavings is %.0f%%",
				nt.typ.Name, price, 100*(cmd.CostBefore-price)/cmd.CostBefore, cmd.CostBefore, 100*s.minSave)
			break
		}
		cmd.Moves = append(cmd.Moves, moves...)
		cmd.Replacement = &Replacement{InstanceType: nt.typ.Name, Capacity: s.capacity, Price: price}
		cmd.CostAfter = price
		return cmd, "", ""
	}
	if cheaperFit != "" {
		return nil, BlockedBelowMinSavings, cheaperFit
	}
	return nil, BlockedNoCheaperFit, fmt.Sprintf("%d pod(s) fit on no other node and on no cheaper instance type the pool allows (%s)", len(left), podNames(left, 3))
}

// placeOn opens the stand-in node and places the pods; everything is undone
// before it returns.
func (s *sim) placeOn(node string, pods []*corev1.Pod, from map[*corev1.Pod]string) ([]Move, bool) {
	restore := s.cluster.Snapshot()
	defer restore()
	s.cluster.Uncordon(node)
	moves := make([]Move, 0, len(pods))
	for _, p := range pods {
		to := s.cluster.Fit(p)
		if to != node {
			return nil, false
		}
		moves = append(moves, Move{Pod: p.Namespace + "/" + p.Name, From: from[p], To: NewNode})
	}
	return moves, true
}

// standIn is a node of the pool's template of the type, as a provider would
// make it, less what the pool's DaemonSets take.
func standIn(pool *v1alpha1.NodePool, typ catalog.Type, capacity v1alpha1.CapacityType, overhead corev1.ResourceList) *corev1.Node {
	t := pool.Spec.Template
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	name := "consolidation-new-" + typ.Name
	labels[provider.LabelNodePool] = pool.Name
	labels[provider.LabelCapacityType] = string(capacity)
	labels[provider.LabelInstanceType] = typ.Name
	labels[provider.LabelRegion] = typ.Region
	labels[corev1.LabelHostname] = name
	labels[corev1.LabelOSStable] = "linux"
	labels[corev1.LabelArchStable] = "amd64"
	pods := int64(110)
	if t.Kubelet != nil && t.Kubelet.MaxPods != nil {
		pods = int64(*t.Kubelet.MaxPods)
	}
	alloc := typ.Allocatable.DeepCopy()
	alloc[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	alloc[corev1.ResourceEphemeralStorage] = resource.MustParse("100Gi")
	for r, q := range overhead {
		if have, ok := alloc[r]; ok {
			have.Sub(q)
			alloc[r] = have
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: t.Taints},
		Status:     corev1.NodeStatus{Allocatable: alloc, Capacity: alloc},
	}
}

// daemonOverhead is the most any node of the pool gives its DaemonSet pods.
func daemonOverhead(members []*corev1.Node, podsOn map[string][]*corev1.Pod) corev1.ResourceList {
	most := corev1.ResourceList{}
	for _, n := range members {
		sum := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(0, resource.DecimalSI)}
		for _, p := range podsOn[n.Name] {
			if !isDaemon(p) {
				continue
			}
			pods := sum[corev1.ResourcePods]
			pods.Add(*resource.NewQuantity(1, resource.DecimalSI))
			sum[corev1.ResourcePods] = pods
			for r, q := range requests(p) {
				have := sum[r]
				have.Add(q)
				sum[r] = have
			}
		}
		for r, q := range sum {
			if cur, ok := most[r]; !ok || q.Cmp(cur) > 0 {
				most[r] = q
			}
		}
	}
	return most
}

// sortLargestFirst orders pods by cpu then memory requested, largest first
// (first-fit decreasing packs tighter than arrival order).
func sortLargestFirst(pods []*corev1.Pod) {
	// Each pod's requests summed once, not at every comparison.
	type sized struct {
		pod         *corev1.Pod
		cpu, memory int64
	}
	s := make([]sized, len(pods))
	for i, p := range pods {
		r := requests(p)
		s[i] = sized{p, r.Cpu().MilliValue(), r.Memory().Value()}
	}
	slices.SortStableFunc(s, func(a, b sized) int {
		return cmp.Or(cmp.Compare(b.cpu, a.cpu), cmp.Compare(b.memory, a.memory))
	})
	for i := range s {
		pods[i] = s[i].pod
	}
}

func podNames(pods []*corev1.Pod, most int) string {
	out := ""
	for i, p := range pods {
		if i == most {
			return out + fmt.Sprintf(" and %d more", len(pods)-most)
		}
		if i > 0 {
			out += ", "
		}
		out += p.Namespace + "/" + p.Name
	}
	return out
}

// priceOf is what the node costs per hour by the catalogue; 0 when its type
// is not in it.
func priceOf(n *corev1.Node) float64 {
	t, ok := catalog.Lookup(n.Labels[provider.LabelInstanceType])
	if !ok {
		return 0
	}
	c := v1alpha1.CapacityType(n.Labels[provider.LabelCapacityType])
	if c == "" {
		c = v1alpha1.CapacityOnDemand
	}
	return t.Price(c)
}
