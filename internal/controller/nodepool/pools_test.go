package nodepool_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/controller"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Changing the template's image drifts every node; all are replaced,
// replacement first (the replacement Ready and rid of its startup taint
// before the old node drains), never more at once than the budget, and the
// workload's PDB always holds.
func TestDriftReplacesEveryNodeWithinTheBudget(t *testing.T) {
	s := newScene(t, 10, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "30%"}} // 3 of 10
		// A replacement takes pods only once this is lifted (2 s after it
		// registers): its old node must not be drained before.
		p.Spec.Template.StartupTaints = []corev1.Taint{{Key: "test.sluice.dev/cni-not-ready", Effect: corev1.TaintEffectNoSchedule}}
	})
	s.workload(t, 20, "16")
	before := s.waitNodes(t, 10, time.Minute)
	s.start(t)
	a := s.audit(t)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })
	s.env.WaitFor(t, 5*time.Minute, "every node replaced", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		fresh := 0
		for _, n := range nodes {
			if slices.Contains(before, n.Name) {
				return false, nil
			}
			if n.Annotations[contract.AnnotationImage] == "img-2" && ready(n) {
				fresh++
			}
		}
		return fresh == 10, nil
	})
	a.check(t, 3)
	s.env.WaitForPods(t, "app=web", 20)
	// Nothing leaked: the provider holds exactly the pool's 10 machines.
	if machines, err := s.kwok.List(context.Background(), s.name); err != nil || len(machines) != 10 {
		t.Errorf("the provider holds %d machines for the pool after the rollout (err %v), want 10", len(machines), err)
	}
	if p := s.pool(t); p.Status.Drifted != 0 {
		t.Errorf("status.drifted = %d after the rollout, want 0", p.Status.Drifted)
	}
}

// Nodes older than expireAfter are replaced, two at a time as the budget
// says, until none of the first nodes is left.
func TestExpiryTurnsThePoolOver(t *testing.T) {
	s := newScene(t, 6, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.ExpireAfter = "1m"
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "2"}}
	})
	s.workload(t, 12, "10")
	before := s.waitNodes(t, 6, time.Minute)
	s.start(t)
	a := s.audit(t)
	s.env.WaitFor(t, 5*time.Minute, "the first nodes all gone", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if slices.Contains(before, n.Name) {
				return false, nil
			}
		}
		return true, nil
	})
	a.check(t, 2)
	s.env.WaitForPods(t, "app=web", 12)
}

