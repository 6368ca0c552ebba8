// Package upgrade forecasts a NodePool's image upgrade before anything
// changes: how many batches, how long each takes and the whole, and every
// node that will block, with the fix. It reads what the controller reads
// (nodes, pods, PodDisruptionBudgets, the pool) and models the controller's
// own steps: surge nodes boot, old nodes drain within the budgets' waves,
// soak, and go. docs/design/upgrades.md says how.
package upgrade

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/doctor"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// Overheads measured on the sandbox (make bench BENCH=Upgrade, 30 nodes in
// three batches; see docs/upgrades.md): what a step costs beside the time
// the pool's settings and pods name. Measured: a batch took 26.5 s where
// boot 10 s + drain 11.8 s + soak 5 s = 26.8 s, its two PDB waves 1.8 s
// apart; the first calibration (2 s, 2 s, 3 s, 1 s) forecast +31 to +34 %.
const (
	// registration is from a machine's boot to its Node Ready and seen.
	registration = time.Second
	// evictionLag is from a replacement pod turning Ready to its budget
	// allowing the next eviction (the disruption controller's update) and
	// the drain's next try.
	evictionLag = time.Second
	// deletion is from an empty node's deletion to its Node being gone and
	// the next node chosen.
	deletion = time.Second
	// podStart is a replacement pod's scheduling and start before its
	// readiness delay.
	podStart = 500 * time.Millisecond
)

// Input is what the forecast reads.
type Input struct {
	Pool *v1alpha1.NodePool
	// Members are the pool's nodes; Nodes every node (room for pods).
	Members []*corev1.Node
	Nodes   []corev1.Node
	Pods    []corev1.Pod
	PDBs    []policyv1.PodDisruptionBudget
	// Image is the image to upgrade to.
	Image string
	// Boot is how long the provider takes to make a machine (kwok: the
	// pool's bootDelay), used when no member shows an observed boot time.
	Boot time.Duration
	Now  time.Time
}

// ObservedBoot is the median of the boot times sluice noted on the nodes
// (sluice.dev/boot-time: from asking the provider to the Node serving), and
// how many it found; 0, 0 when none has one.
func ObservedBoot(nodes []*corev1.Node) (time.Duration, int) {
	var seen []time.Duration
	for _, n := range nodes {
		if d, err := time.ParseDuration(n.Annotations[contract.AnnotationBootTime]); err == nil && d > 0 {
			seen = append(seen, d)
		}
	}
	if len(seen) == 0 {
		return 0, 0
	}
	slices.Sort(seen)
	return seen[len(seen)/2], len(seen)
}

// Forecast is the prediction.
type Forecast struct {
	Pool  string `json:"pool"`
	Image string `json:"image"`
	// Nodes to upgrade, oldest first (as the controller takes them).
	Nodes       []string `json:"nodes"`
	Surge       int      `json:"surge"`
	Unavailable int      `json:"unavailable"`
	// BatchSize is surge + unavailable, or less when a budget caps it
	// (CappedBy names the budget).
	BatchSize int           `json:"batchSize"`
	CappedBy  string        `json:"cappedBy,omitempty"`
	Batches   []Batch       `json:"batches"`
	Total     time.Duration `json:"total"`
	Blockers  []Blocker     `json:"blockers"`
	// Assumptions say what the times rest on.
	Assumptions []string `json:"assumptions"`
}

// Batch is one round of the rollout.
type Batch struct {
	Nodes []string `json:"nodes"`
	// Start is when the batch's nodes are chosen, from the upgrade's start.
	Start time.Duration `json:"start"`
	Boot  time.Duration `json:"boot"`
	Drain time.Duration `json:"drain"`
	Soak  time.Duration `json:"soak"`
	Total time.Duration `json:"total"`
	// Slowest says what makes the drain take Drain.
	Slowest string `json:"slowest,omitempty"`
}

