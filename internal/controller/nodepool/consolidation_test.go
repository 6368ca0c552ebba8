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
	"k8s.io/apimachinery/pkg/watch"
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
