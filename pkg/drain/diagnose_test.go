package drain

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDiagnoseBlockedTellsAStartFromADeadlock(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Status:     policyv1.PodDisruptionBudgetStatus{DesiredHealthy: 2, CurrentHealthy: 1, ExpectedPods: 3},
	}
	alwaysAllow := pdb.DeepCopy()
	alwaysAllow.Spec.UnhealthyPodEvictionPolicy = ptrTo(policyv1.AlwaysAllow)
	probe := &corev1.Probe{InitialDelaySeconds: 60, PeriodSeconds: 10, FailureThreshold: 6} // a 2-minute window
	for _, tc := range []struct {
		name    string
		pdb     *policyv1.PodDisruptionBudget
		pod     corev1.Pod
		reason  Reason
		message string
	}{
		{"running, not ready for 10s", pdb, unready(now, 10*time.Second, nil), ReasonPDBWaitingForPods, "waiting for p (Running, not Ready yet; its probes allow 50s more) to become Ready"},
		{"not ready longer than the minimum window", pdb, unready(now, 90*time.Second, nil), ReasonPDBDeadlock, "p is Running but not Ready"},
		{"a long readiness probe widens the window", pdb, unready(now, 90*time.Second, probe), ReasonPDBWaitingForPods, "allow 30s more"},
		{"a startup probe adds to it", pdb, unready(now, 210*time.Second, probe, withStartup(probe)), ReasonPDBWaitingForPods, "allow 30s more"},
		{"crash-looping is not a start", pdb, unready(now, 5*time.Second, nil, crashLooping), ReasonPDBDeadlock, "Running but not Ready"},
		{"stuck but AlwaysAllow: the budget recovers by evicting it", alwaysAllow, unready(now, 10*time.Minute, nil), ReasonPDBBlocked, "waiting for the budget to recover"},
		{"pending on a node", pdb, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}, ReasonPDBWaitingForPods, "waiting for p to become Ready"},
		{"unschedulable", pdb, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}}}}, ReasonPDBDeadlock, "cannot be scheduled (0/3 nodes are available)"},
		{"a replacement that cannot pull its image", pdb, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}}}, ReasonPDBDeadlock, "p (ImagePullBackOff) cannot start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := diagnoseBlocked(tc.pdb, []corev1.Pod{tc.pod}, now)
			if reason != tc.reason || !strings.Contains(msg, tc.message) {
				t.Errorf("got %s %q; want %s containing %q", reason, msg, tc.reason, tc.message)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// unready is a Running pod whose readiness has been false for age.
func unready(now time.Time, age time.Duration, readiness *corev1.Probe, opts ...func(*corev1.Pod)) corev1.Pod {
	since := metav1.NewTime(now.Add(-age))
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "main", ReadinessProbe: readiness}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &since,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: since}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func withStartup(pr *corev1.Probe) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].StartupProbe = pr }
}

func crashLooping(p *corev1.Pod) {
	p.Status.ContainerStatuses[0].RestartCount = 4
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
}

// One pod starting cannot make up for two the budget lacks when the other is
// stuck not Ready: that is a deadlock, not a wait.
func TestDiagnoseBlockedWeighsStartingPodsAgainstTheGap(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Status: policyv1.PodDisruptionBudgetStatus{DesiredHealthy: 3, CurrentHealthy: 1, ExpectedPods: 4}}
	starting := unready(now, 10*time.Second, nil)
	stuck := unready(now, 10*time.Minute, nil)
	stuck.Name = "q"
	if reason, msg := diagnoseBlocked(pdb, []corev1.Pod{starting, stuck}, now); reason != ReasonPDBDeadlock || !strings.Contains(msg, "q is Running but not Ready") {
		t.Errorf("got %s %q; want the stuck pod named as a deadlock", reason, msg)
	}
	pdb.Status.CurrentHealthy = 2 // one short: the starting pod closes the gap
	if reason, _ := diagnoseBlocked(pdb, []corev1.Pod{starting, stuck}, now); reason != ReasonPDBWaitingForPods {
		t.Errorf("got %s; want a wait for the starting pod", reason)
	}
}
