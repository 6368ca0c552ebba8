package cli

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	poolctrl "github.com/sluice-dev/sluice/internal/controller/nodepool"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/poolstatus"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// What `sluice status` says each reason may take now is what the controller
// would spend, over generated pools: replacements booting beside the nodes
// they replace, nodes being deleted, live and lapsed drain claims, people's
// cordons, NotReady nodes, budgets by count and percentage, per reason and
// in scheduled windows. A CLI that sized the pool its own way (its members,
// replacements included) fails here.
func TestStatusSpendsWhatTheControllerSpends(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 31))
	states, withReplacements := 3000, 0
	for i := range states {
		at := time.Date(2026, 11, 23+rng.IntN(7), rng.IntN(24), 0, 0, 0, time.UTC) // weekdays and a weekend, windows open and shut
		pool, members, replacing := generatedPool(rng, i, at)
		if replacing {
			withReplacements++
		}
		got := poolstatus.Summarize(pool, members, at)
		want := map[v1alpha1.DisruptionReason]int32{}
		for _, a := range poolctrl.AllowedNow(pool, members, at) {
			want[a.Reason] = a.Nodes
		}
		for _, b := range got.Budgets {
			if b.Error != "" {
				t.Fatalf("state %d: budgets unreadable: %s", i, b.Error)
			}
			if int32(b.Allowed) != want[b.Reason] { //nolint:gosec // small counts
				t.Fatalf("state %d at %s, reason %s: status says %d allowed (limit %d, %d disrupting), the controller would spend %d\npool budgets %s\nnodes:\n%s",
					i, at.Format(time.RFC1123), b.Reason, b.Allowed, b.Limit, b.Disrupting, want[b.Reason], budgetsOf(pool), nodeStates(members))
			}
		}
		if len(got.Budgets) != len(disruption.BudgetedReasons()) {
			t.Fatalf("state %d: status gives %d reasons, want %d", i, len(got.Budgets), len(disruption.BudgetedReasons()))
		}
	}
	// The generator must reach the states that once disagreed.
	if withReplacements < states/4 {
		t.Fatalf("only %d of %d states have a replacement booting; the generator misses the case", withReplacements, states)
	}
}

// A drifted 10-node pool at 10 % with one node out and its replacement
// booting: the limit is 1 and nothing more is allowed, as the controller
// holds it (the case the CLI once reported as limit 2, allowed 1).
func TestStatusCountsABootingReplacementAsTheControllerDoes(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	pool := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "batch"},
		Spec: v1alpha1.NodePoolSpec{Disruption: &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "10%"}}}}}
	var members []*corev1.Node
	for i := range 10 {
		members = append(members, testNode(fmt.Sprintf("batch-%d", i), "batch", "", at.Add(-time.Hour)))
	}
	rec := disruption.Record{Reason: v1alpha1.ReasonDrifted, Phase: disruption.PhaseLaunching, Since: at, Replacement: "batch-new"}
	members[0].Annotations = map[string]string{contract.AnnotationDisruption: rec.String()}
	booting := testNode("batch-new", "batch", "", at)
	booting.Status.Conditions[0].Status = corev1.ConditionFalse
	members = append(members, booting)
	for _, b := range poolstatus.Summarize(pool, members, at).Budgets {
		if b.Reason == v1alpha1.ReasonDrifted && (b.Limit != 1 || b.Allowed != 0 || b.Disrupting != 1) {
			t.Fatalf("drifted budget: limit %d, allowed %d, disrupting %d; want 1, 0, 1", b.Limit, b.Allowed, b.Disrupting)
		}
	}
}

// generatedPool is a pool of 1 to 14 nodes in a random state at now, and
// whether one of its nodes is a replacement of another still there.
func generatedPool(rng *rand.Rand, i int, now time.Time) (*v1alpha1.NodePool, []*corev1.Node, bool) {
	budgetChoices := [][]v1alpha1.Budget{
		nil,
		{{Nodes: "10%"}},
		{{Nodes: "25%"}},
		{{Nodes: "1"}},
		{{Nodes: "3"}, {Nodes: "0", Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonUnderutilized, v1alpha1.ReasonDrifted}}},
		{{Nodes: "50%"}, {Nodes: "0", Schedule: ptr.To("0 9 * * 1-5"), Duration: &metav1.Duration{Duration: 8 * time.Hour}}},
		{{Nodes: "20%", Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonExpired}}, {Nodes: "2", Schedule: ptr.To("@daily"), Duration: &metav1.Duration{Duration: 6 * time.Hour}}},
		{{Nodes: "100%"}},
	}
	name := fmt.Sprintf("p%d", i)
	pool := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodePoolSpec{Disruption: &v1alpha1.DisruptionSpec{Budgets: budgetChoices[rng.IntN(len(budgetChoices))]}}}
	size := 1 + rng.IntN(14)
	var nodes []*corev1.Node
	for j := range size {
		n := testNode(fmt.Sprintf("%s-%d", name, j), name, "", now.Add(-time.Duration(1+rng.IntN(500))*time.Hour))
		switch rng.IntN(10) {
		case 0:
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		case 1:
			n.Status.Conditions[0].Status = corev1.ConditionUnknown
		case 2:
			n.Spec.Unschedulable = true // a person's cordon
		case 3:
			del := metav1.NewTime(now.Add(-time.Minute))
			n.DeletionTimestamp, n.Finalizers = &del, []string{"sluice.dev/termination"}
		case 4:
			renewed := now.Add(-time.Duration(rng.IntN(60)) * time.Second) // live or lapsed
			raw, _ := json.Marshal(map[string]any{"id": "x", "holder": "sluice drain@laptop", "started": renewed, "renewed": renewed})
			n.Annotations = map[string]string{contract.AnnotationDrain: string(raw)}
		}
		nodes = append(nodes, n)
	}
	// Some nodes being replaced, their replacements booting or Ready beside
	// them.
	replacing := false
	for j := range size {
		if rng.IntN(4) != 0 || nodes[j].Annotations[contract.AnnotationDrain] != "" {
			continue
		}
		repl := testNode(fmt.Sprintf("%s-r%d", name, j), name, "", now.Add(-time.Minute))
		if rng.IntN(2) == 0 {
			repl.Status.Conditions[0].Status = corev1.ConditionFalse // booting
		}
		rec := disruption.Record{Reason: v1alpha1.ReasonDrifted, Phase: disruption.PhaseLaunching, Since: now.Add(-2 * time.Minute), Replacement: repl.Name}
		if nodes[j].Annotations == nil {
			nodes[j].Annotations = map[string]string{}
		}
		nodes[j].Annotations[contract.AnnotationDisruption] = rec.String()
		nodes = append(nodes, repl)
		replacing = true
	}
	rng.Shuffle(len(nodes), func(a, b int) { nodes[a], nodes[b] = nodes[b], nodes[a] })
	return pool, nodes, replacing
}

func budgetsOf(pool *v1alpha1.NodePool) string {
	b, _ := json.Marshal(pool.Spec.Disruption.Budgets)
	return string(b)
}

func nodeStates(nodes []*corev1.Node) string {
	out := ""
	for _, n := range nodes {
		out += fmt.Sprintf("  %s unschedulable=%v deleting=%v annotations=%v conditions=%v\n", n.Name, n.Spec.Unschedulable, n.DeletionTimestamp != nil, n.Annotations, n.Status.Conditions)
	}
	return out
}
