package disruption_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

func TestExplain(t *testing.T) {
	now := t0.Add(time.Hour)
	// The pool's nodes run img-2; a node on img-1 has drifted.
	pool := func(opts ...func(*v1alpha1.NodePool)) *v1alpha1.NodePool {
		p := &v1alpha1.NodePool{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
			Spec: v1alpha1.NodePoolSpec{
				NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}},
				Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok},
				Template:     &v1alpha1.NodeTemplate{Labels: map[string]string{"pool": "gpu"}, Image: "img-2"},
				Disruption:   &v1alpha1.DisruptionSpec{},
			},
		}
		for _, o := range opts {
			o(p)
		}
		return p
	}
	noProvider := func(p *v1alpha1.NodePool) { p.Spec.Provider.Name = v1alpha1.ProviderNone }
	pause := func(p *v1alpha1.NodePool) { p.Spec.Disruption.Paused = true }
	expiring := func(p *v1alpha1.NodePool) { p.Spec.Disruption.ExpireAfter = "24h" }
	limit := func(n int32) func(*v1alpha1.NodePool) {
		return func(p *v1alpha1.NodePool) { p.Spec.Limits = &v1alpha1.Limits{Nodes: &n} }
	}
	// No drift replacements from 9:00 to 17:00 UTC: open at now (13:00).
	office := func(p *v1alpha1.NodePool) {
		p.Spec.Disruption.Budgets = []v1alpha1.Budget{{Nodes: "0", Reasons: []v1alpha1.DisruptionReason{v1alpha1.ReasonDrifted},
			Schedule: ptr.To("0 9 * * *"), Duration: &metav1.Duration{Duration: 8 * time.Hour}}}
	}

	// member is a Ready node of the pool on image img.
	member := func(name, img string, opts ...nodeOpt) *corev1.Node {
		return node(name, append([]nodeOpt{label("pool", "gpu"), annotate(disruption.AnnotationImage, img), isReady}, opts...)...)
	}
	drifted := func(name string, opts ...nodeOpt) *corev1.Node { return member(name, "img-1", opts...) }
	current := func(name string, opts ...nodeOpt) *corev1.Node { return member(name, "img-2", opts...) }
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	record := func(r disruption.Record) nodeOpt { return annotate(contract.AnnotationDisruption, r.String()) }
	launched := now.Add(-time.Minute)

	for _, tc := range []struct {
		name  string
		pool  *v1alpha1.NodePool
		nodes []*corev1.Node // the first is explained; all are the pool's members
		pods  []*corev1.Pod
		code  disruption.VerdictCode
		says  []string // each in the verdict's message
		check func(t *testing.T, e disruption.Explanation)
	}{
		{
			name: "no pool: defaults only", nodes: []*corev1.Node{drifted("n1")},
			code: disruption.VerdictNoPool, says: []string{"no pool: defaults only", "never replaces it"},
			check: func(t *testing.T, e disruption.Explanation) {
				if e.Pool != nil || e.Candidate != "" || e.Budget != nil || len(e.Differences) != 0 {
					t.Errorf("a node without a pool got pool facts: %+v", e)
				}
			},
		},
		{
			name: "provider none: would replace, reported only", pool: pool(noProvider), nodes: []*corev1.Node{drifted("n1"), current("n2")},
			code: disruption.VerdictReportedOnly, says: []string{"would be replaced (Drifted: image: want img-2, node has img-1)", "reported only", "provider none"},
			check: func(t *testing.T, e disruption.Explanation) {
				if e.Pool.Managed || e.Pool.Provider != v1alpha1.ProviderNone {
					t.Errorf("pool facts %+v: want provider none, not managed", e.Pool)
				}
				if len(e.Differences) != 1 || e.Differences[0].Field != "image" {
					t.Errorf("differences %+v, want image", e.Differences)
				}
			},
		},
		{
			name: "drifted, and the budget allows", pool: pool(), nodes: []*corev1.Node{drifted("n1"), current("n2"), current("n3")},
			code: disruption.VerdictWillReplace, says: []string{"will be replaced (Drifted)", "1 of 1 allowed now", "budget nodes 10% binds", "0 of the pool's 3 nodes"},
			check: func(t *testing.T, e disruption.Explanation) {
				if b := e.Budget; b == nil || b.Reason != v1alpha1.ReasonDrifted || b.Allowed != 1 || b.Binding != "nodes 10%" || b.NextChange != nil {
					t.Errorf("budget %+v", e.Budget)
				}
			},
		},
		{
			name: "drifted, and the budget is used up by a cordoned node", pool: pool(),
			nodes: []*corev1.Node{drifted("n1"), current("n2", cordoned), current("n3")},
			code:  disruption.VerdictWaitingForBudget, says: []string{"when the budget allows: 0 of 1 allowed now", "1 of the pool's 3 nodes are out of service", "no budget window is scheduled"},
		},
		{
			name: "drifted, and a scheduled budget forbids it until its window closes", pool: pool(office),
			nodes: []*corev1.Node{drifted("n1"), current("n2")},
			code:  disruption.VerdictWaitingForBudget, says: []string{"none allowed now (budget nodes 0 for [Drifted]", "closes at 2026-11-01T17:00:00Z (in 4h)", "then 2 allowed"},
			check: func(t *testing.T, e disruption.Explanation) {
				c := e.Budget.NextChange
				if c == nil || !c.At.Equal(time.Date(2026, 11, 1, 17, 0, 0, 0, time.UTC)) || c.Opens || c.Allowed != 2 || !strings.Contains(c.Budget, "0 9 * * *") {
					t.Errorf("next change %+v", c)
				}
			},
		},
		{
			name: "an older candidate takes the only room", pool: pool(),
			nodes: []*corev1.Node{drifted("young"), drifted("old", created(t0.Add(-time.Hour))), current("n3")},
			code:  disruption.VerdictWaitingForBudget, says: []string{"1 of 1 allowed now", "up to 1 candidate ahead of it goes first"},
		},
		{
			// Drifted precedes Expired in the list: a drifted node goes
			// before an older expired one, whatever their ages.
			name: "a drifted node goes before an older expired one", pool: pool(expiring),
			nodes: []*corev1.Node{current("old", created(t0.Add(-30*24*time.Hour))), drifted("young"), current("n3")},
			code:  disruption.VerdictWaitingForBudget, says: []string{"will be replaced (Expired)", "up to 1 candidate ahead of it goes first"},
			check: func(t *testing.T, e disruption.Explanation) {
				if e.OlderCandidates != 1 {
					t.Errorf("candidates ahead of the expired node: %d, want 1 (the drifted one)", e.OlderCandidates)
				}
			},
		},
		{
			name: "an expired node waits; the younger drifted one goes first", pool: pool(expiring),
			nodes: []*corev1.Node{drifted("young"), current("old", created(t0.Add(-30*24*time.Hour))), current("n3")},
			code:  disruption.VerdictWillReplace, says: []string{"will be replaced (Drifted)"},
			check: func(t *testing.T, e disruption.Explanation) {
				if e.OlderCandidates != 0 {
					t.Errorf("candidates ahead of the drifted node: %d, want 0", e.OlderCandidates)
				}
			},
		},
		{
			name: "protected by a pod", pool: pool(), nodes: []*corev1.Node{drifted("n1"), current("n2")},
			pods: []*corev1.Pod{pod("shop", "web"), pod("shop", "db", podAnnotated("sluice.dev/do-not-disrupt", "true"))},
			code: disruption.VerdictProtected, says: []string{"protected: pod shop/db is annotated sluice.dev/do-not-disrupt=true", "remove the annotation", "then it is replaced (Drifted)"},
		},
		{
			name: "paused pool", pool: pool(pause), nodes: []*corev1.Node{drifted("n1")},
			code: disruption.VerdictPaused, says: []string{"paused: NodePool gpu has spec.disruption.paused: true", "set it to false"},
			check: func(t *testing.T, e disruption.Explanation) {
				if !e.Pool.Paused {
					t.Error("pool facts do not say paused")
				}
			},
		},
		{
			name: "being replaced: the replacement is on its way", pool: pool(),
			nodes: []*corev1.Node{drifted("n1", record(disruption.Record{Reason: v1alpha1.ReasonDrifted, Phase: disruption.PhaseLaunching, Since: launched, Replacement: "gpu-x7k2p", LaunchedAt: &launched}))},
			code:  disruption.VerdictBeingReplaced, says: []string{"being replaced (Drifted): replacement gpu-x7k2p is on its way (launched 2026-11-01T12:59:00Z (60s ago))"},
			check: func(t *testing.T, e disruption.Explanation) {
				if e.Record == nil || e.Record.Replacement != "gpu-x7k2p" || e.OutOfService != "marked for disruption" {
					t.Errorf("record %+v, out of service %q", e.Record, e.OutOfService)
				}
			},
		},
		{
			name: "being replaced: the replacement is Ready", pool: pool(),
			nodes: []*corev1.Node{
				drifted("n1", record(disruption.Record{Reason: v1alpha1.ReasonDrifted, Phase: disruption.PhaseLaunching, Since: launched, Replacement: "gpu-x7k2p"})),
				current("gpu-x7k2p"),
			},
			code: disruption.VerdictBeingReplaced, says: []string{"replacement gpu-x7k2p is Ready", "deletes this node next"},
		},
		{
			name: "being replaced: not yet accepted by the provider", pool: pool(),
			nodes: []*corev1.Node{drifted("n1", record(disruption.Record{Reason: v1alpha1.ReasonExpired, Phase: disruption.PhaseLaunching, Since: launched}))},
			code:  disruption.VerdictBeingReplaced, says: []string{"being replaced (Expired) since", "the provider is being asked"},
		},
		{
			name: "expired", pool: pool(expiring), nodes: []*corev1.Node{current("n1", created(now.Add(-30*time.Hour))), current("n2")},
			code: disruption.VerdictWillReplace, says: []string{"will be replaced (Expired)", "1 of 1 allowed now"},
			check: func(t *testing.T, e disruption.Explanation) {
				if e.Candidate != v1alpha1.ReasonExpired || e.Expiry == nil || !e.Expiry.Expired || !e.Expiry.At.Equal(now.Add(-6*time.Hour)) {
					t.Errorf("candidate %q, expiry %+v", e.Candidate, e.Expiry)
				}
			},
		},
		{
			name: "not a candidate", pool: pool(expiring), nodes: []*corev1.Node{current("n1")},
			code: disruption.VerdictNotCandidate, says: []string{"not a candidate: matches its template and expires at 2026-11-02T12:00:00Z (in 23h)"},
		},
		{
			name: "not a candidate, never expiring", pool: pool(), nodes: []*corev1.Node{current("n1")},
			code: disruption.VerdictNotCandidate, says: []string{"matches its template and never expires"},
		},
		{
			name: "a pool that cannot be applied", pool: pool(limit(1)), nodes: []*corev1.Node{drifted("n1"), current("n2")},
			code: disruption.VerdictPoolInvalid, says: []string{"left alone: pool gpu cannot be applied (LimitsBelowSize)", "raise the limit"},
		},
		{
			name: "no room under the pool's limit", pool: pool(limit(2)), nodes: []*corev1.Node{drifted("n1"), current("n2")},
			code: disruption.VerdictLimitReached, says: []string{"when the pool has room", "2 nodes and 0 replacements", "spec.limits.nodes 2"},
		},
		{
			name: "being deleted", pool: pool(), nodes: []*corev1.Node{drifted("n1", deleting)},
			code: disruption.VerdictBeingDeleted, says: []string{"being deleted: sluice drains it"},
		},
		{
			name: "an unreadable record", pool: pool(), nodes: []*corev1.Node{drifted("n1", annotate(contract.AnnotationDisruption, "{"))},
			code: disruption.VerdictRecordUnreadable, says: []string{"left alone: reading sluice.dev/disruption on node n1", "kubectl annotate node n1 sluice.dev/disruption-"},
		},
		{
			name: "a record a newer sluice wrote", pool: pool(), nodes: []*corev1.Node{drifted("n1", annotate(contract.AnnotationDisruption, `{"v":3,"reason":"Drifted","phase":"Launching"}`))},
			code: disruption.VerdictRecordFromNewerVersion, says: []string{"left alone", "written by a newer sluice (record version 3; this one reads up to 2)", "roll sluice forward"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := disruption.ExplainInput{Pool: tc.pool, Node: tc.nodes[0], Pods: tc.pods, Now: now}
			if tc.pool != nil {
				in.Members = tc.nodes
			}
			e := disruption.Explain(in)
			if e.Verdict.Code != tc.code {
				t.Errorf("verdict %s: %s; want %s", e.Verdict.Code, e.Verdict.Message, tc.code)
			}
			for _, s := range tc.says {
				if !strings.Contains(e.Verdict.Message, s) {
					t.Errorf("verdict %q does not say %q", e.Verdict.Message, s)
				}
			}
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

func TestExplainNotes(t *testing.T) {
	n := node("n1", isReady, annotate("sluice.dev/cordoned-by", "maintenance/ev-1"))
	n.Spec.Unschedulable = true
	e := disruption.Explain(disruption.ExplainInput{Node: n, Now: t0,
		Maintenance: &disruption.Maintenance{Event: "ev-1", Phase: "Draining"}})
	want := []string{"maintenance event ev-1 is being handled (phase Draining)", "cordoned for maintenance (maintenance/ev-1)", "counts against its pool's budgets now: cordoned"}
	if len(e.Notes) != len(want) {
		t.Fatalf("notes %q, want %d", e.Notes, len(want))
	}
	for i, w := range want {
		if !strings.Contains(e.Notes[i], w) {
			t.Errorf("note %d %q does not say %q", i, e.Notes[i], w)
		}
	}
	if !e.Cordoned || e.CordonedBy != "maintenance/ev-1" {
		t.Errorf("cordon %t by %q", e.Cordoned, e.CordonedBy)
	}
}

// TestExplanationJSON pins the field names `sluice explain -o json` prints.
func TestExplanationJSON(t *testing.T) {
	p := &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: v1alpha1.NodePoolSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}},
		Template:     &v1alpha1.NodeTemplate{Image: "img-2"},
	}}
	n := node("n1", isReady, annotate(disruption.AnnotationImage, "img-1"))
	data, err := json.Marshal(disruption.Explain(disruption.ExplainInput{Pool: p, Node: n, Members: []*corev1.Node{n}, Now: t0}))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"node", "pool", "deleting", "cordoned", "differences", "candidate", "olderCandidates", "verdict"} {
		if _, ok := got[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, data)
		}
	}
	diff := got["differences"].([]any)[0].(map[string]any)
	if diff["field"] != "image" || diff["want"] != "img-2" || diff["got"] != "img-1" {
		t.Errorf("difference %v", diff)
	}
	if v := got["verdict"].(map[string]any); v["code"] != "ReportedOnly" || v["message"] == "" {
		t.Errorf("verdict %v", v)
	}
	if pool := got["pool"].(map[string]any); pool["name"] != "gpu" || pool["provider"] != "none" || pool["managed"] != false {
		t.Errorf("pool %v", pool)
	}
}

func isReady(n *corev1.Node) {
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue})
}
