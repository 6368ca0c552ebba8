package nodepool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// notReady makes the node's (kwok) kubelet report NotReady, or Ready again.
func (s *scene) notReady(t *testing.T, node string, down bool) {
	t.Helper()
	var value any
	if down {
		value = "fault"
	}
	s.patchAnnotations(t, node, map[string]any{contract.SandboxNotReady: value})
}

// setNotReady is notReady for a node that may be gone.
func (s *scene) setNotReady(node string, down bool) error {
	var value any
	if down {
		value = "fault"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.SandboxNotReady: value}}})
	if err != nil {
		return err
	}
	return s.kube.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch))
}

func (s *scene) patchAnnotations(t *testing.T, node string, annotations map[string]any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.kube.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// recordOf reads the node's disruption record from the API server; nil when
// it has none or is gone.
func (s *scene) recordOf(ctx context.Context, node string) (*disruption.Record, error) {
	n := &corev1.Node{}
	if err := s.kube.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return disruption.RecordOf(n)
}

func repairOn(conditions ...v1alpha1.RepairCondition) func(*v1alpha1.NodePool) {
	return func(p *v1alpha1.NodePool) {
		p.Spec.Repair = &v1alpha1.RepairSpec{Conditions: conditions}
	}
}

func readyFalse(toleration time.Duration) v1alpha1.RepairCondition {
	return v1alpha1.RepairCondition{Type: "Ready", Status: "False", Toleration: metav1.Duration{Duration: toleration}}
}

// A node that flaps (NotReady 20 s, Ready 5 s, NotReady 20 s, Ready 5 s,
// NotReady) is repaired 40 s after it first broke, its toleration: a flap
// shorter than flapGrace does not reset its clock. Karpenter's repair
// restarts the clock at each flap, and would wait until 40 s after the
// last one (90 s).
func TestAFlapDoesNotResetTheRepairClock(t *testing.T) {
	s := newScene(t, 3, func(p *v1alpha1.NodePool) {
		repairOn(readyFalse(40 * time.Second))(p)
		p.Spec.Repair.FlapGrace = &metav1.Duration{Duration: 30 * time.Second}
		p.Spec.Repair.Steps = []v1alpha1.RepairStep{v1alpha1.RepairReplace}
	})
	nodes := s.waitNodes(t, 3, time.Minute)
	s.start(t)
	flapper := nodes[0]
	start := time.Now()
	repaired := make(chan time.Duration, 1)
	var readyAgain atomic.Int32 // Ready stretches the API server showed after the first breakage
	wasReady := true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.eachNodeChange(ctx, t, func(n *corev1.Node) {
		if n.Name != flapper {
			return
		}
		if r := ready(n); r && !wasReady {
			readyAgain.Add(1)
			wasReady = true
		} else if !r {
			wasReady = false
		}
		if r, err := disruption.RecordOf(n); err == nil && r != nil && r.Reason == v1alpha1.ReasonUnhealthy {
			select {
			case repaired <- time.Since(start):
			default:
			}
		}
	})
	// NotReady 20 s, Ready 5 s, NotReady 20 s, Ready 5 s, NotReady: each
	// stretch shorter than the toleration, each Ready one shorter than the
	// grace. The node may be repaired (and gone) before the flaps end.
	for i, d := range []time.Duration{20 * time.Second, 5 * time.Second, 20 * time.Second, 5 * time.Second, 40 * time.Second} {
		if err := s.setNotReady(flapper, i%2 == 0); err != nil {
			break // replaced already
		}
		select {
		case <-time.After(d):
			continue
		case took := <-repaired:
			repaired <- took
		}
		break
	}
	var took time.Duration
	select {
	case took = <-repaired:
	case <-time.After(time.Until(start.Add(85 * time.Second))):
		t.Fatalf("the flapping node was not repaired within 85 s of its first breakage: each flap reset its clock")
	}
	if took < 35*time.Second {
		t.Fatalf("repaired %s after the first breakage: before its toleration of 40 s", took)
	}
	if readyAgain.Load() < 1 {
		t.Fatalf("the node was never seen Ready between its breakages: the flaps did not happen, so the test proves nothing")
	}
	t.Logf("repaired %s after the first breakage (its toleration 40 s; the last flap ended 50 s in)", took.Round(time.Second))
}

// 30 % of one zone's nodes going NotReady at once is a zone failure, not
// three broken machines: no repair starts, the pool says why, and repairs
// go on once the zone is back within maxUnhealthyPerZone.
func TestTheBreakerHoldsOnAZoneFailure(t *testing.T) {
	s := newScene(t, 30, func(p *v1alpha1.NodePool) {
		repairOn(readyFalse(5 * time.Second))(p)
		p.Spec.Repair.Steps = []v1alpha1.RepairStep{v1alpha1.RepairReplace}
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "10%"}}
	})
	s.waitNodes(t, 30, 2*time.Minute)
	list, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string][]string{}
	for _, n := range list {
		z := n.Labels[corev1.LabelTopologyZone]
		zones[z] = append(zones[z], n.Name)
	}
	var zone string
	for z, names := range zones {
		if len(names) == 10 {
			zone = z
		}
	}
	if zone == "" {
		t.Fatalf("zones %v: want three of 10 nodes", zones)
	}
	down := zones[zone][:3]
	for _, n := range down {
		s.notReady(t, n, true)
	}
	for _, n := range down {
		s.env.WaitForNodeReady(t, n, false) // all three broken before the controller looks
	}
	s.start(t)
	s.env.WaitFor(t, time.Minute, "RepairHalted on the pool", func(ctx context.Context) (bool, error) {
		p := &v1alpha1.NodePool{}
		if err := s.kube.Get(ctx, client.ObjectKey{Name: s.name}, p); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, nodepool.ConditionRepairHalted)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == nodepool.ReasonBreakerOpen && strings.Contains(c.Message, "zone "+zone), nil
	})
	s.holdsFor(t, 20*time.Second, "no repair while the zone is down", func(ctx context.Context) bool {
		for _, n := range down {
			if r, err := s.recordOf(ctx, n); err != nil || r != nil {
				return false
			}
		}
		return true
	})
	if !slices.ContainsFunc(s.poolEvents(t), func(e string) bool { return strings.HasPrefix(e, "RepairHalted: ") }) {
		t.Errorf("pool events %v: want a RepairHalted Warning", s.poolEvents(t))
	}
	// One node back: two of ten are within 20 %, and the two are repaired.
	s.notReady(t, down[0], false)
	s.env.WaitFor(t, time.Minute, "the two broken nodes repaired", func(ctx context.Context) (bool, error) {
		for _, n := range down[1:] {
			r, err := s.recordOf(ctx, n)
			if err != nil || r == nil || r.Reason != v1alpha1.ReasonUnhealthy {
				return false, err
			}
		}
		return true, nil
	})
}

