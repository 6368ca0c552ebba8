package drain_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

func TestPDBBlockedPodsWaitForReplacements(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "web", 3, s.onAll, fixture.ExitsAfter(1)),
		fixture.PDB(ns, "web", "web", fixture.MinAvailable("2")),
	)
	s.env.WaitForPods(t, "app=web", 3)
	s.addSpare(t, 1)
	d := s.run(t, drain.Options{}, s.nodes[0])
	d.node(t, 0, drain.NodeDrained)
	d.expect(t, "web", want{outcome: drain.PodEvicted})
	var blocked bool
	for _, p := range d.progress {
		if p.Kind == drain.ProgressBlocked && p.Reason == drain.ReasonPDBBlocked && p.PDB == "web" && strings.Contains(p.Message, "PodDisruptionBudget web") {
			blocked = true
		}
	}
	if !blocked {
		t.Errorf("no pod was reported held by PodDisruptionBudget web; progress: %+v", d.progress)
	}
}

func TestStaticPDBDeadlocksAreFoundAtOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		replicas int32
		pdb      fixture.PDBOption
		fix      string
	}{
		{"min-available-equals-replicas", 1, fixture.MinAvailable("1"), "scale deployment app to 2, or lower minAvailable on PodDisruptionBudget app to 0"},
		{"max-unavailable-zero", 2, fixture.MaxUnavailable("0"), "raise maxUnavailable on PodDisruptionBudget app to at least 1"},
		{"min-available-100-percent", 2, fixture.MinAvailable("100%"), "lower minAvailable on PodDisruptionBudget app to 50%"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScene(t, 1)
			ns := s.env.Namespace
			s.env.Create(t, fixture.Deployment(ns, "app", tc.replicas, s.onAll), fixture.PDB(ns, "app", "app", tc.pdb))
			s.env.WaitForPods(t, "app=app", int(tc.replicas))
			s.env.WaitFor(t, 30*time.Second, "the budget's status", func(ctx context.Context) (bool, error) {
				p, err := s.env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "app", metav1.GetOptions{})
				return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods == tc.replicas, nil
			})
			d := s.run(t, drain.Options{}, s.nodes[0])
			n := d.node(t, 0, drain.NodeBlocked)
			d.expect(t, "app", want{outcome: drain.PodBlocked, reason: drain.ReasonPDBDeadlock, message: tc.fix})
			if n.Cordoned || d.took > 5*time.Second {
				t.Errorf("cordoned=%v after %s: want an answer within seconds and the node untouched", n.Cordoned, d.took)
			}
		})
	}
}

func TestUnschedulableReplacementIsADeadlock(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1) // no spare: the replacement has nowhere to go
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "web", 2, s.onAll, fixture.GracePeriod(2)),
		fixture.PDB(ns, "web", "web", fixture.MaxUnavailable("1")),
	)
	s.env.WaitForPods(t, "app=web", 2)
	d := s.run(t, drain.Options{}, s.nodes[0])
	n := d.node(t, 0, drain.NodeBlocked)
	pods := d.byApp["web"]
	outcomes := map[drain.PodOutcome]int{}
	for _, p := range pods {
		outcomes[p.Outcome]++
		if p.Outcome == drain.PodBlocked && (p.Reason != drain.ReasonPDBDeadlock || !strings.Contains(p.Message, "cannot be scheduled") || p.PDB != "web") {
			t.Errorf("held pod: %s %q (pdb %q); want PDBDeadlock naming the unschedulable replacement and budget web", p.Reason, p.Message, p.PDB)
		}
	}
	if outcomes[drain.PodEvicted] != 1 || outcomes[drain.PodBlocked] != 1 {
		t.Errorf("outcomes %v: want one evicted, one held", outcomes)
	}
	if !n.Cordoned || d.took > 30*time.Second {
		t.Errorf("cordoned=%v took %s: want the node cordoned and the deadlock reported without a timeout", n.Cordoned, d.took)
	}
	for _, p := range pods {
		if p.Outcome == drain.PodBlocked {
			if ev := s.events(t, ns, "Pod", p.Name); !ev["EvictionBlocked"] {
				t.Errorf("pod %s events %v: want EvictionBlocked", p.Name, ev)
			}
		}
	}
}

