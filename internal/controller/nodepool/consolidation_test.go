package nodepool_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/controller"
	"github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// consolidateSoon turns consolidation on: nodes qualify 2 s after their last
// change, and the budget lets the whole pool go.
func consolidateSoon(p *v1alpha1.NodePool) {
	p.Spec.Disruption.ConsolidateAfter = "2s"
	p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "100%"}}
}

// Empty nodes are deleted (drained first, then their machines), the busy one
// stays, and no pod is ever left without a place.
func TestConsolidationDeletesEmptyNodes(t *testing.T) {
	s := newScene(t, 4, nil)
	nodes := s.waitNodes(t, 4, time.Minute)
	s.workload(t, 2, "1", fixture.NodeSelector(map[string]string{corev1.LabelHostname: nodes[0]}))
	a := s.audit(t)
	s.startWith(t, func(o *controller.Options) { o.ConsolidationValidationDelay = time.Second })
	s.edit(t, consolidateSoon)
	left := s.waitNodes(t, 1, 2*time.Minute)
	if left[0] != nodes[0] {
		t.Fatalf("pool kept %s, want the busy node %s", left[0], nodes[0])
	}
	a.check(t, 3)
	if machines, err := s.kwok.List(context.Background(), s.name); err != nil || len(machines) != 1 {
		t.Errorf("the provider holds %d machines (err %v), want 1", len(machines), err)
	}
	if ev := strings.Join(s.poolEvents(t), "\n"); !strings.Contains(ev, "Empty consolidation") {
		t.Errorf("pool events say nothing of an Empty consolidation:\n%s", ev)
	}
}

// A node much bigger than its pods is replaced by the cheapest type of the
// template's that holds them, replacement first, and the pods move there.
func TestConsolidationReplacesANodeWithACheaperType(t *testing.T) {
	s := newScene(t, 1, func(p *v1alpha1.NodePool) {
		p.Spec.Template.InstanceTypes = []string{"Standard_D8s_v5", "Standard_D2s_v5"}
	})
	old := s.waitNodes(t, 1, time.Minute)
	s.workload(t, 2, "1", fixture.Requests("500m", "512Mi"))
	a := s.audit(t)
	s.startWith(t, func(o *controller.Options) { o.ConsolidationValidationDelay = time.Second })
	s.edit(t, consolidateSoon)
	s.env.WaitFor(t, 2*time.Minute, "the node replaced by a Standard_D2s_v5", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil || len(nodes) != 1 {
			return false, err
		}
		n := nodes[0]
		return n.Name != old[0] && ready(n) && n.Labels[provider.LabelInstanceType] == "Standard_D2s_v5", nil
	})
	s.env.WaitForPods(t, "app=web", 2)
	a.check(t, 1)
	// The new node is as cheap as it gets: the pool settles.
	if ev := strings.Join(s.poolEvents(t), "\n"); strings.Count(ev, "SingleNode consolidation") != 1 {
		t.Errorf("want exactly one SingleNode consolidation in the pool's events:\n%s", ev)
	}
}

// A decision the cluster has moved away from by its second look (a pod
// arrived on the empty node) is dropped, the log says so, and the node stays.
func TestConsolidationDropsADecisionTheClusterMovedAwayFrom(t *testing.T) {
	s := newScene(t, 2, nil)
	nodes := s.waitNodes(t, 2, time.Minute)
	s.workload(t, 1, "0", fixture.NodeSelector(map[string]string{corev1.LabelHostname: nodes[0]}))
	logs := &syncBuffer{}
	s.startWith(t, func(o *controller.Options) {
		o.ConsolidationValidationDelay = 5 * time.Second
		o.Log = slog.New(slog.NewTextHandler(logs, nil))
	})
	s.edit(t, consolidateSoon)
	s.env.WaitFor(t, time.Minute, "a consolidation decided", func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), "consolidation decided"), nil
	})
	// A pod no controller would recreate makes the empty node unmovable.
	s.env.Create(t, fixture.Pod(s.env.Namespace, "latecomer", fixture.OnNode(nodes[1])))
	s.env.WaitFor(t, time.Minute, "the decision dropped", func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), "consolidation decision dropped"), nil
	})
	// The pass that dropped it acted on nothing: both nodes are there and
	// neither is marked.
	for _, n := range s.waitNodes(t, 2, 10*time.Second) {
		node := &corev1.Node{}
		if err := s.kube.Get(context.Background(), client.ObjectKey{Name: n}, node); err != nil {
			t.Fatal(err)
		}
		if rec, marked := node.Annotations[contract.AnnotationDisruption]; marked {
			t.Fatalf("node %s was marked after the decision was dropped: %s", n, rec)
		}
	}
	if strings.Contains(logs.String(), `msg=consolidating`) {
		t.Fatalf("the controller acted on a dropped decision:\n%s", logs.String())
	}
}

