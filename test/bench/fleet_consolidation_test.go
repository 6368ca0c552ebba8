package bench

import (
	"math"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sluice-dev/sluice/internal/consolidation"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/catalog"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/simulate"
	"github.com/sluice-dev/sluice/test/bench/feed"
)

// consolidationFigures is one consolidation measurement: the pass's wall
// time (median of fleetRuns) and what its plan leaves the pool costing
// against the cheapest packing of the pool's pods.
type consolidationFigures struct {
	took              []time.Duration
	cpu               []time.Duration // this process's CPU time over the same span
	nodes, removed    int
	costNow, costPlan float64 // per hour, USD
	bound             float64 // per hour, USD: the cheapest packing
}

// fleetConsolidation times a consolidation pass as the controller makes it
// (consolidation.ScopeWith, then Decide) over the largest pool and over every
// pool in turn, on
// the fleet's own objects with one change: each node may hold 110 pods (the
// kubelet's default) instead of the pools' 30, so a node's pods could move
// and the pass has a plan to make. The controller process never sees that
// change.
func fleetConsolidation(b *testing.B, srv *feed.Server, f *fleet) (largest, all consolidationFigures) {
	b.Helper()
	nodes, pods, pdbs := fleetState(b, srv)
	members := map[string][]*corev1.Node{}
	for _, n := range nodes {
		members[n.Labels[provider.LabelNodePool]] = append(members[n.Labels[provider.LabelNodePool]], n)
	}
	byNode := map[string][]*corev1.Pod{}
	for _, p := range pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	podsOn := func(node string) ([]*corev1.Pod, error) { return byNode[node], nil }
	// The controller's index of the nodes holding inter-pod terms, which
	// its informer keeps as pods come and go: built here before the clock.
	holding := map[string]bool{}
	for _, p := range pods {
		if simulate.HasRequiredPodAffinity(p) {
			holding[p.Spec.NodeName] = true
		}
	}
	holdsTerms := func(node string) (bool, error) { return holding[node], nil }
	now := time.Now()
	decide := func(pool *v1alpha1.NodePool) *consolidation.Plan {
		size := len(members[pool.Name])
		allowed, err := consolidation.Allowed(pool, size, 0, time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC))
		if err != nil {
			b.Fatal(err)
		}
		// What the controller hands a pass (consolidationInput): the part of
		// the cluster the pool's pods can reach, and its namespaces' budgets.
		scope, scoped, err := consolidation.ScopeWith(members[pool.Name], nodes, podsOn, holdsTerms)
		if err != nil {
			b.Fatal(err)
		}
		return consolidation.Decide(consolidation.Input{Pool: pool, Members: members[pool.Name], Nodes: scope, Pods: scoped,
			PDBs: consolidation.BudgetsIn(pdbs, scoped), Allowed: allowed, Now: now})
	}
	var (
		lastLargest *consolidation.Plan
		lastAll     []*consolidation.Plan
	)
	for range fleetRuns {
		start, cpu := time.Now(), processCPU(b)
		lastLargest = decide(f.pools[0])
		largest.took = append(largest.took, time.Since(start))
		largest.cpu = append(largest.cpu, processCPU(b)-cpu)

		lastAll = lastAll[:0]
		start, cpu = time.Now(), processCPU(b)
		for _, pool := range f.pools {
			lastAll = append(lastAll, decide(pool))
		}
		all.took = append(all.took, time.Since(start))
		all.cpu = append(all.cpu, processCPU(b)-cpu)
	}
	largest.account(lastLargest, members[f.pools[0].Name], pods)
	for i, pool := range f.pools {
		all.account(lastAll[i], members[pool.Name], pods)
	}
	return largest, all
}

// processCPU is this process's CPU time so far (user and system). While
// the consolidation passes are timed nothing else runs in it (the feed
// serves no one), so the difference is theirs: what the wall time would be
// on an idle core.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// account adds a pool's plan to the figures.
func (c *consolidationFigures) account(plan *consolidation.Plan, members []*corev1.Node, pods []*corev1.Pod) {
	typ, _ := catalog.Lookup(fleetType)
	c.nodes += len(members)
	c.costNow += plan.CostPerHour
	c.costPlan += plan.CostPerHour
	if cmd := plan.Command; cmd != nil {
		c.removed += len(cmd.Nodes)
		c.costPlan -= cmd.Savings()
	}
	c.bound += packingBound(typ, members, pods)
}

// packingBound is the cheapest packing of the pods on members onto the
// instance type the pools allow: the node count the tightest of CPU, memory
// and pod slots needs when every node carries the DaemonSets' pods too,
// each resource filled to the last millicore. No real packing beats it.
func packingBound(typ catalog.Type, members []*corev1.Node, pods []*corev1.Pod) float64 {
	on := map[string]bool{}
	for _, n := range members {
		on[n.Name] = true
	}
	var cpu, mem, count, dsCPU, dsMem, dsCount float64
	for _, p := range pods {
		if !on[p.Spec.NodeName] {
			continue
		}
		var c, m float64
		for _, ctr := range p.Spec.Containers {
			c += float64(ctr.Resources.Requests.Cpu().MilliValue())
			m += float64(ctr.Resources.Requests.Memory().Value())
		}
		if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "DaemonSet" {
			dsCPU, dsMem, dsCount = dsCPU+c, dsMem+m, dsCount+1
			continue
		}
		cpu, mem, count = cpu+c, mem+m, count+1
	}
	n := float64(len(members))
	if n == 0 {
		return 0
	}
	perNode := func(total, capacity, daemons float64) float64 { return total / (capacity - daemons/n) }
	allocCPU, allocMem := float64(typ.Allocatable.Cpu().MilliValue()), float64(typ.Allocatable.Memory().Value())
	need := math.Ceil(max(perNode(cpu, allocCPU, dsCPU), perNode(mem, allocMem, dsMem), perNode(count, 110, dsCount)))
	return need * typ.OnDemand
}

// fleetState reads the fleet's nodes, pods and budgets from the feed, each
// node allowed the kubelet's default of 110 pods.
func fleetState(b *testing.B, srv *feed.Server) ([]*corev1.Node, []*corev1.Pod, []*policyv1.PodDisruptionBudget) {
	b.Helper()
	var (
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
	)
	srv.Each(func(obj runtime.Object) {
		switch o := obj.(type) {
		case *corev1.Node:
			n := o.DeepCopy()
			n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
			nodes = append(nodes, n)
		case *corev1.Pod:
			pods = append(pods, o)
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, o)
		}
	})
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes, pods, pdbs
}