func TestTwoBudgetsOverOnePod(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "web", 2, s.onAll),
		fixture.PDB(ns, "web-a", "web", fixture.MaxUnavailable("1")),
		fixture.PDB(ns, "web-b", "web", fixture.MaxUnavailable("1")),
	)
	s.env.WaitForPods(t, "app=web", 2)
	d := s.run(t, drain.Options{}, s.nodes[0])
	d.node(t, 0, drain.NodeBlocked)
	d.expect(t, "web", want{outcome: drain.PodBlocked, reason: drain.ReasonMultiplePDBs, message: "2 PodDisruptionBudgets (web-a, web-b)"})
}

func TestDeadlineShortensGracePeriods(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	s.env.Create(t, fixture.Deployment(ns, "slow", 2, s.onAll, fixture.GracePeriod(60)))
	s.env.WaitForPods(t, "app=slow", 2)
	s.addSpare(t, 1)
	d := s.run(t, drain.Options{Deadline: time.Now().Add(12 * time.Second)}, s.nodes[0])
	d.node(t, 0, drain.NodeDrained)
	for _, p := range d.byApp["slow"] {
		g := ptr.Deref(p.GracePeriodSeconds, -1)
		if p.Outcome != drain.PodEvicted || g < 8 || g > 11 || p.GoneAfterSeconds == nil || *p.GoneAfterSeconds > 12 {
			t.Errorf("%s: %s grace %d gone after %v; want evicted with the ~10s left and gone before the deadline", p.Name, p.Outcome, g, ptr.Deref(p.GoneAfterSeconds, -1))
		}
	}
}

func TestDeadlineForcesHeldPodsOrStops(t *testing.T) {
	t.Parallel()
	for _, action := range []drain.DeadlineAction{drain.OnDeadlineDelete, drain.OnDeadlineStop} {
		t.Run(string(action), func(t *testing.T) {
			t.Parallel()
			s := newScene(t, 1)
			ns := s.env.Namespace
			s.env.Create(t,
				fixture.Deployment(ns, "solo", 1, s.onAll, fixture.GracePeriod(4)),
				fixture.PDB(ns, "solo", "solo", fixture.MinAvailable("1")),
				fixture.Deployment(ns, "pinned", 1, s.onAll, fixture.GracePeriod(3), fixture.Annotate(contract.AnnotationDoNotDisrupt, "true")),
			)
			s.env.WaitForPods(t, "app in (solo,pinned)", 2)
			s.env.WaitFor(t, 30*time.Second, "the budget's status", func(ctx context.Context) (bool, error) {
				p, err := s.env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "solo", metav1.GetOptions{})
				return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods == 1, nil
			})
			s.addSpare(t, 1)
			deadline := time.Now().Add(12 * time.Second)
			d := s.run(t, drain.Options{Deadline: deadline, OnDeadline: action}, s.nodes[0])
			if action == drain.OnDeadlineDelete {
				d.node(t, 0, drain.NodeDrained)
				d.expect(t, "solo", want{outcome: drain.PodDeleted, reason: drain.ReasonDeadlineForced, message: "PDBDeadlock"})
				d.expect(t, "pinned", want{outcome: drain.PodDeleted, reason: drain.ReasonDeadlineForced, message: "DoNotDisrupt"})
				for _, app := range []string{"solo", "pinned"} {
					p := d.byApp[app][0]
					if g := ptr.Deref(p.GracePeriodSeconds, -1); g < 3 || p.GoneAfterSeconds == nil || time.Duration(*p.GoneAfterSeconds*float64(time.Second)) > 13*time.Second {
						t.Errorf("%s: grace %d gone after %v: want its whole grace period, gone by the deadline", app, g, ptr.Deref(p.GoneAfterSeconds, -1))
					}
				}
				return
			}
			d.node(t, 0, drain.NodeBlocked)
			d.expect(t, "solo", want{outcome: drain.PodBlocked, reason: drain.ReasonPDBDeadlock})
			d.expect(t, "pinned", want{outcome: drain.PodBlocked, reason: drain.ReasonDoNotDisrupt})
			if time.Now().Before(deadline) {
				t.Errorf("drain with --on-deadline=stop returned before the deadline")
			}
		})
	}
}

