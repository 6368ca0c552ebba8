package drain_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// markNotReady makes a running pod report Ready=False for the last ten
// minutes, as a readiness probe that keeps failing would: far longer than any
// start the pod's probes allow, so it is stuck, not starting.
func markNotReady(t *testing.T, s *scene, pod corev1.Pod) {
	t.Helper()
	since := metav1.NewTime(time.Now().Add(-10 * time.Minute))
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady || pod.Status.Conditions[i].Type == corev1.ContainersReady {
			pod.Status.Conditions[i].Status = corev1.ConditionFalse
			pod.Status.Conditions[i].LastTransitionTime = since
		}
	}
	if _, err := s.env.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), &pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking %s not ready: %v", pod.Name, err)
	}
}

func TestNotReadyPodsUnderIfHealthyBudgetAreADeadlock(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "web", 3, s.onAll),
		fixture.PDB(ns, "web", "web", fixture.MinAvailable("2"), fixture.UnhealthyPodEvictionPolicy(policyv1.IfHealthyBudget)),
	)
	pods := s.env.WaitForPods(t, "app=web", 3)
	markNotReady(t, s, pods[0])
	markNotReady(t, s, pods[1])
	s.env.WaitFor(t, 30*time.Second, "the budget to see two unhealthy pods", func(ctx context.Context) (bool, error) {
		p, err := s.env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.CurrentHealthy == 1 && p.Status.DisruptionsAllowed == 0, nil
	})
	s.addSpare(t, 1)
	d := s.run(t, drain.Options{}, s.nodes[0])
	d.node(t, 0, drain.NodeBlocked)
	held := 0
	for _, p := range d.byApp["web"] {
		if p.Outcome == drain.PodBlocked {
			held++
			if p.Reason != drain.ReasonPDBDeadlock || !strings.Contains(p.Message, "Running but not Ready") || !strings.Contains(p.Message, "AlwaysAllow") {
				t.Errorf("%s: %s %q; want PDBDeadlock naming the unready pods and the AlwaysAllow remedy", p.Name, p.Reason, p.Message)
			}
		}
	}
	if held != 3 {
		t.Errorf("%d pods held; want all 3 (the budget is at zero and unready pods do not count)", held)
	}
	if d.took > 20*time.Second {
		t.Errorf("took %s: want the deadlock reported without waiting for a timeout", d.took)
	}
}

func TestEvictDaemonSetsGoLast(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.DaemonSet(ns, "agent", s.onAll, fixture.ExitsAfter(1)),
		fixture.Deployment(ns, "web", 2, s.onAll, fixture.GracePeriod(10), fixture.ExitsAfter(2)),
	)
	s.env.WaitForPods(t, "app in (agent,web)", 3)
	s.addSpare(t, 1)
	d := s.run(t, drain.Options{EvictDaemonSets: true}, s.nodes[0])
	d.node(t, 0, drain.NodeDrained)
	d.expect(t, "agent", want{outcome: drain.PodEvicted, message: "evicted last"})
	d.expect(t, "web", want{outcome: drain.PodEvicted})
	apps := map[string]string{}
	for app, pods := range d.byApp {
		for _, p := range pods {
			apps[ns+"/"+p.Name] = app
		}
	}
	var webGone, agentEvicted time.Time
	for _, p := range d.progress {
		if p.Kind == drain.ProgressGone && apps[p.Pod] == "web" && p.Time.After(webGone) {
			webGone = p.Time
		}
		if p.Kind == drain.ProgressEvicting && apps[p.Pod] == "agent" {
			agentEvicted = p.Time
		}
	}
	if agentEvicted.IsZero() || agentEvicted.Before(webGone) {
		t.Errorf("DaemonSet pod evicted at %s, before the last web pod was gone at %s", agentEvicted.Format(time.StampMilli), webGone.Format(time.StampMilli))
	}
}

// A rollout's replacements run for a while before they are Ready. Under
// IfHealthyBudget the budget is at zero meanwhile: that is a wait, reported
// as such, not a deadlock (kubectl drain waits too).
func TestSlowStartingReplacementsAreWaitedForNotCalledADeadlock(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "web", 3, s.onAll, fixture.StartsAfter(12), fixture.GracePeriod(5), fixture.ExitsAfter(1)),
		fixture.PDB(ns, "web", "web", fixture.MinAvailable("2"), fixture.UnhealthyPodEvictionPolicy(policyv1.IfHealthyBudget)),
	)
	s.env.WaitForPods(t, "app=web", 3)
	s.addSpare(t, 1)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	lowest := make(chan int, 1)
	go func() { lowest <- s.lowestReady(ctx, "app=web") }()

	d := s.run(t, drain.Options{}, s.nodes[0])
	stop()
	d.node(t, 0, drain.NodeDrained)
	d.expect(t, "web", want{outcome: drain.PodEvicted})
	if low := <-lowest; low < 2 {
		t.Errorf("%d Ready pods at the lowest; the budget promises 2", low)
	}
	waited := false
	for _, p := range d.progress {
		if p.Kind != drain.ProgressBlocked {
			continue
		}
		if p.Reason == drain.ReasonPDBDeadlock {
			t.Errorf("reported a deadlock while replacements were starting: %s", p.Message)
		}
		if p.Reason == drain.ReasonPDBWaitingForPods && strings.Contains(p.Message, "to become Ready") {
			waited = true
		}
	}
	if !waited {
		t.Errorf("no progress said the drain was waiting for replacements to become Ready")
	}
}

// lowestReady watches the pods the selector picks until ctx ends and returns
// the fewest that were Ready and not terminating at any look.
func (s *scene) lowestReady(ctx context.Context, selector string) int {
	lowest := -1
	for ctx.Err() == nil {
		list, err := s.env.Client.CoreV1().Pods(s.env.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			ready := 0
			for i := range list.Items {
				p := &list.Items[i]
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
						ready++
					}
				}
			}
			if lowest < 0 || ready < lowest {
				lowest = ready
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return lowest
}
