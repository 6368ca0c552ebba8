package top

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// now is a Monday, 13:00 UTC.
var now = time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC)

func node(name, pool, image string, opts ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			Labels: map[string]string{"pool": pool, "kubernetes.azure.com/node-image-version": image}, Annotations: map[string]string{}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func claimed(deadline *time.Time) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		c, _ := json.Marshal(ownership.Claim{ID: "d1", Holder: "sluice-controller", Started: now.Add(-10 * time.Second), Renewed: now.Add(-5 * time.Second), Deadline: deadline})
		n.Annotations[contract.AnnotationDrain] = string(c)
	}
}

func pod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func event(reason, kind, ns, name, msg string, at time.Time) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s.%d", name, at.UnixNano())},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name}, Reason: reason, Message: msg,
		Type: "Normal", LastTimestamp: metav1.NewTime(at), Source: corev1.EventSource{Component: "sluice-controller"}}
}

// fleet is one pool, batch, of image img-2 with a budget of 50 %, whose
// nodes are in every state the screen names.
func fleet() Snapshot {
	pool := v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Spec: v1alpha1.NodePoolSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "batch"}},
		Provider:     v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok},
		Template:     &v1alpha1.NodeTemplate{Labels: map[string]string{"pool": "batch"}, Image: "img-2"},
		Disruption:   &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "50%"}}},
	}}
	deadline := now.Add(25 * time.Second)
	rec := disruption.Record{Reason: v1alpha1.ReasonDrifted, Phase: disruption.PhaseLaunching, Since: now.Add(-time.Minute), Replacement: "batch-new"}
	report := maintenance.NewReport(maintenance.SourceAzure, true, []maintenance.Event{{ID: "ev-1", Type: maintenance.TypePreempt,
		Status: maintenance.StatusScheduled, NotBefore: now.Add(90 * time.Second)}})
	nodes := []corev1.Node{
		node("batch-serving", "batch", "img-2"),
		node("batch-drifted", "batch", "img-1"),
		node("batch-draining", "batch", "img-2", claimed(&deadline)),
		node("batch-blocked", "batch", "img-2", claimed(nil)),
		node("batch-cordoned", "batch", "img-2", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		node("batch-old", "batch", "img-1", func(n *corev1.Node) { n.Annotations[contract.AnnotationDisruption] = rec.String() }),
		node("batch-new", "batch", "img-2", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }),
		node("batch-spot", "batch", "img-2", func(n *corev1.Node) { n.Annotations[contract.AnnotationMaintenanceEvents] = report.Encode() }),
		node("lonely", "", ""),
	}
	pods := []*corev1.Pod{
		pod("shop", "w-1", "batch-draining"), pod("shop", "w-2", "batch-draining"),
		pod("shop", "db-0", "batch-blocked"),
	}
	events := []*corev1.Event{
		event("DrainStarted", "Node", "", "batch-draining", "sluice: draining 4 pods", now.Add(-10*time.Second)),
		event("EvictionBlocked", "Pod", "shop", "db-0", "sluice drain of batch-blocked: PDBBlocked: PDB shop/db allows no disruption now (maxUnavailable 0)", now.Add(-3*time.Second)),
		// An old drain's blocker whose pod has gone since: not a blocker now.
		event("EvictionBlocked", "Pod", "shop", "gone-0", "sluice drain of batch-blocked: PDBBlocked: PDB shop/gone", now.Add(-time.Hour)),
	}
	return Snapshot{Now: now, Pools: []v1alpha1.NodePool{pool}, PoolsInstalled: true, Nodes: nodes, Pods: pods, Events: events}
}