// TestALoosenedBudgetFreesItsPodsMidDrain: a drain against a deadline holds a
// pod whose budget can never allow an eviction, and says how to fix the
// budget. Someone does, mid-drain: the pod is evicted as soon as the budget
// allows it, not deleted at the deadline.
func TestALoosenedBudgetFreesItsPodsMidDrain(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "app", 2, s.onAll, fixture.GracePeriod(3)),
		fixture.PDB(ns, "app", "app", fixture.MaxUnavailable("0")),
	)
	s.env.WaitForPods(t, "app=app", 2)
	s.env.WaitForPDB(t, "app", 2)
	s.addSpare(t, 1)

	var once sync.Once
	held := make(chan struct{})
	s.observe = func(p drain.Progress) {
		if p.Kind == drain.ProgressBlocked && p.Reason == drain.ReasonPDBDeadlock && p.PDB == "app" {
			once.Do(func() { close(held) })
		}
	}
	loosened := make(chan time.Time, 1)
	go func() {
		select {
		case <-held:
		case <-time.After(30 * time.Second):
			return
		}
		patch := []byte(`{"spec":{"maxUnavailable":1}}`)
		if _, err := s.env.Client.PolicyV1().PodDisruptionBudgets(ns).Patch(context.Background(), "app", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("loosening the budget: %v", err)
			loosened <- time.Time{}
			return
		}
		loosened <- time.Now()
	}()
	deadline := time.Now().Add(75 * time.Second)
	d := s.run(t, drain.Options{Deadline: deadline, OnDeadline: drain.OnDeadlineDelete}, s.nodes[0])
	ended := time.Now()
	d.node(t, 0, drain.NodeDrained)
	d.expect(t, "app", want{outcome: drain.PodEvicted})
	select {
	case at := <-loosened:
		if took := ended.Sub(at); !at.IsZero() && took > 25*time.Second {
			t.Errorf("the drain ended %s after the budget was loosened: want the pods gone within seconds of it", took.Round(time.Second))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the drain never reported the pods held by PodDisruptionBudget app (PDBDeadlock)")
	}
}

// TestAdmissionDenied: an eviction a policy refuses is reported with the
// policy's words, ends a drain with --timeout on time, ends a drain without
// one once the denials repeat, and is never overridden by a deadline.
func TestAdmissionDenied(t *testing.T) {
	t.Parallel()
	s := newScene(t, 3)
	ns := s.env.Namespace
	denyEvictions(t, s)
	for i, app := range []string{"timeout", "untimed", "deadline"} {
		s.env.Create(t, fixture.Deployment(ns, app, 1, onNode(s.nodes[i]), fixture.GracePeriod(3)))
	}
	pods := s.env.WaitForPods(t, "app in (timeout,untimed,deadline)", 3)
	// The API server loads the policy asynchronously: wait until a dry-run
	// eviction is denied by it.
	s.env.WaitFor(t, 30*time.Second, "the policy to deny evictions", func(ctx context.Context) (bool, error) {
		err := s.env.Client.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Namespace: ns, Name: pods[0].Name},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
		})
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), nil
	})

	t.Run("timeout", func(t *testing.T) {
		d := s.run(t, drain.Options{Timeout: 6 * time.Second}, s.nodes[0])
		d.node(t, 0, drain.NodeBlocked)
		d.expect(t, "timeout", want{outcome: drain.PodBlocked, reason: drain.ReasonAdmissionDenied, message: "evictions are frozen"})
		if d.took > 9*time.Second {
			t.Errorf("drain with --timeout 6s took %s", d.took)
		}
	})
	t.Run("no-timeout-ends-by-itself", func(t *testing.T) {
		d := s.run(t, drain.Options{}, s.nodes[1])
		d.node(t, 0, drain.NodeBlocked)
		d.expect(t, "untimed", want{outcome: drain.PodBlocked, reason: drain.ReasonAdmissionDenied})
		if d.took > 20*time.Second {
			t.Errorf("a drain against a policy that keeps denying took %s; want it to give up after repeated denials", d.took)
		}
	})
	t.Run("deadline-does-not-override-a-policy", func(t *testing.T) {
		d := s.run(t, drain.Options{Deadline: time.Now().Add(8 * time.Second)}, s.nodes[2])
		d.node(t, 0, drain.NodeBlocked)
		d.expect(t, "deadline", want{outcome: drain.PodBlocked, reason: drain.ReasonAdmissionDenied})
		if left := s.podUIDs(t); len(left) != 3 {
			t.Errorf("pods after the drains: %v; a denied pod must never be deleted", left)
		}
	})
}