// `kubectl delete node` on a pool with a provider drains the node, deletes
// its machine, then lets the Node go; on a pool without one, Kubernetes
// deletes the node as before.
func TestDeletingANodeDrainsItFirst(t *testing.T) {
	s := newScene(t, 2, nil)
	s.workload(t, 2, "1", fixture.GracePeriod(5), fixture.ExitsAfter(3))
	s.start(t)
	nodes := s.waitNodes(t, 2, time.Minute)
	victim := nodes[0]
	s.env.WaitFor(t, 30*time.Second, "the finalizer on "+victim, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := s.kube.Get(ctx, client.ObjectKey{Name: victim}, n); err != nil {
			return false, err
		}
		return slices.Contains(n.Finalizers, contract.FinalizerTermination), nil
	})
	podsThere := s.podsOn(t, victim)
	if len(podsThere) == 0 {
		t.Fatalf("no pod on %s to drain; the test proves nothing", victim)
	}
	victimNode := &corev1.Node{}
	if err := s.kube.Get(context.Background(), client.ObjectKey{Name: victim}, victimNode); err != nil {
		t.Fatal(err)
	}
	machine := s.kwok.NameOf(victimNode)
	if err := s.env.Client.CoreV1().Nodes().Delete(context.Background(), victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// While it drains, the Node is still there, cordoned.
	s.env.WaitFor(t, 30*time.Second, victim+" cordoned while it drains", func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := s.kube.Get(ctx, client.ObjectKey{Name: victim}, n); err != nil {
			return false, err
		}
		return n.Spec.Unschedulable && n.DeletionTimestamp != nil, nil
	})
	s.env.WaitFor(t, 90*time.Second, victim+" gone", func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		err := s.kube.Get(ctx, client.ObjectKey{Name: victim}, n)
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	// Its pods were evicted (they ran their grace on the way out) and run
	// elsewhere; the machine is gone from the provider.
	s.env.WaitForPods(t, "app=web", 2)
	if left := s.podsOn(t, victim); len(left) != 0 {
		t.Errorf("%d pods still bound to the deleted node", len(left))
	}
	if _, err := s.kwok.Get(context.Background(), machine); err == nil || !s.deleted.has(machine) {
		t.Errorf("machine %s of node %s: still there (%v) or not deleted by name (the controller deleted %v)", machine, victim, err, s.deleted.list())
	}
	if !slices.ContainsFunc(s.nodeEvents(t, victim), func(r string) bool { return strings.HasPrefix(r, "Terminated") }) {
		t.Errorf("no Terminated event on %s: %v", victim, s.nodeEvents(t, victim))
	}

	// A pool without a provider: no finalizer, Kubernetes deletes at once.
	plain := s.env.CreateNodes(t, fixture.AKSPool(s.name+"-plain", 1, fixture.WithLabels(map[string]string{labelPool + "-plain": s.name})))[0]
	none := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: s.name + "-plain"}, Spec: v1alpha1.NodePoolSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelPool + "-plain": s.name}}}}
	if err := s.kube.Create(context.Background(), none); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.kube.Delete(context.Background(), none) })
	s.holdsFor(t, 3*time.Second, "no finalizer on "+plain.Name, func(ctx context.Context) bool {
		n := &corev1.Node{}
		return s.kube.Get(ctx, client.ObjectKey{Name: plain.Name}, n) == nil && len(n.Finalizers) == 0
	})
	if err := s.env.Client.CoreV1().Nodes().Delete(context.Background(), plain.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, 10*time.Second, plain.Name+" gone at once", func(ctx context.Context) (bool, error) {
		err := s.kube.Get(ctx, client.ObjectKey{Name: plain.Name}, &corev1.Node{})
		return err != nil && client.IgnoreNotFound(err) == nil, nil
	})
}

// A budget of zero nodes in a window open now holds the drift back; when the
// window closes, the drift goes ahead.
func TestBudgetWindowHoldsDriftUntilItCloses(t *testing.T) {
	now := time.Now().UTC()
	opened := now.Truncate(time.Minute)
	// The window opened at the top of this minute and closes 40-100 s from now.
	length := now.Sub(opened) + 40*time.Second
	minutes := (length + time.Minute - 1) / time.Minute
	closes := opened.Add(minutes * time.Minute)
	schedule := fmt.Sprintf("%d %d * * *", opened.Minute(), opened.Hour())
	s := newScene(t, 2, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{
			{Nodes: "1"},
			{Nodes: "0", Schedule: &schedule, Duration: &metav1.Duration{Duration: minutes * time.Minute}, Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted}},
		}
	})
	before := s.waitNodes(t, 2, time.Minute)
	s.start(t)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })
	s.env.WaitFor(t, 30*time.Second, "the pool reports its drift and no room for it", func(ctx context.Context) (bool, error) {
		p := s.pool(t)
		return p.Status.Drifted == 2 && allowed(p, v1alpha1.ReasonDrifted) == 0 && p.Status.NextBudgetChange != nil, nil
	})
	if got := s.pool(t).Status.NextBudgetChange.Time; !got.Equal(closes) {
		t.Errorf("status.nextBudgetChange = %s, want the window's close at %s", got, closes)
	}
	s.holdsFor(t, time.Until(closes)-2*time.Second, "no node disrupted while the window is open", func(ctx context.Context) bool {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return true
		}
		for _, n := range nodes {
			if _, marked := n.Annotations[contract.AnnotationDisruption]; marked || n.Spec.Unschedulable || n.DeletionTimestamp != nil {
				return false
			}
		}
		return true
	})
	s.waitReplaced(t, 2*time.Minute, "the drift done once the window closed", before, 2)
}