// syncBuffer is a log sink the test reads while the controller writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// With the budget at one node at a time, the nodes later rounds will take
// carry SteerTaint, so each pod moved off a round's node lands on the node
// that stays: six nodes of one pod each shrink to one, every pod moved
// exactly once (kube-scheduler, left alone, puts a moved pod on the
// least-allocated node, most often one the next round takes), and the mark
// is lifted once there is nothing left to take.
func TestConsolidationMovesEachPodOnce(t *testing.T) {
	s := newScene(t, 6, nil)
	nodes := s.waitNodes(t, 6, time.Minute)
	s.workload(t, 6, "0")
	for _, n := range nodes {
		pods, err := s.env.Client.CoreV1().Pods(s.env.Namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + n})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 {
			t.Fatalf("kube-scheduler put %d pods on %s, not one on each node; the test needs that start", len(pods.Items), n)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	created := make(chan struct{}, 100)
	w, err := s.env.Client.CoreV1().Pods(s.env.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				created <- struct{}{}
			}
		}
	}()
	var mu sync.Mutex
	steered := map[string]bool{}
	go s.eachNodeChange(ctx, t, func(n *corev1.Node) {
		if slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return nodepool.SteerTaint.MatchTaint(&tt) }) {
			mu.Lock()
			steered[n.Name] = true
			mu.Unlock()
		}
	})
	a := s.audit(t)
	s.startWith(t, func(o *controller.Options) { o.ConsolidationValidationDelay = time.Second })
	s.edit(t, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.ConsolidateAfter = "2s"
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "1"}}
	})
	left := s.waitNodes(t, 1, 4*time.Minute)
	s.env.WaitForPods(t, "app=web", 6)
	a.check(t, 1)
	moved := len(created) - 6 // the watch's first events are the six pods there at its start
	if moved != 5 {
		t.Errorf("%d pods were started elsewhere; want 5, each pod on the five removed nodes moved once", moved)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(steered) < 4 {
		t.Errorf("the taint marked %v; want the four nodes the later rounds took", steered)
	}
	// The next pass, finding nothing left to take, lifts the mark from the
	// node that stays (the last rounds' largest set may have counted it,
	// replaced by a new node, before the budget's single steps got there).
	s.env.WaitFor(t, 30*time.Second, "no node marked for a later round", func(ctx context.Context) (bool, error) {
		var last corev1.Node
		if err := s.kube.Get(ctx, client.ObjectKey{Name: left[0]}, &last); err != nil {
			return false, err
		}
		return !slices.ContainsFunc(last.Spec.Taints, func(tt corev1.Taint) bool { return nodepool.SteerTaint.MatchTaint(&tt) }), nil
	})
}