func denyEvictions(t *testing.T, s *scene) {
	t.Helper()
	ns := s.env.Namespace
	ctx := context.Background()
	name := "deny-evictions-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "evictions are frozen in this namespace"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	if _, err := s.env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := s.env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// TestDeadlineStillReportsRefusedPods: with a deadline, everything that can
// leave does, but a pod refused for want of a flag keeps the node from being
// reported drained.
func TestDeadlineStillReportsRefusedPods(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "plain", 1, s.onAll, fixture.ExitsAfter(1)),
		fixture.Pod(ns, "lonely", fixture.OnNode(s.nodes[0])),
	)
	s.env.WaitForPods(t, "app in (plain,lonely)", 2)
	s.addSpare(t, 1)
	d := s.run(t, drain.Options{Deadline: time.Now().Add(10 * time.Second)}, s.nodes[0])
	d.node(t, 0, drain.NodeBlocked)
	d.expect(t, "plain", want{outcome: drain.PodEvicted})
	d.expect(t, "lonely", want{outcome: drain.PodBlocked, reason: drain.ReasonUnreplicated})
}

func TestParallelDrainsShareOneBudget(t *testing.T) {
	t.Parallel()
	s := newScene(t, 3)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "web", 6, s.onAll, fixture.ExitsAfter(1)),
		fixture.PDB(ns, "web", "web", fixture.MaxUnavailable("1")),
	)
	s.env.WaitForPods(t, "app=web", 6)
	s.addSpare(t, 2)

	// Watch the workload while three nodes drain at once: never fewer than 5 healthy pods.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := s.env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	healthy := map[types.UID]bool{}
	lowest := 6
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			healthy[p.UID] = ev.Type != watch.Deleted && p.DeletionTimestamp == nil && sandboxtest.PodReady(p)
			n := 0
			for _, h := range healthy {
				if h {
					n++
				}
			}
			if len(healthy) >= 6 && n < lowest {
				lowest = n
			}
			mu.Unlock()
		}
	}()
	d := s.run(t, drain.Options{Parallel: 3}, s.nodes...)
	cancel()
	w.Stop()
	<-done
	for i := range s.nodes {
		d.node(t, i, drain.NodeDrained)
	}
	d.expect(t, "web", want{outcome: drain.PodEvicted})
	if lowest < 5 {
		t.Errorf("healthy web pods fell to %d during the parallel drain; the budget allows 5", lowest)
	}
}

func TestDryRunSpendsBudgetsAcrossNodesAndChangesNothing(t *testing.T) {
	t.Parallel()
	s := newScene(t, 2)
	ns := s.env.Namespace
	tier := fixture.Label("tier", "web")
	s.env.Create(t,
		fixture.Deployment(ns, "web-a", 2, onNode(s.nodes[0]), tier),
		fixture.Deployment(ns, "web-b", 2, onNode(s.nodes[1]), tier),
		fixture.PDB(ns, "web", "", fixture.SelectLabels(map[string]string{"tier": "web"}), fixture.MaxUnavailable("1")),
	)
	s.env.WaitForPods(t, "tier=web", 4)
	s.env.WaitFor(t, 30*time.Second, "the budget's status", func(ctx context.Context) (bool, error) {
		p, err := s.env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.DisruptionsAllowed == 1 && p.Status.ExpectedPods == 4, nil
	})
	before := s.podUIDs(t)
	d := s.run(t, drain.Options{DryRun: true}, s.nodes...)
	d.node(t, 0, drain.NodeWouldDrain)
	d.node(t, 1, drain.NodeWouldDrain)
	counts := map[drain.PodOutcome]int{}
	for _, app := range []string{"web-a", "web-b"} {
		for _, p := range d.byApp[app] {
			counts[p.Outcome]++
			if p.Outcome == drain.PodWouldWait && (p.Reason != drain.ReasonPDBBlocked || !strings.Contains(p.Message, "taken by")) {
				t.Errorf("%s: %s %q; want PDBBlocked naming the pod that took the budget", p.Name, p.Reason, p.Message)
			}
		}
	}
	if counts[drain.PodWouldEvict] != 1 || counts[drain.PodWouldWait] != 3 {
		t.Errorf("dry run outcomes %v: the budget allows one disruption across both nodes, so want 1 WouldEvict and 3 WouldWait", counts)
	}
	for _, name := range s.nodes {
		n := s.getNode(t, name)
		if n.Spec.Unschedulable || n.Annotations[contract.AnnotationDrain] != "" {
			t.Errorf("dry run changed node %s", name)
		}
	}
	if after := s.podUIDs(t); len(after) != len(before) {
		t.Errorf("dry run changed pods: before %v after %v", before, after)
	}
}

