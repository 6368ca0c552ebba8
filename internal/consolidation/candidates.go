package consolidation

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// candidate is a node consolidation may take away.
type candidate struct {
	node *corev1.Node
	// moving are the pods that must find another node.
	moving       []*corev1.Pod
	price        float64
	capacity     v1alpha1.CapacityType
	instanceType string
	cost         float64 // disruption cost of the moving pods
	used         int     // the larger of its cpu and memory requests, in percent of allocatable
}

// drainOptions are the drain's rules consolidation classifies pods by: the
// termination queue drains with DaemonSets ignored and emptyDir data given
// up, but a pod no controller would recreate is not deleted for a saving.
var drainOptions = drain.Options{IgnoreDaemonSets: true, DeleteEmptyDirData: true}

// candidates sorts the pool's nodes into those consolidation may take away
// and those it may not, with why.
func (in *Input) candidates(podsOn map[string][]*corev1.Pod) ([]*candidate, []Blocker) {
	var (
		out          []*candidate
		blocked      []Blocker
		replacements = disruption.Replacements(in.Members)
	)
	for _, n := range in.Members {
		pods := podsOn[n.Name]
		b := in.unavailable(n, pods, replacements)
		var c *candidate
		if b == nil {
			c, b = in.weigh(n, pods)
		}
		if b != nil {
			b.Node = n.Name
			blocked = append(blocked, *b)
			continue
		}
		out = append(out, c)
	}
	return out, blocked
}

// unavailable says why the node may not be consolidated whatever its pods
// are: consolidation is off, the node is protected, out of service, or
// changed too recently (consolidateAfter is judged at Input.QualifyBy). nil
// when none holds.
func (in *Input) unavailable(n *corev1.Node, pods []*corev1.Pod, replacements map[string]bool) *Blocker {
	after, on := in.Pool.DisruptionSpec().ConsolidateAfterDuration()
	if !on {
		return blocker(BlockedDisabled, time.Time{}, "consolidateAfter is Never on NodePool %s", in.Pool.Name)
	}
	if p := disruption.Protected(in.Pool, n, pods, in.Now); p != nil {
		key := BlockedDoNotDisrupt
		if p.Reason == disruption.ReasonPaused || p.Reason == disruption.ReasonPoolDoNotDisrupt {
			key = BlockedPaused
		}
		return blocker(key, p.Until, "%s", p.Message)
	}
	if why, out := budget.Disrupting(n, in.Now); out {
		return blocker(BlockedOutOfService, time.Time{}, "the node is out of service (%s)", why)
	}
	if replacements[n.Name] {
		return blocker(BlockedOutOfService, time.Time{}, "the node is a replacement whose old node is still there")
	}
	since := n.CreationTimestamp.Time
	if in.LastChurn != nil {
		if t := in.LastChurn(n.Name); t.After(since) {
			since = t
		}
	}
	for _, p := range pods {
		if p.CreationTimestamp.After(since) {
			since = p.CreationTimestamp.Time
		}
	}
	if until := since.Add(after); in.qualifyBy().Before(until) {
		return blocker(BlockedRecent, until, "the node was created or a pod came or went on it at %s; consolidateAfter is %s",
			since.UTC().Format(time.RFC3339), after)
	}
	return nil
}