// A provider that refuses to make the replacement: nothing is cordoned or
// drained, the node stays in service, and the pool says why.
func TestProviderRefusalDrainsNothing(t *testing.T) {
	s := newScene(t, 2, nil)
	s.workload(t, 2, "1")
	before := s.waitNodes(t, 2, time.Minute)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Provider.Kwok.Failure = v1alpha1.KwokFailureInsufficientCapacity })
	s.start(t)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })
	s.env.WaitFor(t, 30*time.Second, "ProviderReady=False on the pool", func(context.Context) (bool, error) {
		c := meta.FindStatusCondition(s.pool(t).Status.Conditions, "ProviderReady")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "InsufficientCapacity", nil
	})
	s.holdsFor(t, 5*time.Second, "the old nodes stay in service", func(ctx context.Context) bool {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return true
		}
		for _, n := range nodes {
			if n.Spec.Unschedulable || n.DeletionTimestamp != nil || !slices.Contains(before, n.Name) {
				return false
			}
		}
		return len(nodes) == 2
	})
	if !slices.ContainsFunc(s.poolEvents(t), func(e string) bool { return strings.HasPrefix(e, "ReplacementFailed") }) {
		t.Errorf("no ReplacementFailed event on the pool: %v", s.poolEvents(t))
	}
	s.env.WaitForPods(t, "app=web", 2)
}

// A throttled cloud's Retry-After is honoured: the pool says it is
// throttled and asks again no sooner (the kwok provider asks for 20 s; the
// pool's own first backoff would be 10 s).
func TestAThrottledProviderIsLeftAloneForItsRetryAfter(t *testing.T) {
	s := newScene(t, 1, nil)
	s.waitNodes(t, 1, time.Minute)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Provider.Kwok.Failure = v1alpha1.KwokFailureThrottled })
	s.start(t)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })
	s.env.WaitFor(t, 30*time.Second, "ProviderReady=False, Throttled", func(context.Context) (bool, error) {
		c := meta.FindStatusCondition(s.pool(t).Status.Conditions, "ProviderReady")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == provider.CodeThrottled, nil
	})
	first := s.creates.Load()
	t.Logf("requests for machines so far: %d", first)
	s.holdsFor(t, kwok.ThrottledRetryAfter-3*time.Second, "no request inside the Retry-After", func(context.Context) bool {
		return s.creates.Load() == first
	})
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Provider.Kwok.Failure = v1alpha1.KwokFailureNone })
	s.env.WaitFor(t, 30*time.Second, "a request once the Retry-After passed", func(context.Context) (bool, error) {
		return s.creates.Load() > first, nil
	})
}

// A replacement that never becomes a node is given up after the
// registration timeout: its machine is deleted and the old node stays.
func TestReplacementThatNeverJoinsLeavesTheOldNode(t *testing.T) {
	s := newScene(t, 1, nil)
	before := s.waitNodes(t, 1, time.Minute)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Provider.Kwok.Failure = v1alpha1.KwokFailureNeverJoins })
	s.start(t) // registration timeout 20 s
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })
	s.env.WaitFor(t, 60*time.Second, "ProviderReady=False, NodeNeverJoined", func(context.Context) (bool, error) {
		c := meta.FindStatusCondition(s.pool(t).Status.Conditions, "ProviderReady")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "NodeNeverJoined", nil
	})
	n := &corev1.Node{}
	if err := s.kube.Get(context.Background(), client.ObjectKey{Name: before[0]}, n); err != nil {
		t.Fatalf("the old node: %v", err)
	}
	if n.Spec.Unschedulable || n.DeletionTimestamp != nil {
		t.Errorf("the old node was taken out of service for a replacement that never came")
	}
	machines, err := s.kwok.List(context.Background(), s.name)
	if err != nil {
		t.Fatal(err)
	}
	if len(machines) != 1 || machines[0].ProviderID != n.Spec.ProviderID {
		names := []string{}
		for _, m := range machines {
			names = append(names, m.Name+"/"+string(m.State))
		}
		t.Errorf("machines after giving up: %v, want only the old node's %s", names, n.Spec.ProviderID)
	}
}

