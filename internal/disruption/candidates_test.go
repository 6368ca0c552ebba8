package disruption_test

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

func TestCandidates(t *testing.T) {
	now := t0
	ago := func(d time.Duration) nodeOpt { return created(now.Add(-d)) }
	ml := template(&v1alpha1.NodeTemplate{Labels: map[string]string{"team": "ml"}})
	day := expireAfter("24h")
	type want struct {
		node      string
		reason    v1alpha1.DisruptionReason
		fields    []string // the differences' fields
		expiredAt time.Time
	}
	for _, tc := range []struct {
		name  string
		pool  *v1alpha1.NodePool
		nodes []*corev1.Node
		hash  string
		want  []want
	}{
		{"no pool", nil, []*corev1.Node{node("old", ago(48*time.Hour))}, "", nil},
		{"neither template nor expiry", nodePool(), []*corev1.Node{node("old", ago(1000*time.Hour))}, "", nil},
		{"expired", nodePool(day), []*corev1.Node{node("young", ago(time.Hour)), node("old", ago(30*time.Hour))}, "",
			[]want{{"old", v1alpha1.ReasonExpired, nil, now.Add(-6 * time.Hour)}}},
		{"drifted", nodePool(ml), []*corev1.Node{node("web", label("team", "web")), node("ml", label("team", "ml"))}, "",
			[]want{{"web", v1alpha1.ReasonDrifted, []string{"labels[team]"}, time.Time{}}}},
		{"drifted by hash", nodePool(ml), []*corev1.Node{node("ml", label("team", "ml"), annotate(disruption.AnnotationTemplateHash, "h1"))}, "h2",
			[]want{{"ml", v1alpha1.ReasonDrifted, []string{"kubelet"}, time.Time{}}}},
		{"drifted before expired, and says when it expired", nodePool(ml, day), []*corev1.Node{node("web", ago(30*time.Hour), label("team", "web"))}, "",
			[]want{{"web", v1alpha1.ReasonDrifted, []string{"labels[team]"}, now.Add(-6 * time.Hour)}}},
		{"being deleted", nodePool(ml, day), []*corev1.Node{node("web", ago(30*time.Hour), label("team", "web"), deleting), nil}, "", nil},
		{"oldest first, whatever the reason", nodePool(ml, day), []*corev1.Node{
			node("d-young-drifted", ago(time.Hour)),
			node("c-expired", ago(25*time.Hour), label("team", "ml")),
			node("b-old-drifted", ago(40*time.Hour), label("team", "web")),
			node("z-twin", ago(30*time.Hour), label("team", "ml")),
			node("a-twin", ago(30*time.Hour), label("team", "ml")),
			node("fresh", ago(2*time.Hour), label("team", "ml")),
		}, "", []want{
			{"b-old-drifted", v1alpha1.ReasonDrifted, []string{"labels[team]"}, now.Add(-16 * time.Hour)},
			{"a-twin", v1alpha1.ReasonExpired, nil, now.Add(-6 * time.Hour)},
			{"z-twin", v1alpha1.ReasonExpired, nil, now.Add(-6 * time.Hour)},
			{"c-expired", v1alpha1.ReasonExpired, nil, now.Add(-time.Hour)},
			{"d-young-drifted", v1alpha1.ReasonDrifted, []string{"labels[team]"}, time.Time{}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []want
			for _, c := range disruption.Candidates(tc.pool, tc.nodes, tc.hash, now) {
				w := want{node: c.Node.Name, reason: c.Reason, expiredAt: c.ExpiredAt}
				for _, d := range c.Differences {
					w.fields = append(w.fields, d.Field)
				}
				got = append(got, w)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Candidates =\n  %v\nwant\n  %v", got, tc.want)
			}
		})
	}
}

func TestCandidateMessage(t *testing.T) {
	for _, tc := range []struct {
		c    disruption.Candidate
		want string
	}{
		{disruption.Candidate{Reason: v1alpha1.ReasonDrifted, Differences: []disruption.Difference{
			{Field: "image", Want: "ami-2", Got: "ami-1"}, {Field: "labels[team]", Want: "ml"}}},
			"drifted from its NodePool's template: image: want ami-2, node has ami-1; labels[team]: want ml, node has none"},
		{disruption.Candidate{Reason: v1alpha1.ReasonExpired, ExpiredAt: t0}, "expired at 2026-11-01T12:00:00Z"},
	} {
		if got := tc.c.Message(); got != tc.want {
			t.Errorf("Message() = %q, want %q", got, tc.want)
		}
	}
}

// A replacement whose Node the cloud named is known by the machine name the
// controller noted on it; a replacement not yet a Node names nothing.
func TestReplacementsNamesNodesByTheirMachines(t *testing.T) {
	rec := func(repl string) string {
		return disruption.Record{Reason: v1alpha1.ReasonDrifted, Phase: disruption.PhaseLaunching, Replacement: repl}.String()
	}
	nodes := []*corev1.Node{
		node("web-old1", annotate(contract.AnnotationDisruption, rec("web-x1"))),
		node("web-old2", annotate(contract.AnnotationDisruption, rec("web-x2"))),
		node("ip-10-0-3-7.ec2.internal", annotate(contract.AnnotationMachine, "web-x1")),
		node("web-x2"), // kwok names Nodes after their machines
		node("web-x3"),
	}
	got := disruption.Replacements(nodes)
	if len(got) != 2 || !got["ip-10-0-3-7.ec2.internal"] || !got["web-x2"] {
		t.Errorf("Replacements = %v; want the two Nodes of web-x1 and web-x2", got)
	}
}
