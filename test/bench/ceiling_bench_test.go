package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// ceiling is what a bare client gets from the sandbox when it empties nodes
// as fast as the API server lets it, with every pod's budget respected: it
// cordons every node at once, then asks the eviction API for every pod on
// them at once (200 requests in flight, no client rate limit) and asks again
// a second after each refusal, for as long as a Preempt's notice lasts. No
// drain engine can leave a node sooner without deleting pods past their
// budgets, so it is the figure beside which sluice's mass-spot drain is read.
type ceiling struct {
	nodes, pods      int
	drained          []time.Duration // start -> node empty, for the nodes emptied in time
	drainedInTime    int
	evicted, refused int64
	goneInTime       int
	rate             float64 // evictions granted per second, start -> last granted
	pace, load       string
}

func measureCeiling(b *testing.B, cl *scaleCluster, nodes []string) ceiling {
	b.Helper()
	cfg := cl.sb.RESTConfig()
	cfg.QPS = -1 // no client-side limit: the API server is the only brake
	client := kubernetes.NewForConfigOrDie(cfg)
	targets := make([]*target, len(nodes))
	for i, n := range nodes {
		targets[i] = &target{node: n}
	}
	w := watchDrains(b, client, cl.ns, targets)
	defer w.stop()
	c := ceiling{nodes: len(nodes), load: loadavg()}

	w.mu.Lock()
	type podRef struct{ name, node string }
	var pods []podRef
	for _, f := range w.pods {
		pods = append(pods, podRef{f.name, f.node})
	}
	w.mu.Unlock()
	c.pods = len(pods)

	start := time.Now()
	end := start.Add(preemptNotice)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			patch := []byte(`{"spec":{"unschedulable":true}}`)
			if _, err := client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				fmt.Fprintf(os.Stderr, "ceiling: cordoning %s: %v\n", n, err)
			}
		}()
	}
	wg.Wait()
	queue := make(chan podRef, len(pods))
	for _, p := range pods {
		queue <- p
	}
	var evicted, refused atomic.Int64
	var lastGrant atomic.Int64 // unix nanoseconds of the last eviction granted
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var p podRef
				select {
				case p = <-queue:
				case <-ctx.Done():
					return
				}
				err := client.PolicyV1().Evictions(cl.ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: cl.ns}})
				switch {
				case err == nil:
					evicted.Add(1)
					lastGrant.Store(time.Now().UnixNano())
				case apierrors.IsNotFound(err) || ctx.Err() != nil:
				default: // refused by a budget (429) or failed: ask again in a second
					refused.Add(1)
					time.AfterFunc(time.Second, func() { queue <- p })
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(time.Until(end.Add(time.Second))) // the last pods' deletions land on the watch
	c.evicted, c.refused = evicted.Load(), refused.Load()
	if last := time.Unix(0, lastGrant.Load()); c.evicted > 0 && last.After(start) {
		c.rate = float64(c.evicted) / last.Sub(start).Seconds()
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range nodes {
		if np := w.nodes[n]; !np.emptied.IsZero() && !np.emptied.After(end) {
			c.drainedInTime++
			c.drained = append(c.drained, np.emptied.Sub(start))
		}
	}
	slices.Sort(c.drained)
	for _, f := range w.pods {
		if !f.gone.IsZero() && !f.gone.After(end) {
			c.goneInTime++
		}
	}
	c.pace = replacementPace(w, start, end)
	c.load = c.load + " / " + loadavg()
	return c
}

// ceilingNodes picks n nodes without an agent, spread over the cluster as the
// preempted ones are, for the bare client to empty before sluice's turn.
func ceilingNodes(b *testing.B, cl *scaleCluster, n int) []string {
	b.Helper()
	list, err := cl.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	var free []string
	for _, node := range list.Items {
		if !slices.ContainsFunc(cl.targets, func(t *target) bool { return t.node == node.Name }) && !node.Spec.Unschedulable {
			free = append(free, node.Name)
		}
	}
	slices.Sort(free)
	if len(free) < n {
		b.Fatalf("%d nodes without an agent; the ceiling needs %d", len(free), n)
	}
	var out []string
	for i := 0; len(out) < n; i++ {
		out = append(out, free[i*len(free)/n])
	}
	return out
}

// waitBudgetsSettled waits until every budget in the namespace counts all
// its pods healthy (replacements Ready), or fails after timeout.
func waitBudgetsSettled(b *testing.B, client kubernetes.Interface, ns string, want int, timeout time.Duration) {
	b.Helper()
	waitUntil(b, timeout, "every budget counting all its pods healthy", func() bool {
		list, err := client.PolicyV1().PodDisruptionBudgets(ns).List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
		if err != nil || len(list.Items) < want {
			return false
		}
		return !slices.ContainsFunc(list.Items, func(p policyv1.PodDisruptionBudget) bool {
			return p.Status.ObservedGeneration < p.Generation || p.Status.ExpectedPods == 0 || p.Status.CurrentHealthy < p.Status.ExpectedPods
		})
	})
}