// Do-not-disrupt on a pod (sluice's, Karpenter's, the autoscaler's) or a
// node keeps that node from drift; the others are replaced.
func TestDoNotDisruptKeepsNodesFromDrift(t *testing.T) {
	s := newScene(t, 5, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "5"}}
	})
	nodes := s.waitNodes(t, 5, time.Minute)
	protected := map[string]fixture.PodOption{
		nodes[0]: fixture.Annotate(contract.AnnotationDoNotDisrupt, "true"),
		nodes[1]: fixture.Annotate("karpenter.sh/do-not-disrupt", "true"),
		nodes[2]: fixture.Annotate("cluster-autoscaler.kubernetes.io/safe-to-evict", "false"),
	}
	for node, opt := range protected {
		s.env.Create(t, fixture.Pod(s.env.Namespace, "keep-"+node, fixture.OnNode(node), opt))
	}
	s.annotateNode(t, nodes[3], contract.AnnotationDoNotDisrupt, "true")
	s.start(t)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })
	s.env.WaitFor(t, 2*time.Minute, nodes[4]+" replaced", func(ctx context.Context) (bool, error) {
		err := s.kube.Get(ctx, client.ObjectKey{Name: nodes[4]}, &corev1.Node{})
		return err != nil && client.IgnoreNotFound(err) == nil, nil
	})
	s.holdsFor(t, 5*time.Second, "the protected nodes untouched", func(ctx context.Context) bool {
		for _, name := range nodes[:4] {
			n := &corev1.Node{}
			if err := s.kube.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
				return false
			}
			if _, marked := n.Annotations[contract.AnnotationDisruption]; marked || n.Spec.Unschedulable || n.DeletionTimestamp != nil {
				return false
			}
		}
		return true
	})
	if d := s.pool(t).Status.Drifted; d != 4 {
		t.Errorf("status.drifted = %d, want the 4 protected nodes", d)
	}
}

func allowed(p *v1alpha1.NodePool, r v1alpha1.DisruptionReason) int32 {
	for _, a := range p.Status.Allowed {
		if a.Reason == r {
			return a.Nodes
		}
	}
	return -1
}

