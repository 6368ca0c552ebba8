package disruption_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/registry"
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

// An image a pool's provider cannot set is reported, never acted on: the
// replacement would boot the same image and be drifted at birth.
func TestAnImageTheProviderCannotSetIsLeftAlone(t *testing.T) {
	// Every provider sluice has sets images; one that cannot (an AKS agent
	// pool, whose node image is AKS's) is registered for the test.
	const noImages v1alpha1.ProviderName = "test-no-images"
	all := registry.All
	registry.All = append(slices.Clone(all), provider.Registration{Name: noImages,
		Images: provider.Images{Unsupported: "the test's provider boots what its cloud chooses"}})
	t.Cleanup(func() { registry.All = all })
	newImage := &v1alpha1.NodeTemplate{Image: "ami-new", Labels: map[string]string{"team": "ml"}}
	old := func(name string, opts ...nodeOpt) *corev1.Node {
		return node(name, append(opts, annotate(contract.AnnotationImage, "ami-old"))...)
	}
	for _, tc := range []struct {
		name     string
		provider v1alpha1.ProviderName
		nodes    []*corev1.Node
		want     []string // the candidates
		left     bool     // the image difference is marked left alone
	}{
		{"kwok sets images", v1alpha1.ProviderKwok, []*corev1.Node{old("a", label("team", "ml"))}, []string{"a"}, false},
		{"aws-asg sets images", v1alpha1.ProviderAWSASG, []*corev1.Node{old("a", label("team", "ml"))}, []string{"a"}, false},
		{"azure-vmss sets images", v1alpha1.ProviderAzureVMSS, []*corev1.Node{old("a", label("team", "ml"))}, []string{"a"}, false},
		{"a provider that cannot", noImages, []*corev1.Node{old("a", label("team", "ml"))}, nil, true},
		{"another difference still counts", noImages, []*corev1.Node{old("a", label("team", "web"))}, []string{"a"}, true},
		{"no provider: reported as it is", "", []*corev1.Node{old("a", label("team", "ml"))}, []string{"a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := nodePool(template(newImage), func(p *v1alpha1.NodePool) { p.Spec.Provider.Name = tc.provider })
			var got []string
			for _, c := range disruption.Candidates(pool, tc.nodes, "", t0) {
				got = append(got, c.Node.Name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("candidates %v, want %v", got, tc.want)
			}
			diffs := disruption.PoolDrift(tc.nodes[0], pool, "")
			var image *disruption.Difference
			for i := range diffs {
				if diffs[i].Field == "image" {
					image = &diffs[i]
				}
			}
			if image == nil {
				t.Fatalf("differences %v: the image is not reported", diffs)
			}
			if left := image.Left != ""; left != tc.left {
				t.Errorf("image difference %q: left alone %v, want %v", image, left, tc.left)
			}
			if tc.left && !strings.Contains(image.String(), "cannot set a machine's image") {
				t.Errorf("image difference %q does not say why it is left alone", image)
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

// A node still waiting for registration is not judged against the template:
// a real kubelet registers without the pool's labels, and registration is
// about to give them. Once registered, a missing label is drift again.
func TestAnUnregisteredNodeHasNotDrifted(t *testing.T) {
	pool := &v1alpha1.NodePool{Spec: v1alpha1.NodePoolSpec{
		Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderKwok},
		Template: &v1alpha1.NodeTemplate{Labels: map[string]string{"tier": "web"}},
	}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: contract.TaintUnregistered, Effect: corev1.TaintEffectNoExecute}}}}
	if diffs := disruption.PoolDrift(node, pool, ""); len(diffs) != 0 {
		t.Errorf("PoolDrift of a node waiting for registration = %v; want none", diffs)
	}
	node.Spec.Taints = nil
	if diffs := disruption.PoolDrift(node, pool, ""); len(diffs) != 1 || diffs[0].Field != "labels[tier]" {
		t.Errorf("PoolDrift of the registered node without the label = %v; want labels[tier]", diffs)
	}
}