// weigh classifies the node's pods as the drain would and prices the node;
// it says why not when a pod cannot move or the pool's rules keep the node.
func (in *Input) weigh(n *corev1.Node, pods []*corev1.Pod) (*candidate, *Blocker) {
	d := in.Pool.DisruptionSpec()
	c := &candidate{node: n, instanceType: n.Labels[provider.LabelInstanceType],
		capacity: v1alpha1.CapacityType(n.Labels[provider.LabelCapacityType]), price: priceOf(n)}
	if c.capacity == "" {
		c.capacity = v1alpha1.CapacityOnDemand
	}
	unmovable := ""
	for _, p := range pods {
		switch v := drain.Classify(p, drainOptions, in.Now, func(string, string) bool { return true }); v.Verdict {
		case drain.VerdictLeave:
			c.moving = append(c.moving, p)
			c.cost += podCost(p)
		case drain.VerdictRefuse, drain.VerdictHold:
			if unmovable == "" {
				unmovable = fmt.Sprintf("pod %s/%s: %s", p.Namespace, p.Name, v.Message)
			}
		}
	}
	cpu, mem := utilization(n, pods)
	c.used = max(cpu, mem)
	if unmovable != "" {
		return nil, blocker(BlockedUnmovablePod, time.Time{}, "%s", unmovable)
	}
	if len(c.moving) == 0 {
		return c, nil
	}
	if d.Policy() == v1alpha1.ConsolidateWhenEmpty {
		return nil, blocker(BlockedNotEmpty, time.Time{}, "%d pod(s) would move, and NodePool %s consolidates only empty nodes (consolidationPolicy WhenEmpty)", len(c.moving), in.Pool.Name)
	}
	if threshold, ok := d.UtilizationThresholdPercent(); ok && (cpu >= threshold || mem >= threshold) {
		return nil, blocker(BlockedAboveThreshold, time.Time{}, "requests use %d%% of its cpu and %d%% of its memory; utilizationThreshold is %d%%", cpu, mem, threshold)
	}
	if pdb := blockingBudget(c.moving, in.PDBs); pdb != nil {
		return nil, blocker(BlockedPDB, time.Time{}, "PodDisruptionBudget %s/%s allows no disruption now", pdb.Namespace, pdb.Name)
	}
	return c, nil
}

// qualifyBy is when a node's consolidateAfter must have run out: Input.QualifyBy,
// or Now when that is unset or earlier.
func (in *Input) qualifyBy() time.Time {
	if in.QualifyBy.After(in.Now) {
		return in.QualifyBy
	}
	return in.Now
}

func blocker(key BlockerKey, until time.Time, format string, args ...any) *Blocker {
	return &Blocker{Reason: key, Message: fmt.Sprintf(format, args...), Until: until}
}

// podCost weighs a pod's eviction: 1, plus up to 1 more for its priority and
// up to ±1 for its pod-deletion-cost, so a node of a few unimportant pods is
// disrupted first.
func podCost(p *corev1.Pod) float64 {
	cost := 1.0
	if p.Spec.Priority != nil {
		cost += math.Max(-1, math.Min(1, float64(*p.Spec.Priority)/1e9))
	}
	if v, ok := p.Annotations[corev1.PodDeletionCost]; ok {
		var dc float64
		if _, err := fmt.Sscanf(v, "%g", &dc); err == nil {
			cost += math.Max(-1, math.Min(1, dc/(1<<27)))
		}
	}
	return math.Max(cost, 0.01)
}

func isDaemon(p *corev1.Pod) bool {
	return drain.DaemonSetOf(p) != nil
}

// utilization is how much of the node's cpu and memory the pods request, in
// percent, counted as the scheduler counts requests.
func utilization(n *corev1.Node, pods []*corev1.Pod) (cpu, mem int) {
	var c, m int64
	for _, p := range pods {
		r := requests(p)
		c += r.Cpu().MilliValue()
		m += r.Memory().Value()
	}
	pct := func(used, of int64) int {
		if of <= 0 {
			return 100
		}
		return int(used * 100 / of)
	}
	return pct(c, n.Status.Allocatable.Cpu().MilliValue()), pct(m, n.Status.Allocatable.Memory().Value())
}

// requests is what the pod asks of its node: init containers, sidecars and
// overhead as kube-scheduler (and pkg/simulate) count them.
func requests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
}

// blockingBudget returns a PodDisruptionBudget of the pods that allows no
// disruption now. The drain would wait for it; consolidation, which is
// voluntary, picks another node.
//
// Only the budgets at zero are matched against the pods: the answer is the
// same (the first, by name, of a pod's budgets at zero), and a cluster's
// budgets mostly allow some.
func blockingBudget(pods []*corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) *policyv1.PodDisruptionBudget {
	var atZero []*policyv1.PodDisruptionBudget
	for _, b := range pdbs {
		if b.Status.DisruptionsAllowed < 1 {
			atZero = append(atZero, b)
		}
	}
	if len(atZero) == 0 {
		return nil
	}
	for _, p := range pods {
		if matched := drain.BudgetsFor(p, atZero); len(matched) > 0 {
			return matched[0]
		}
	}
	return nil
}