// Blocker is a node the upgrade will not be able to take as things stand.
type Blocker struct {
	Node    string `json:"node"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
	// Outcome is what the upgrade will do with it: wait (never chosen),
	// or the pool's undrainableNodeBehavior after drainTimeout.
	Outcome string `json:"outcome"`
	// At is when, from the upgrade's start, the upgrade will give the node
	// up (its drainTimeout over); 0 for a node it never chooses.
	At time.Duration `json:"at,omitempty"`
}

// Predict forecasts the upgrade of in.Pool to in.Image.
func Predict(in Input) (*Forecast, error) {
	pool := in.Pool
	f := &Forecast{Pool: pool.Name, Image: in.Image, Blockers: []Blocker{}}
	// The pool as the controller sizes it: replacements booting do not
	// widen the batches.
	v := disruption.Observe(pool, in.Members, in.Now)
	size := v.Size
	var err error
	if f.Surge, f.Unavailable, err = v.UpgradeWidth(); err != nil {
		return nil, err
	}
	if size > 0 && f.Surge+f.Unavailable == 0 {
		return nil, fmt.Errorf("spec.upgrade.maxSurge and maxUnavailable come to 0 nodes of %d: no node could be upgraded", size)
	}
	f.BatchSize = max(f.Surge+f.Unavailable, 1)
	if a, err := budget.Allowed(pool.DisruptionSpec().BudgetsOrDefault(), size, 0, v1alpha1.ReasonUpgrade, in.Now); err == nil && a.Nodes < f.BatchSize {
		f.BatchSize, f.CappedBy = max(a.Nodes, 0), "the pool's size"
		if a.Budget != nil {
			f.CappedBy = fmt.Sprintf("%q (%d node(s))", a.Budget.String(), a.Limit)
		}
	}
	pods := podsByNode(in.Pods)
	var old []*corev1.Node
	for _, n := range in.Members {
		if n.Annotations[contract.AnnotationImage] != in.Image && n.DeletionTimestamp == nil {
			old = append(old, n)
		}
	}
	slices.SortFunc(old, func(a, b *corev1.Node) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	pdbs := make([]*policyv1.PodDisruptionBudget, len(in.PDBs))
	for i := range in.PDBs {
		pdbs[i] = &in.PDBs[i]
	}
	blocked := map[string]bool{}
	for _, n := range old {
		for _, b := range nodeBlockers(pool, n, pods[n.Name], pdbs, in.Now) {
			f.Blockers = append(f.Blockers, b)
			blocked[n.Name] = true
		}
	}
	for _, n := range old {
		f.Nodes = append(f.Nodes, n.Name)
	}
	if f.BatchSize == 0 {
		f.Blockers = append(f.Blockers, Blocker{Reason: "BudgetAllowsNone", Outcome: "wait",
			Message: fmt.Sprintf("the pool's budget %s allows no disruption for reason Upgrade now", f.CappedBy),
			Fix:     "add a budget for reason Upgrade, or wait for the budget's window"})
		return f, nil
	}
	f.roomBlockers(in, old, blocked)
	f.schedule(in, old, pods, pdbs, blocked)
	f.Assumptions = []string{
		f.bootAssumption(in),
		"an evicted pod takes its whole terminationGracePeriodSeconds to exit (pods that exit sooner make the drain quicker)",
		"a replacement pod is Ready after its readiness probe's initialDelaySeconds",
	}
	return f, nil
}

// nodeBlockers names what will keep the node from being upgraded: a
// protection keeps the controller from choosing it; a budget that can never
// allow, or pods under several budgets, keep its drain from finishing.
func nodeBlockers(pool *v1alpha1.NodePool, n *corev1.Node, pods []*corev1.Pod, pdbs []*policyv1.PodDisruptionBudget, now time.Time) []Blocker {
	behavior := fmt.Sprintf("%s after drainTimeout %s", pool.Spec.Upgrade.Behavior(), pool.Spec.Upgrade.DrainTimeoutOrDefault())
	var out []Blocker
	if p := disruption.Protected(pool, n, pods, now); p != nil && p.Until.IsZero() {
		out = append(out, Blocker{Node: n.Name, Reason: p.Reason, Message: p.Message, Outcome: "wait (never chosen)",
			Fix: "remove the do-not-disrupt annotation, or upgrade the node by hand"})
	}
	seen := map[string]bool{}
	for _, p := range pods {
		if !evicted(p) {
			continue
		}
		budgets := drain.BudgetsFor(p, pdbs)
		if len(budgets) > 1 && !seen["multi/"+p.Namespace] {
			seen["multi/"+p.Namespace] = true
			out = append(out, Blocker{Node: n.Name, Reason: string(drain.ReasonMultiplePDBs), Outcome: behavior,
				Message: fmt.Sprintf("pod %s/%s is selected by %d PodDisruptionBudgets; the Eviction API refuses it", p.Namespace, p.Name, len(budgets)),
				Fix:     "make the budgets' selectors disjoint"})
		}
		for _, b := range budgets {
			if msg, dead := drain.BudgetDeadlock(b, p); dead && !seen[b.Namespace+"/"+b.Name] {
				seen[b.Namespace+"/"+b.Name] = true
				out = append(out, Blocker{Node: n.Name, Reason: string(drain.ReasonPDBDeadlock), Outcome: behavior,
					Message: fmt.Sprintf("pod %s/%s: poddisruptionbudget %s/%s: %s", p.Namespace, p.Name, b.Namespace, b.Name, msg)})
			}
		}
	}
	return out
}

// roomBlockers asks the doctor, batch by batch, whether the pods of the
// batch's nodes fit on the nodes left plus the batch's surge nodes (copies of
// the nodes they replace), and names the nodes whose pods do not.
func (f *Forecast) roomBlockers(in Input, old []*corev1.Node, blocked map[string]bool) {
	nodes := slices.Clone(in.Nodes)
	for start := 0; start < len(old); start += f.BatchSize {
		batch := old[start:min(start+f.BatchSize, len(old))]
		targets := make([]string, len(batch))
		for i, n := range batch {
			targets[i] = n.Name
			if i < f.Surge {
				nodes = append(nodes, surgeNode(n, i, start))
			}
		}
		rep := doctor.Diagnose(doctor.Input{Nodes: nodes, Pods: in.Pods, PDBs: in.PDBs, Targets: targets, Now: in.Now})
		for _, fd := range rep.Findings {
			if fd.Code == doctor.CodeNoRoom && fd.Node != "" && !blocked[fd.Node] {
				blocked[fd.Node] = true
				f.Blockers = append(f.Blockers, Blocker{Node: fd.Node, Reason: fd.Code, Message: fd.Object + " " + fd.Message, Fix: fd.Fix,
					Outcome: fmt.Sprintf("%s after drainTimeout %s", in.Pool.Spec.Upgrade.Behavior(), in.Pool.Spec.Upgrade.DrainTimeoutOrDefault())})
			}
		}
	}
}

// surgeNode is a new, empty node like n.
func surgeNode(n *corev1.Node, i, start int) corev1.Node {
	c := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("surge-%d-%d", start, i), Labels: n.Labels}, Status: corev1.NodeStatus{
		Allocatable: n.Status.Allocatable, Capacity: n.Status.Capacity,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	c.Spec.Taints = slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return strings.HasPrefix(t.Key, "node.kubernetes.io/") })
	return c
}

// schedule times the rollout as the controller runs it (startUpgrades): up
// to BatchSize old nodes in flight, oldest first, the next one chosen as
// soon as one in flight is gone rather than when its whole batch is. The
// nodes chosen at one moment are a batch: their surge nodes boot together
// and they drain together, in the waves their budgets allow. A node that
// cannot drain holds its place for its boot and drainTimeout, while the
// other places go on; then the undrainableNodeBehavior gives it up, with no
// soak, and the place is free again.
func (f *Forecast) schedule(in Input, old []*corev1.Node, pods map[string][]*corev1.Pod, pdbs []*policyv1.PodDisruptionBudget, blocked map[string]bool) {
	u := in.Pool.Spec.Upgrade
	soak, timeout := u.SoakOrDefault(), u.DrainTimeoutOrDefault()
	var boot time.Duration
	if f.Surge > 0 {
		boot = f.boot(in)
	}
	var queue []*corev1.Node
	for _, n := range old {
		if !blocked[n.Name] || !strings.HasPrefix(blockerOutcome(f.Blockers, n.Name), "wait") {
			queue = append(queue, n)
		}
	}
	free := make([]time.Duration, f.BatchSize) // when each place in flight is free next
	for len(queue) > 0 {
		slices.Sort(free)
		k := 0
		for k < len(free) && k < len(queue) && free[k] == free[0] {
			k++
		}
		nodes := queue[:k]
		queue = queue[k:]
		b := Batch{Start: free[0], Boot: boot, Soak: soak}
		b.Drain, b.Slowest = drainTime(nodes, pods, pdbs)
		done := boot + b.Drain + soak + deletion
		b.Total = done
		for i, n := range nodes {
			b.Nodes = append(b.Nodes, n.Name)
			took := done
			if blocked[n.Name] {
				took = boot + timeout + deletion
				f.givenUp(n.Name, b.Start+boot+timeout)
				b.Drain, b.Slowest = max(b.Drain, timeout), fmt.Sprintf("%s cannot drain: given up after drainTimeout %s (%s)", n.Name, timeout, u.Behavior())
			}
			free[i] = b.Start + took
			b.Total = max(b.Total, took)
		}
		f.Batches = append(f.Batches, b)
	}
	f.Total = slices.Max(free)
}

// givenUp notes on the node's blockers when the upgrade will give it up.
func (f *Forecast) givenUp(node string, at time.Duration) {
	for i := range f.Blockers {
		if f.Blockers[i].Node == node {
			f.Blockers[i].At = at
		}
	}
}

// boot is how long a surge node takes to serve: the median observed on the
// pool's nodes, or the provider's boot time and registration.
func (f *Forecast) boot(in Input) time.Duration {
	if d, n := ObservedBoot(in.Members); n > 0 {
		return d
	}
	return in.Boot + registration
}

func (f *Forecast) bootAssumption(in Input) string {
	if d, n := ObservedBoot(in.Members); n > 0 {
		return fmt.Sprintf("a new machine serves %s after it is asked for: the median of the %d boot time(s) sluice noted on the pool's nodes (%s)", d, n, contract.AnnotationBootTime)
	}
	return fmt.Sprintf("a new machine boots in %s (the provider's boot time; no boot observed on the pool's nodes yet) and is Ready %s later", in.Boot, registration)
}

func blockerOutcome(bs []Blocker, node string) string {
	for _, b := range bs {
		if b.Node == node {
			return b.Outcome
		}
	}
	return ""
}

// DrainTime is drainTime, for the other forecasts (reboots) that drain
// nodes in batches.
func DrainTime(nodes []*corev1.Node, pods map[string][]*corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) (time.Duration, string) {
	return drainTime(nodes, pods, pdbs)
}

// PodsByNode groups the bound pods by their node.
func PodsByNode(pods []corev1.Pod) map[string][]*corev1.Pod { return podsByNode(pods) }

// drainTime is how long the batch's nodes take to drain together: each
// budget lets its pods on them go in waves of what it allows, each wave
// waiting for the last one's replacements to be Ready; the last wave then
// takes its pods' grace to exit. Pods under no budget go at once. Pods the
// Eviction API will never let go (a budget that never allows, several
// budgets) make no wave: their node is a blocker, timed by its
// drainTimeout, while its other pods still take their turns in the waves.
func drainTime(nodes []*corev1.Node, pods map[string][]*corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) (time.Duration, string) {
	type chain struct {
		pods        int
		allowed     int
		start, exit time.Duration
	}
	chains := map[string]*chain{}
	var longest time.Duration
	slowest := ""
	for _, n := range nodes {
		for _, p := range pods[n.Name] {
			bs := drain.BudgetsFor(p, pdbs)
			if !evicted(p) || stays(p, bs) {
				continue
			}
			exit := grace(p)
			key, allowed := "", math.MaxInt
			if len(bs) == 1 {
				key, allowed = bs[0].Namespace+"/"+bs[0].Name, max(int(bs[0].Status.DisruptionsAllowed), 1)
			}
			if key == "" {
				if exit > longest {
					longest, slowest = exit, fmt.Sprintf("pod %s/%s's grace %s", p.Namespace, p.Name, exit)
				}
				continue
			}
			c := chains[key]
			if c == nil {
				c = &chain{allowed: allowed}
				chains[key] = c
			}
			c.pods++
			c.start, c.exit = max(c.start, readyAfter(p)), max(c.exit, exit)
		}
	}
	for key, c := range chains {
		waves := (c.pods + c.allowed - 1) / c.allowed
		d := time.Duration(waves-1)*(podStart+c.start+evictionLag) + c.exit
		if d > longest {
			longest, slowest = d, fmt.Sprintf("poddisruptionbudget %s: %d pods in %d wave(s) of %d", key, c.pods, waves, c.allowed)
		}
	}
	return longest + evictionLag, slowest
}

// evicted says whether an upgrade drain moves the pod (DaemonSet, mirror,
// finished and terminating pods stay).
func evicted(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if drain.DaemonSetOf(p) != nil {
		return false
	}
	return true
}

// stays says whether the Eviction API will never let the pod go: it is
// under several budgets, or under one that never allows.
func stays(p *corev1.Pod, budgets []*policyv1.PodDisruptionBudget) bool {
	if len(budgets) > 1 {
		return true
	}
	for _, b := range budgets {
		if _, dead := drain.BudgetDeadlock(b, p); dead {
			return true
		}
	}
	return false
}

func grace(p *corev1.Pod) time.Duration {
	if p.Spec.TerminationGracePeriodSeconds == nil {
		return 30 * time.Second
	}
	return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
}

// readyAfter is how long a pod like p takes from start to Ready: the
// longest startup plus readiness probe initial delay of its containers.
func readyAfter(p *corev1.Pod) time.Duration {
	var d time.Duration
	for _, c := range p.Spec.Containers {
		var s int32
		if c.StartupProbe != nil {
			s += c.StartupProbe.InitialDelaySeconds
		}
		if c.ReadinessProbe != nil {
			s += c.ReadinessProbe.InitialDelaySeconds
		}
		d = max(d, time.Duration(s)*time.Second)
	}
	return d
}

func podsByNode(pods []corev1.Pod) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for i := range pods {
		if n := pods[i].Spec.NodeName; n != "" {
			out[n] = append(out[n], &pods[i])
		}
	}
	return out
}