func TestBuildNamesEachNodesState(t *testing.T) {
	sc := Build(fleet())
	if len(sc.Pools) != 2 || sc.Unpooled != 1 || sc.Pools[1].Status.Name != "" || sc.Pools[1].Nodes[0].Name != "lonely" {
		t.Fatalf("pools %d, unpooled %d; want batch, and lonely in no pool", len(sc.Pools), sc.Unpooled)
	}
	p := sc.Pools[0]
	rows := map[string]NodeRow{}
	for _, r := range p.Nodes {
		rows[r.Name] = r
	}
	for _, tc := range []struct {
		node   string
		state  State
		detail string
		mark   string
	}{
		{"batch-serving", StateServing, "", ""},
		{"batch-drifted", StateServing, "", "drifted"},
		{"batch-draining", StateDraining, "2 of 4 pods left [#####.....] (drain by sluice-controller)", "deadline in 0:25"},
		{"batch-blocked", StateBlocked, "1 pod(s) cannot leave: shop/db-0: PDBBlocked: PDB shop/db allows no disruption now (maxUnavailable 0)", ""},
		{"batch-cordoned", StateCordoned, "outside sluice", ""},
		{"batch-old", StateReplacing, "Drifted, Launching, replacement batch-new", ""},
		{"batch-new", StateBooting, "replacement, not Ready yet", ""},
		{"batch-spot", StateServing, "", "Preempt in 1:30"},
	} {
		r, ok := rows[tc.node]
		if !ok {
			t.Errorf("%s: no row", tc.node)
			continue
		}
		if r.State != tc.state || !strings.HasPrefix(r.Detail, tc.detail) {
			t.Errorf("%s: %s %q; want %s %q", tc.node, r.State, r.Detail, tc.state, tc.detail)
		}
		if tc.mark != "" && !strings.Contains(strings.Join(r.Marks, ","), tc.mark) {
			t.Errorf("%s: marks %v; want %q", tc.node, r.Marks, tc.mark)
		}
	}
	if b := rows["batch-blocked"].Blocked; len(b) != 1 || b[0].Pod != "shop/db-0" {
		t.Errorf("batch-blocked's blockers %+v; want shop/db-0 only (gone-0 left the node)", b)
	}
	if p.InUse["Drifted"] != 1 {
		t.Errorf("in use %v; want Drifted 1", p.InUse)
	}
	if len(p.Maintenance) != 1 || p.Maintenance[0].Node != "batch-spot" || p.Maintenance[0].Type != maintenance.TypePreempt {
		t.Errorf("maintenance %+v", p.Maintenance)
	}
	// The counts are the controller's: 8 members less the booting
	// replacement make 7; 50 % of 7 is 4; out of service: draining,
	// blocked, cordoned, the node being replaced (the replacement does not
	// count while it boots).
	if p.Status.Nodes != 8 || p.Status.Disrupting != 4 {
		t.Errorf("status %d nodes, %d disrupting; want 8 and 4", p.Status.Nodes, p.Status.Disrupting)
	}
	for _, b := range p.Status.Budgets {
		if b.Limit != 4 || b.Allowed != 0 {
			t.Errorf("budget %s: %d/%d; want 0/4", b.Reason, b.Allowed, b.Limit)
		}
	}
}

func TestBuildSaysWhatItCannotSee(t *testing.T) {
	s := fleet()
	s.Pods = nil
	lost := now.Add(-42 * time.Second)
	s.Hidden = []string{"cannot list pods (forbidden): drain progress and blocked pods are hidden"}
	s.LostSince, s.LostError = &lost, "connection refused"
	sc := Build(s)
	if !sc.Stale || len(sc.Banners) != 2 || !strings.Contains(sc.Banners[0].Text, "connection lost 42s ago") || !strings.Contains(sc.Banners[0].Text, "not live") {
		t.Fatalf("banners %+v, stale %v", sc.Banners, sc.Stale)
	}
	for _, r := range sc.Pools[0].Nodes {
		if r.Name == "batch-draining" && !strings.HasPrefix(r.Detail, "pods cannot be seen") {
			t.Errorf("draining without pods: %q", r.Detail)
		}
	}
	text := plain(Lines(sc, 160, ""))
	for _, want := range []string{"! connection lost", "~POOL batch", "~batch-draining", "! cannot list pods"} {
		if !strings.Contains(text, want) {
			t.Errorf("screen lacks %q:\n%s", want, text)
		}
	}
}

func TestLinesFitTheWidthAndFilter(t *testing.T) {
	sc := Build(fleet())
	for _, width := range []int{160, 100, 80, 59, 30} {
		for _, l := range Lines(sc, width, "") {
			if w := len([]rune(l.Text)); w > width {
				t.Errorf("width %d: a line of %d: %q", width, w, l.Text)
			}
		}
	}
	wide := plain(Lines(sc, 160, ""))
	for _, want := range []string{
		"POOL batch  kwok (Unknown)  8 nodes, 4 out of service: blocked 1, draining 1, replacing 1, booting 1, cordoned 1, serving 3",
		"Drifted 0/4 (1 in use)",
		"maintenance    Preempt ev-1 on batch-spot: in 1:30",
		"batch-blocked  blocked    1 pod(s) cannot leave: shop/db-0: PDBBlocked: PDB shop/db",
		"LAST EVENTS",
		"NO POOL  1 node(s) no NodePool selects, default maintenance actions only: serving 1",
	} {
		if !strings.Contains(wide, want) {
			t.Errorf("160 columns lack %q:\n%s", want, wide)
		}
	}
	narrow := plain(Lines(sc, 50, ""))
	if strings.Contains(narrow, "LAST EVENTS") || strings.Contains(narrow, "batch-serving") || !strings.Contains(narrow, "POOL batch") {
		t.Errorf("50 columns show more than the pools' lines:\n%s", narrow)
	}
	var selectable []string
	for _, l := range Lines(sc, 160, "block") {
		if l.Node != "" {
			selectable = append(selectable, l.Node)
		}
	}
	if strings.Join(selectable, ",") != "batch-blocked" {
		t.Errorf("filter \"block\" keeps %v; want batch-blocked", selectable)
	}
}

func plain(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}