func TestClaimsResumeAbandonedDrainsAndRefuseConcurrentOnes(t *testing.T) {
	t.Parallel()
	s := newScene(t, 2)
	ns := s.env.Namespace
	s.env.Create(t, fixture.Deployment(ns, "web", 2, s.onAll, fixture.ExitsAfter(1)))
	s.env.WaitForPods(t, "app=web", 2)
	s.addSpare(t, 1)
	ctx := context.Background()
	stale, _ := json.Marshal(map[string]any{"id": "crashed", "holder": "sluice drain@gone", "started": time.Now().Add(-time.Hour), "renewed": time.Now().Add(-time.Minute)})
	live, _ := json.Marshal(map[string]any{"id": "other", "holder": "sluice drain@elsewhere", "started": time.Now(), "renewed": time.Now()})
	for i, claim := range [][]byte{stale, live} {
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationDrain: string(claim), contract.AnnotationCordonedBy: ownership.OwnerCLI}},
			"spec":     map[string]any{"unschedulable": true},
		})
		if _, err := s.env.Client.CoreV1().Nodes().Patch(ctx, s.nodes[i], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := s.run(t, drain.Options{}, s.nodes...)
	d.node(t, 0, drain.NodeDrained)
	n := d.node(t, 1, drain.NodeFailed)
	if !strings.Contains(n.Message, "being drained by sluice drain@elsewhere") {
		t.Errorf("live claim: message %q; want it to name the other drain", n.Message)
	}
	if got := s.getNode(t, s.nodes[0]).Annotations[contract.AnnotationCordonedBy]; got != ownership.OwnerCLI {
		t.Errorf("resumed node lost its cordoned-by record: %q", got)
	}
	if got := s.getNode(t, s.nodes[1]).Annotations[contract.AnnotationDrain]; got != string(live) {
		t.Errorf("the other drain's claim was changed: %q", got)
	}
}

func TestPriorityWavesLowFirst(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	low, high := "low-"+ns, "high-"+ns
	s.env.Create(t, fixture.PriorityClass(low, 100), fixture.PriorityClass(high, 1000))
	t.Cleanup(func() {
		for _, pc := range []string{low, high} {
			_ = s.env.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), pc, metav1.DeleteOptions{})
		}
	})
	s.env.Create(t,
		fixture.Deployment(ns, "batch", 2, s.onAll, fixture.Priority(low), fixture.GracePeriod(10), fixture.ExitsAfter(2)),
		fixture.Deployment(ns, "frontend", 1, s.onAll, fixture.Priority(high), fixture.ExitsAfter(1)),
	)
	s.env.WaitForPods(t, "app in (batch,frontend)", 3)
	s.addSpare(t, 1)
	d := s.run(t, drain.Options{}, s.nodes[0])
	d.node(t, 0, drain.NodeDrained)
	var lastLowGone, highEvicted time.Time
	apps := map[string]string{}
	for app, pods := range d.byApp {
		for _, p := range pods {
			apps[ns+"/"+p.Name] = app
		}
	}
	for _, p := range d.progress {
		switch {
		case p.Kind == drain.ProgressGone && apps[p.Pod] == "batch" && p.Time.After(lastLowGone):
			lastLowGone = p.Time
		case p.Kind == drain.ProgressEvicting && apps[p.Pod] == "frontend":
			highEvicted = p.Time
		}
	}
	if lastLowGone.IsZero() || highEvicted.IsZero() || highEvicted.Before(lastLowGone) {
		t.Errorf("frontend (priority 1000) evicted at %s, batch (priority 100) gone at %s: want the lower priority gone first",
			highEvicted.Format(time.StampMilli), lastLowGone.Format(time.StampMilli))
	}
}