func (s *scene) podsOn(t *testing.T, node string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := s.kube.List(context.Background(), &pods, client.InNamespace(s.env.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}

func (s *scene) annotateNode(t *testing.T, node, key, value string) {
	t.Helper()
	n := &corev1.Node{}
	if err := s.kube.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	orig := n.DeepCopy()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[key] = value
	if err := s.kube.Patch(context.Background(), n, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// nodeEvents lists "Reason: message" of the Events on a node.
func (s *scene) nodeEvents(t *testing.T, node string) []string { return s.events(t, "Node", node) }

// holdsFor asserts that cond holds for the whole window: at its start, after
// every change to one of the pool's nodes, and at its end. A negative has no
// event to wait on, so the window is the wait.
func (s *scene) holdsFor(t *testing.T, window time.Duration, what string, cond func(context.Context) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	failed := false
	check := func() {
		if !failed && !cond(context.Background()) {
			failed = true
			cancel()
		}
	}
	check()
	s.eachNodeChange(ctx, t, func(*corev1.Node) { check() })
	check()
	if failed {
		t.Fatalf("%s: it did not hold", what)
	}
}

// A Preempt in the middle of a drift rollout is handled at once, past the
// budget, and consumes it: the drift chooses no new node while the
// preempted node is out of service, and finishes once the event is over.
func TestPreemptDuringDriftIsHandledAtOnce(t *testing.T) {
	s := newScene(t, 4, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "1"}}
	})
	s.workload(t, 4, "2")
	before := s.waitNodes(t, 4, time.Minute)
	s.start(t)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })
	var first string
	s.env.WaitFor(t, 30*time.Second, "the drift's first node marked", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if _, marked := n.Annotations[contract.AnnotationDisruption]; marked {
				first = n.Name
				return true, nil
			}
		}
		return false, nil
	})
	var victim string
	for _, name := range before {
		if name != first {
			victim = name
			break
		}
	}
	preempt := maintenance.Event{ID: "preempt-" + victim, Source: maintenance.SourceAzure, Type: maintenance.TypePreempt,
		Status: maintenance.StatusScheduled, NotBefore: time.Now().Add(30 * time.Second), Deadline: time.Now().Add(30 * time.Second)}
	s.annotateNode(t, victim, contract.AnnotationMaintenanceEvents, maintenance.NewReport(maintenance.SourceAzure, false, []maintenance.Event{preempt}).Encode())
	reported := time.Now()
	s.env.WaitFor(t, 5*time.Second, victim+" cordoned for the Preempt", func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := s.kube.Get(ctx, client.ObjectKey{Name: victim}, n); err != nil {
			return false, err
		}
		return n.Spec.Unschedulable, nil
	})
	t.Logf("Preempt on %s cordoned %.1fs after the report, with the drift of %s under way", victim, time.Since(reported).Seconds(), first)
	// The budget of 1 is spent by the preempted node: no new drift node
	// while it is out of service.
	s.holdsFor(t, 12*time.Second, "no second node chosen for drift while the Preempt holds the budget", func(ctx context.Context) bool {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return true
		}
		for _, n := range nodes {
			if _, marked := n.Annotations[contract.AnnotationDisruption]; marked && n.Name != first {
				return false
			}
		}
		return true
	})
	// The event ends (the cloud took nothing after all): the drift resumes
	// and finishes the pool, the once-preempted node included.
	s.annotateNode(t, victim, contract.AnnotationMaintenanceEvents, maintenance.NewReport(maintenance.SourceAzure, false, nil).Encode())
	s.waitReplaced(t, 3*time.Minute, "every node replaced", before, 4)
}

// `sluice controller --dry-run` decides and reports, and changes nothing:
// no node is marked, cordoned or deleted, no finalizer is set; each node it
// would replace gets a WouldAct Event naming the method and the command, and
// a node with a Preempt a WouldAct Event instead of a cordon and a drain.
func TestDryRunChangesNothing(t *testing.T) {
	s := newScene(t, 2, nil)
	before := s.waitNodes(t, 2, time.Minute)
	preempt := maintenance.Event{ID: "preempt-dry", Source: maintenance.SourceAzure, Type: maintenance.TypePreempt,
		Status: maintenance.StatusScheduled, NotBefore: time.Now().Add(time.Minute), Deadline: time.Now().Add(time.Minute)}
	s.annotateNode(t, before[0], contract.AnnotationMaintenanceEvents, maintenance.NewReport(maintenance.SourceAzure, false, []maintenance.Event{preempt}).Encode())
	s.startWith(t, func(o *controller.Options) { o.DryRun = true })
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })
	s.env.WaitFor(t, 30*time.Second, "WouldAct on "+before[0], func(context.Context) (bool, error) {
		return slices.ContainsFunc(s.nodeEvents(t, before[0]), func(e string) bool { return strings.HasPrefix(e, "WouldAct") && strings.Contains(e, "Drain") }), nil
	})
	for _, name := range before {
		s.env.WaitFor(t, 30*time.Second, "WouldAct (replace) on "+name, func(context.Context) (bool, error) {
			return slices.ContainsFunc(s.nodeEvents(t, name), func(e string) bool {
				return strings.HasPrefix(e, "WouldAct: sluice (dry run): Drifted would replace the node, replacement first")
			}), nil
		})
	}
	s.holdsFor(t, 3*time.Second, "nothing changed", func(ctx context.Context) bool {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return true
		}
		for _, n := range nodes {
			_, marked := n.Annotations[contract.AnnotationDisruption]
			_, recorded := n.Annotations[contract.AnnotationMaintenanceState]
			if marked || recorded || n.Spec.Unschedulable || n.DeletionTimestamp != nil || len(n.Finalizers) > 0 || !slices.Contains(before, n.Name) {
				return false
			}
		}
		return len(nodes) == 2
	})
	if d := s.pool(t).Status.Drifted; d != 2 {
		t.Errorf("status.drifted = %d under --dry-run, want 2 (the status is still kept)", d)
	}
}