// A node whose consolidateAfter (30 s) is running is validated meanwhile:
// the first look, a validation delay (20 s) before it qualifies, counts it,
// so it is marked about 30 s after its last pod left, never before, and not
// 30 s plus the validation delay after (50-60 s with passes every 10 s).
func TestConsolidationValidatesWhileConsolidateAfterRuns(t *testing.T) {
	const after, validation = 30 * time.Second, 20 * time.Second
	s := newScene(t, 2, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.ConsolidateAfter = after.String()
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "100%"}}
	})
	nodes := s.waitNodes(t, 2, time.Minute)
	busy, leaving := nodes[0], nodes[1]
	s.workload(t, 1, "0", fixture.NodeSelector(map[string]string{corev1.LabelHostname: busy}))
	// A pod no controller would recreate keeps the other node until it goes.
	s.env.Create(t, fixture.Pod(s.env.Namespace, "bare", fixture.OnNode(leaving)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	times := s.watchRounds(ctx, t)
	s.startWith(t, func(o *controller.Options) { o.ConsolidationValidationDelay = validation })
	// Its caches synced, the controller sees the pod leave.
	s.env.WaitFor(t, time.Minute, "the controller's status of the pool", func(ctx context.Context) (bool, error) {
		p := &v1alpha1.NodePool{}
		err := s.kube.Get(ctx, client.ObjectKey{Name: s.name}, p)
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.Nodes == 2, err
	})
	left := time.Now()
	if err := s.env.Client.CoreV1().Pods(s.env.Namespace).Delete(ctx, "bare", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if kept := s.waitNodes(t, 1, 2*time.Minute); kept[0] != busy {
		t.Fatalf("pool kept %s, want the busy node %s", kept[0], busy)
	}
	marked, ok := times.markedAt(leaving)
	if !ok {
		t.Fatalf("node %s went without being seen marked", leaving)
	}
	took := marked.Sub(left)
	t.Logf("node marked %s after its pod left (consolidateAfter %s, validation delay %s)", took.Round(100*time.Millisecond), after, validation)
	if took < after {
		t.Fatalf("node marked %s after its pod left, before its consolidateAfter of %s ran out", took, after)
	}
	if limit := after + 15*time.Second; took > limit {
		t.Fatalf("node marked %s after its pod left; want at most %s: the validation delay runs while consolidateAfter does", took, limit)
	}
}

// Rounds follow each other: with the budget at one node, four empty nodes
// go one at a time, and each round's node is marked within the validation
// delay (3 s) and 3 s more of the last round's node going, not a pass
// interval after the last round began.
func TestConsolidationRoundsFollowEachOther(t *testing.T) {
	const validation = 3 * time.Second
	s := newScene(t, 5, nil)
	nodes := s.waitNodes(t, 5, time.Minute)
	s.workload(t, 1, "0", fixture.NodeSelector(map[string]string{corev1.LabelHostname: nodes[0]}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	times := s.watchRounds(ctx, t)
	s.startWith(t, func(o *controller.Options) { o.ConsolidationValidationDelay = validation })
	s.edit(t, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.ConsolidateAfter = "2s"
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "1"}}
	})
	if left := s.waitNodes(t, 1, 3*time.Minute); left[0] != nodes[0] {
		t.Fatalf("pool kept %s, want the busy node %s", left[0], nodes[0])
	}
	rounds := times.rounds(nodes[1:])
	if len(rounds) != 4 {
		t.Fatalf("saw %d rounds (%v), want 4", len(rounds), rounds)
	}
	for i := 1; i < len(rounds); i++ {
		prev, next := rounds[i-1], rounds[i]
		gap := next.marked.Sub(prev.gone)
		t.Logf("round %d: %s marked %s after %s went", i+1, next.node, gap.Round(100*time.Millisecond), prev.node)
		if gap < 0 {
			t.Errorf("%s was marked before %s went; the budget allows one node at a time", next.node, prev.node)
		}
		if limit := validation + 3*time.Second; gap > limit {
			t.Errorf("%s was marked %s after %s went; want at most %s (the validation delay and 3 s)", next.node, gap, prev.node, limit)
		}
	}
}

// round is one node consolidation took: when it was first seen marked,
// and when it was gone.
type round struct {
	node         string
	marked, gone time.Time
}

// roundTimes notes, from a watch of the pool's nodes, when each was first
// seen marked for a disruption and when it was deleted.
type roundTimes struct {
	mu           sync.Mutex
	marked, gone map[string]time.Time
}

// watchRounds watches the pool's nodes until ctx ends.
func (s *scene) watchRounds(ctx context.Context, t *testing.T) *roundTimes {
	t.Helper()
	r := &roundTimes{marked: map[string]time.Time{}, gone: map[string]time.Time{}}
	w, err := s.env.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(s.selector).String()})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			now := time.Now()
			r.mu.Lock()
			if _, marked := n.Annotations[contract.AnnotationDisruption]; marked && r.marked[n.Name].IsZero() {
				r.marked[n.Name] = now
			}
			if ev.Type == watch.Deleted {
				r.gone[n.Name] = now
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *roundTimes) markedAt(node string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.marked[node]
	return t, ok
}

// rounds are the nodes' rounds, in the order they were marked; a node not
// seen both marked and gone is left out.
func (r *roundTimes) rounds(nodes []string) []round {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []round
	for _, n := range nodes {
		m, g := r.marked[n], r.gone[n]
		if !m.IsZero() && !g.IsZero() {
			out = append(out, round{node: n, marked: m, gone: g})
		}
	}
	slices.SortFunc(out, func(a, b round) int { return a.marked.Compare(b.marked) })
	return out
}
