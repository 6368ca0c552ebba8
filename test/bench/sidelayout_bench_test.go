package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
)

// The side-by-side consolidation compares evictions, and how many pods a
// consolidation must move depends on where the scale-down left them. Left to
// the ReplicaSet controller, that differs from one sandbox to the other (one
// run left 43 pods that had to move on one side and 25 on the other). So the
// scale-down is planned: a seeded draw keeps 30 % of the 250 slots (node rank
// by name, pod within it), the same draw on both sides, and the ReplicaSet
// controller is steered to delete exactly the other pods with
// controller.kubernetes.io/pod-deletion-cost (it deletes the lowest cost
// first among Ready pods). The kept pods carry no annotation afterwards, so
// neither consolidator's disruption cost sees one.

// layoutSeed fixes the draw; any value gives both sides the same start.
const layoutSeed = 20261125

// deletionCostAnnotation is the ReplicaSet controller's hint.
const deletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// keepPlan says how many pods the i-th node keeps: kept slots drawn from
// nodes*perNode without replacement, with the fixed seed.
func keepPlan(nodes, perNode, kept int) []int {
	r := rand.New(rand.NewPCG(layoutSeed, 0)) //nolint:gosec // a reproducible draw, not a secret
	keep := make([]int, nodes)
	for _, slot := range r.Perm(nodes * perNode)[:kept] {
		keep[slot/perNode]++
	}
	return keep
}

// chooseVictims picks the pods each node keeps (keep[i] on the i-th of
// nodes, in name order) so that no Deployment keeps more than perApp, and
// returns the others. Which Deployments' pods a node keeps is a small
// transportation problem (nodes supply kept slots, Deployments take at most
// perApp), solved exactly by augmenting paths; short counts the kept slots
// no choice could fill (zero unless the scheduler's mix makes the plan
// impossible).
func chooseVictims(nodes []string, pods []corev1.Pod, keep []int, perApp int) (victims []corev1.Pod, short int) {
	var apps []string
	appIndex := map[string]int{}
	have := make([]map[int][]corev1.Pod, len(nodes)) // node -> app -> its pods there
	nodeIndex := map[string]int{}
	for i, n := range nodes {
		nodeIndex[n] = i
		have[i] = map[int][]corev1.Pod{}
	}
	for _, p := range pods {
		app := p.Labels[fixture.LabelApp]
		a, ok := appIndex[app]
		if !ok {
			a = len(apps)
			appIndex[app] = a
			apps = append(apps, app)
		}
		if i, ok := nodeIndex[p.Spec.NodeName]; ok {
			have[i][a] = append(have[i][a], p)
		} else {
			victims = append(victims, p) // on no node of the pool: not part of the layout
		}
	}
	flow := make([][]int, len(nodes)) // kept pods of app a on node i
	for i := range flow {
		flow[i] = make([]int, len(apps))
	}
	taken := make([]int, len(apps))
	// augment finds a path from node i through an app with room, possibly
	// moving another node's kept slot to a different app on the way.
	var augment func(i int, seen []bool) bool
	augment = func(i int, seen []bool) bool {
		for a := range apps {
			if seen[a] || flow[i][a] >= len(have[i][a]) {
				continue
			}
			seen[a] = true
			if taken[a] < perApp {
				flow[i][a]++
				taken[a]++
				return true
			}
			for j := range nodes {
				if flow[j][a] > 0 && j != i && augmentFrom(j, a, seen, augment, flow) {
					flow[i][a]++
					return true
				}
			}
		}
		return false
	}
	for i := range nodes {
		for range keep[i] {
			if !augment(i, make([]bool, len(apps))) {
				short++
			}
		}
	}
	for i := range nodes {
		for a := range apps {
			on := have[i][a]
			slices.SortFunc(on, func(x, y corev1.Pod) int { return strings.Compare(x.Name, y.Name) })
			victims = append(victims, on[flow[i][a]:]...)
		}
	}
	return victims, short
}

// augmentFrom moves one of node j's kept slots off app a onto another app
// (through augment), freeing a slot of a for the caller.
func augmentFrom(j, a int, seen []bool, augment func(int, []bool) bool, flow [][]int) bool {
	flow[j][a]--
	if augment(j, seen) {
		return true
	}
	flow[j][a]++
	return false
}

// layout is the multiset of pods per node, as "pods×nodes" pairs.
func layout(counts []int) string {
	hist := map[int]int{}
	for _, c := range counts {
		hist[c]++
	}
	keys := make([]int, 0, len(hist))
	for k := range hist {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d pods: %d", k, hist[k]))
	}
	return strings.Join(parts, ", ")
}

// scaleDownAsPlanned marks the planned victims with the lowest deletion cost
// and returns them, for the caller to scale every Deployment down by as
// many. It also returns the layout the plan asks for.
func scaleDownAsPlanned(ctx context.Context, b *testing.B, clientset kubernetes.Interface, ns string, nodes []corev1.Node, left int) (planned string, victims int) {
	b.Helper()
	list, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	keep := keepPlan(len(names), sidePerNode, left*sideDeployments)
	chosen, short := chooseVictims(names, list.Items, keep, left)
	if short > 0 {
		b.Logf("the planned layout is %d pods short: some nodes held no pod of a Deployment still needing one", short)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + deletionCostAnnotation + `":"-1000"}}}`)
	work := make(chan corev1.Pod)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if _, err := clientset.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("marking pod %s: %w", p.Name, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range chosen {
		work <- p
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		b.Fatal(errs[0])
	}
	// The ReplicaSet controller reads pods from its informer: let the marks
	// reach it before the replicas change.
	time.Sleep(2 * time.Second)
	return layout(keep), len(chosen)
}

// layoutNow is the layout of the namespace's pods over the pool's nodes.
func layoutNow(ctx context.Context, b *testing.B, clientset kubernetes.Interface, ns string, nodes []corev1.Node) string {
	b.Helper()
	list, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	per := map[string]int{}
	for _, n := range nodes {
		per[n.Name] = 0
	}
	for _, p := range list.Items {
		per[p.Spec.NodeName]++
	}
	counts := make([]int, 0, len(per))
	for _, c := range per {
		counts = append(counts, c)
	}
	return layout(counts)
}
