package rebootplan

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

var now = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func members(n int) []*corev1.Node {
	out := make([]*corev1.Node, n)
	for i := range out {
		out[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%02d", i), Annotations: map[string]string{
			contract.AnnotationRebootRequired: now.Add(-time.Duration(n-i) * time.Minute).Format(time.RFC3339)}}}
		out[i].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}
	return out
}

func pod(name, node string, grace int64, labels map[string]string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace}}
}

func pool(reboot *v1alpha1.RebootSpec) *v1alpha1.NodePool {
	return &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.NodePoolSpec{
		Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok},
		Reboot:   reboot,
		Disruption: &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{
			{Nodes: "20%", Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonRebootRequired}}}},
	}}
}

func TestRoundsAreAsWideAsTheBudget(t *testing.T) {
	nodes := members(10)
	var pods []corev1.Pod
	for _, n := range nodes {
		pods = append(pods, pod("p-"+n.Name, n.Name, 5, nil))
	}
	pods = append(pods, pod("backup", "n03", 5, map[string]string{"app": "backup"}))
	nodes[7].Annotations[contract.AnnotationDoNotDisrupt] = "true"
	f, err := Predict(Input{Pool: pool(&v1alpha1.RebootSpec{BlockingPodSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "backup"}}}}),
		Members: nodes, Pods: pods, Downtime: 3 * time.Second, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if f.Waiting != 10 || f.PerRound != 2 || len(f.Rounds) != 4 {
		t.Fatalf("waiting %d, per round %d, rounds %d: want 10 waiting, 2 a round (20%% of 10), 4 rounds for the 8 free", f.Waiting, f.PerRound, len(f.Rounds))
	}
	if got := f.Rounds[0].Nodes; got[0] != "n00" || got[1] != "n01" {
		t.Errorf("first round %v: want the longest waiting, n00 and n01", got)
	}
	held := map[string]string{}
	for _, h := range f.Held {
		held[h.Node] = h.Reason
	}
	if held["n03"] != HeldBlockingPod || held["n07"] != HeldProtected || len(held) != 2 {
		t.Errorf("held %v: want n03 for its blocking pod, n07 for do-not-disrupt", held)
	}
	// Each round: the pods' 5 s grace, 1 s of eviction lag, 3 s down, 5 s
	// to be seen back.
	if round := time.Duration(f.Total) / 4; round < 13*time.Second || round > 15*time.Second {
		t.Errorf("total %s for 4 rounds: want about 14 s each", f.Total)
	}
	if time.Duration(f.OneAtATime) < 19*time.Duration(f.Total)/10 {
		t.Errorf("one at a time %s, in rounds of 2 %s: one at a time must take about twice as long", f.OneAtATime, f.Total)
	}
}

func TestAClosedWindowPutsTheFirstRoundOff(t *testing.T) {
	f, err := Predict(Input{Pool: pool(&v1alpha1.RebootSpec{Windows: []v1alpha1.RebootWindow{{Schedule: "0 22 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}}}}),
		Members: members(3), Downtime: 3 * time.Second, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rounds) == 0 || !f.Rounds[0].Start.Equal(time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)) {
		t.Fatalf("rounds %+v: want the first at 22:00, when the window opens", f.Rounds)
	}
}

func TestAPoolWithoutRebootSpecRebootsNothing(t *testing.T) {
	f, err := Predict(Input{Pool: pool(nil), Members: members(2), Downtime: time.Second, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rounds) != 0 || len(f.Held) != 2 || f.Held[0].Reason != HeldNoRebootSpec {
		t.Fatalf("%+v: want both held, the pool has no spec.reboot", f)
	}
}
