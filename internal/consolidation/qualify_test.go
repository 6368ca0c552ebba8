package consolidation

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/contract"
)

// A first look with QualifyBy set to its second look's time counts the nodes
// whose consolidateAfter (30 s) will have run out by then, and only those;
// the second look, deciding at its own time, makes the same command. Nothing
// else is judged ahead: a do-not-disrupt that lapses before QualifyBy still
// holds, and a QualifyBy before Now is Now.
func TestQualifyByLooksAheadToTheSecondLook(t *testing.T) {
	const validation = 15 * time.Second
	churn := map[string]time.Time{
		"soon":  t0.Add(-25 * time.Second), // consolidateAfter runs out at t0+5s
		"later": t0.Add(-10 * time.Second), // at t0+20s
	}
	soon, later, busy := testNode("soon", "Standard_D4s_v5", "on-demand"), testNode("later", "Standard_D8s_v5", "on-demand"),
		testNode("busy", "Standard_D4s_v5", "on-demand")
	// do-not-disrupt for an hour from its creation: until t0+10s.
	guarded := testNode("guarded", "Standard_D8s_v5", "on-demand")
	guarded.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour + 10*time.Second))
	guarded.Annotations = map[string]string{contract.AnnotationDoNotDisrupt: "1h"}
	pods := []*corev1.Pod{testPod("w", "busy", "3", "4Gi")}
	at := func(now, qualifyBy time.Time, nodes ...*corev1.Node) *Plan {
		in := input(testPool(), nodes, pods)
		in.Now, in.QualifyBy = now, qualifyBy
		in.LastChurn = func(n string) time.Time { return churn[n] }
		return Decide(in)
	}
	empty := func(p *Plan) []string {
		if p.Command == nil || p.Command.Kind != KindEmpty {
			return nil
		}
		return p.Command.Nodes
	}

	if got := empty(at(t0, time.Time{}, soon, later, busy)); got != nil {
		t.Fatalf("at t0 without looking ahead the pass took %v; every empty node is still within consolidateAfter or protected", got)
	}
	first := at(t0, t0.Add(validation), soon, later, busy)
	if got := empty(first); !slices.Equal(got, []string{"soon"}) {
		t.Fatalf("the first look took %v, want [soon]: its consolidateAfter runs out before the second look, the others' do not", got)
	}
	b, ok := first.Blocker("later")
	if !ok || b.Reason != BlockedRecent || !b.Until.Equal(t0.Add(20*time.Second)) {
		t.Errorf("the first look says of the later node %+v, want %s until t0+20s (the real lapse, not shifted by the look ahead)", b, BlockedRecent)
	}
	second := at(t0.Add(validation), time.Time{}, soon, later, busy)
	if second.Command == nil || second.Command.Key() != first.Command.Key() {
		t.Fatalf("the second look decided %v, the first %v; want the same command", second.Command, first.Command)
	}
	if got := empty(at(t0, t0.Add(-time.Hour), soon, later, busy)); got != nil {
		t.Fatalf("a QualifyBy before Now took %v; it must count as Now", got)
	}
	guardedPlan := at(t0, t0.Add(validation), guarded, busy)
	if b, ok := guardedPlan.Blocker("guarded"); !ok || b.Reason != BlockedDoNotDisrupt || slices.Contains(empty(guardedPlan), "guarded") {
		t.Errorf("the first look decided %v and says of the guarded node %+v; want it kept, %s: only consolidateAfter is judged ahead",
			guardedPlan.Command, b, BlockedDoNotDisrupt)
	}
}