// The ladder: a broken node is first rebooted in place (drained while its
// kubelet answers); one the reboot mends is back in service, uncordoned; one
// it does not is replaced once rebootTimeout has passed.
func TestTheLadderRebootsThenReplaces(t *testing.T) {
	s := newScene(t, 3, func(p *v1alpha1.NodePool) {
		repairOn(readyFalse(5 * time.Second))(p)
		p.Spec.Repair.RebootTimeout = &metav1.Duration{Duration: time.Minute}
		// Two broken nodes of three: past the default breaker (20 %).
		p.Spec.Repair.MaxUnhealthy, p.Spec.Repair.MaxUnhealthyPerZone = "2", "100%"
	})
	nodes := s.waitNodes(t, 3, time.Minute)
	s.workload(t, 3, "1")
	mended, broken := nodes[0], nodes[1]
	s.patchAnnotations(t, broken, map[string]any{contract.SandboxFaultSurvivesReboot: "true"})
	s.notReady(t, mended, true)
	s.notReady(t, broken, true)
	s.start(t)
	s.env.WaitFor(t, 90*time.Second, mended+" repaired by its reboot", func(ctx context.Context) (bool, error) {
		return slices.ContainsFunc(s.nodeEvents(t, mended), func(e string) bool { return strings.HasPrefix(e, "Repaired: ") }), nil
	})
	n := &corev1.Node{}
	if err := s.kube.Get(context.Background(), client.ObjectKey{Name: mended}, n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable || n.Annotations[contract.SandboxRebootedAt] == "" || !ready(n) {
		t.Fatalf("%s after its repair: unschedulable %v, rebooted at %q, ready %v; want rebooted, Ready and uncordoned",
			mended, n.Spec.Unschedulable, n.Annotations[contract.SandboxRebootedAt], ready(n))
	}
	if _, recorded := n.Annotations[contract.AnnotationDisruption]; recorded {
		t.Fatalf("%s still carries a disruption record after its repair", mended)
	}
	s.env.WaitFor(t, 3*time.Minute, broken+" replaced after its reboot did not mend it", func(ctx context.Context) (bool, error) {
		got := &corev1.Node{}
		err := s.kube.Get(ctx, client.ObjectKey{Name: broken}, got)
		return err != nil && client.IgnoreNotFound(err) == nil, client.IgnoreNotFound(err)
	})
	events := s.nodeEvents(t, broken)
	for _, want := range []string{"Rebooting: ", "RepairEscalated: "} {
		if !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, want) }) {
			t.Errorf("%s's events %v: want %q", broken, events, want)
		}
	}
	s.waitNodes(t, 3, time.Minute)
}