// A pool sluice cannot apply (a budget window that never opens, limits
// below its size) says why on its Ready condition and is left alone; a
// healthy pool beside it rolls as usual.
func TestAnImpossiblePoolIsLeftAloneWhileOthersCarryOn(t *testing.T) {
	never := "0 0 30 2 *" // the 30th of February
	broken := newScene(t, 2, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "1", Schedule: &never, Duration: &metav1.Duration{Duration: time.Hour}}}
	})
	small := newScene(t, 2, func(p *v1alpha1.NodePool) { p.Spec.Limits = &v1alpha1.Limits{Nodes: ptr.To[int32](1)} })
	healthy := newScene(t, 2, nil)
	brokenNodes := broken.waitNodes(t, 2, time.Minute)
	smallNodes := small.waitNodes(t, 2, time.Minute)
	before := healthy.waitNodes(t, 2, time.Minute)
	healthy.start(t)
	for _, s := range []*scene{broken, small, healthy} {
		s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Template.Image = "img-2" })
	}
	for s, reason := range map[*scene]string{broken: "InvalidBudget", small: "LimitsBelowSize"} {
		s.env.WaitFor(t, 30*time.Second, "Ready=False "+reason+" on "+s.name, func(context.Context) (bool, error) {
			c := meta.FindStatusCondition(s.pool(t).Status.Conditions, "Ready")
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason, nil
		})
	}
	healthy.waitReplaced(t, 2*time.Minute, "the healthy pool rolled", before, 2)
	for s, names := range map[*scene][]string{broken: brokenNodes, small: smallNodes} {
		nodes, err := s.nodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			_, marked := n.Annotations[contract.AnnotationDisruption]
			if marked || n.Spec.Unschedulable || n.DeletionTimestamp != nil || !slices.Contains(names, n.Name) {
				t.Errorf("pool %s cannot be applied, yet node %s was touched", s.name, n.Name)
			}
		}
	}
}

// A node cordoned for a maintenance event and then deleted is drained and
// let go by the deletion controller; the event ending meanwhile does not
// uncordon it or stop its drain.
func TestADeletedNodeUnderMaintenanceIsNotUncordoned(t *testing.T) {
	s := newScene(t, 2, nil)
	s.workload(t, 2, "1", fixture.ExitsAfter(4), fixture.GracePeriod(10))
	nodes := s.waitNodes(t, 2, time.Minute)
	victim := nodes[0]
	s.start(t)
	rebalance := maintenance.Event{ID: "rebalance-" + victim, Source: maintenance.SourceAWS, Type: maintenance.TypeRebalance,
		Status: maintenance.StatusScheduled}
	s.annotateNode(t, victim, contract.AnnotationMaintenanceEvents, maintenance.NewReport(maintenance.SourceAWS, false, []maintenance.Event{rebalance}).Encode())
	s.env.WaitFor(t, 30*time.Second, victim+" cordoned for the Rebalance, with the finalizer", func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := s.kube.Get(ctx, client.ObjectKey{Name: victim}, n); err != nil {
			return false, err
		}
		return n.Spec.Unschedulable && slices.Contains(n.Finalizers, contract.FinalizerTermination), nil
	})
	if err := s.env.Client.CoreV1().Nodes().Delete(context.Background(), victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The event ends while the node drains: it must stay cordoned.
	s.annotateNode(t, victim, contract.AnnotationMaintenanceEvents, maintenance.NewReport(maintenance.SourceAWS, false, nil).Encode())
	s.holdsFor(t, 3*time.Second, victim+" stays cordoned while it is deleted", func(ctx context.Context) bool {
		n := &corev1.Node{}
		err := s.kube.Get(ctx, client.ObjectKey{Name: victim}, n)
		return err != nil || n.Spec.Unschedulable
	})
	s.env.WaitFor(t, 90*time.Second, victim+" gone", func(ctx context.Context) (bool, error) {
		err := s.kube.Get(ctx, client.ObjectKey{Name: victim}, &corev1.Node{})
		return err != nil && client.IgnoreNotFound(err) == nil, nil
	})
	s.env.WaitForPods(t, "app=web", 2)
}