// A repair never waits for a voluntary budget: a pool whose budgets allow
// nothing still repairs its broken node.
func TestARepairIsNotHeldByVoluntaryBudgets(t *testing.T) {
	s := newScene(t, 3, func(p *v1alpha1.NodePool) {
		repairOn(readyFalse(5 * time.Second))(p)
		p.Spec.Repair.Steps = []v1alpha1.RepairStep{v1alpha1.RepairReplace}
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "0"}}
	})
	nodes := s.waitNodes(t, 3, time.Minute)
	s.notReady(t, nodes[2], true)
	s.start(t)
	s.env.WaitFor(t, time.Minute, fmt.Sprintf("%s repaired under a budget of 0", nodes[2]), func(ctx context.Context) (bool, error) {
		r, err := s.recordOf(ctx, nodes[2])
		return r != nil && r.Reason == v1alpha1.ReasonUnhealthy, err
	})
}

// A node broken again soon after the reboot that mended it is replaced,
// not rebooted a second time; and a ladder without Replace ends after its
// reboot: the node is uncordoned, left alone, and said so, never rebooted
// in a loop.
func TestTheLadderDoesNotLoop(t *testing.T) {
	s := newScene(t, 3, func(p *v1alpha1.NodePool) {
		repairOn(readyFalse(5 * time.Second))(p)
		p.Spec.Repair.RebootTimeout = &metav1.Duration{Duration: time.Minute}
		p.Spec.Repair.MaxUnhealthy, p.Spec.Repair.MaxUnhealthyPerZone = "2", "100%"
	})
	nodes := s.waitNodes(t, 3, time.Minute)
	again := nodes[0]
	s.notReady(t, again, true)
	s.start(t)
	s.env.WaitFor(t, 90*time.Second, again+" repaired by its reboot", func(ctx context.Context) (bool, error) {
		return slices.ContainsFunc(s.nodeEvents(t, again), func(e string) bool { return strings.HasPrefix(e, "Repaired: ") }), nil
	})
	boot := s.bootOf(t, again)
	s.notReady(t, again, true)
	s.env.WaitFor(t, 90*time.Second, again+" replaced once broken again", func(ctx context.Context) (bool, error) {
		r, err := s.recordOf(ctx, again)
		return r != nil && r.Reason == v1alpha1.ReasonUnhealthy && r.Phase == disruption.PhaseLaunching, err
	})
	if now := s.bootOf(t, again); now != boot {
		t.Fatalf("%s was rebooted a second time (boot %s, then %s); want it replaced", again, boot, now)
	}

	// A ladder of one reboot: the fault outlives it.
	s.edit(t, func(p *v1alpha1.NodePool) { p.Spec.Repair.Steps = []v1alpha1.RepairStep{v1alpha1.RepairReboot} })
	spent := nodes[1]
	s.patchAnnotations(t, spent, map[string]any{contract.SandboxFaultSurvivesReboot: "true"})
	s.notReady(t, spent, true)
	s.env.WaitFor(t, 3*time.Minute, spent+"'s ladder spent", func(ctx context.Context) (bool, error) {
		return slices.ContainsFunc(s.nodeEvents(t, spent), func(e string) bool { return strings.HasPrefix(e, "RepairExhausted: ") }), nil
	})
	boot = s.bootOf(t, spent)
	if boot == "" {
		t.Fatalf("%s's ladder was spent without a reboot", spent)
	}
	s.holdsFor(t, 20*time.Second, spent+" left alone, uncordoned, not rebooted again", func(ctx context.Context) bool {
		n := &corev1.Node{}
		if err := s.kube.Get(ctx, client.ObjectKey{Name: spent}, n); err != nil {
			return false
		}
		_, recorded := n.Annotations[contract.AnnotationDisruption]
		return !recorded && !n.Spec.Unschedulable && n.Status.NodeInfo.BootID == boot
	})
}

// bootOf is the node's boot ID (a kwok reboot gives it a new one).
func (s *scene) bootOf(t *testing.T, node string) string {
	t.Helper()
	n := &corev1.Node{}
	if err := s.kube.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	return n.Status.NodeInfo.BootID
}