// A deleted node whose pods never finish (a kubelet that is gone, a
// finalizer nobody removes) is let go once terminationGracePeriod has
// passed: its machine is deleted whatever the drain reports.
func TestTerminationGracePeriodFinishesANodeThatWillNotEmpty(t *testing.T) {
	s := newScene(t, 1, func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.TerminationGracePeriod = &metav1.Duration{Duration: 5 * time.Second}
	})
	node := s.waitNodes(t, 1, time.Minute)[0]
	const hold = "test.sluice.dev/hold"
	s.env.Create(t, fixture.Pod(s.env.Namespace, "stuck", fixture.OnNode(node), fixture.Finalizer(hold)))
	t.Cleanup(func() {
		_ = s.kube.Patch(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.env.Namespace, Name: "stuck"}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	s.start(t)
	s.env.WaitFor(t, 30*time.Second, "the finalizer on "+node, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := s.kube.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err
		}
		return slices.Contains(n.Finalizers, contract.FinalizerTermination), nil
	})
	deleted := time.Now()
	if err := s.env.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, 90*time.Second, node+" gone", func(ctx context.Context) (bool, error) {
		err := s.kube.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
		return err != nil && client.IgnoreNotFound(err) == nil, nil
	})
	t.Logf("%s gone %.1fs after its deletion (terminationGracePeriod 5s)", node, time.Since(deleted).Seconds())
	if !slices.ContainsFunc(s.nodeEvents(t, node), func(e string) bool { return strings.HasPrefix(e, "TerminationGracePeriodElapsed") }) {
		t.Errorf("no TerminationGracePeriodElapsed event on %s: %v", node, s.nodeEvents(t, node))
	}
}

// waitReplaced waits until none of the before nodes is left and the pool has
// n Ready nodes.
func (s *scene) waitReplaced(t *testing.T, timeout time.Duration, what string, before []string, n int) {
	t.Helper()
	s.env.WaitFor(t, timeout, what, func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		fresh := 0
		for _, node := range nodes {
			if slices.Contains(before, node.Name) {
				return false, nil
			}
			if ready(node) {
				fresh++
			}
		}
		return fresh == n && len(nodes) == n, nil
	})
}

// A pool that loses its provider lets go of its nodes: sluice takes its
// finalizer off, so a Node can never be stuck by sluice.
func TestAPoolWithoutAProviderKeepsNoFinalizer(t *testing.T) {
	s := newScene(t, 1, nil)
	node := s.waitNodes(t, 1, time.Minute)[0]
	s.start(t)
	hasFinalizer := func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := s.kube.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err
		}
		return slices.Contains(n.Finalizers, contract.FinalizerTermination), nil
	}
	s.env.WaitFor(t, 30*time.Second, "the finalizer on "+node, hasFinalizer)
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Provider = v1alpha1.ProviderSpec{Name: v1alpha1.ProviderNone} })
	s.env.WaitFor(t, 30*time.Second, "the finalizer gone from "+node, func(ctx context.Context) (bool, error) {
		has, err := hasFinalizer(ctx)
		return !has, err
	})
}
