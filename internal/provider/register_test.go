package provider

import (
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

func TestApply(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	unregistered := corev1.Taint{Key: contract.TaintUnregistered, Value: "true", Effect: corev1.TaintEffectNoExecute}
	dedicated := corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}
	cni := corev1.Taint{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}
	someone := corev1.Taint{Key: "example.com/someone", Effect: corev1.TaintEffectNoSchedule}
	pool := func(consolidate string, labels map[string]string, taints ...corev1.Taint) *v1alpha1.NodePool {
		return &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Spec: v1alpha1.NodePoolSpec{
			Provider:   v1alpha1.ProviderSpec{Name: v1alpha1.ProviderAWSASG},
			Template:   &v1alpha1.NodeTemplate{Labels: labels, Taints: taints, StartupTaints: []corev1.Taint{cni}},
			Disruption: &v1alpha1.DisruptionSpec{ConsolidateAfter: consolidate},
		}}
	}
	tests := []struct {
		name       string
		labels     map[string]string // the kubelet's, from its launch template
		taints     []corev1.Taint
		pool       *v1alpha1.NodePool
		image      string
		wantLabels map[string]string
		wantTaints []corev1.Taint
		want       Applied
		autoscaler bool
	}{{
		name:   "a tainted node gets the template and loses the taint",
		labels: map[string]string{"team": "data", "eks.amazonaws.com/nodegroup": "ng"},
		taints: []corev1.Taint{unregistered, someone},
		pool:   pool(v1alpha1.Never, map[string]string{"team": "data", "rev": "2"}, dedicated),
		image:  "ami-0123456789abcdef0",
		// The kubelet's own labels stay; the template's are set.
		wantLabels: map[string]string{"team": "data", "rev": "2", "eks.amazonaws.com/nodegroup": "ng"},
		wantTaints: []corev1.Taint{someone, dedicated, cni},
		want: Applied{Labels: []string{"rev", "team"}, Taints: []string{dedicated.ToString(), cni.ToString()},
			Image: "ami-0123456789abcdef0", At: now},
	}, {
		name:       "a node that joined without the taint is late; a taint the kubelet set is not added twice",
		labels:     map[string]string{"rev": "1"},
		taints:     []corev1.Taint{{Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule}, cni},
		pool:       pool("30s", map[string]string{"rev": "2"}, dedicated),
		wantLabels: map[string]string{"rev": "2"},
		wantTaints: []corev1.Taint{dedicated, cni},
		want:       Applied{Labels: []string{"rev"}, Taints: []string{dedicated.ToString()}, Late: true, At: now},
		autoscaler: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: maps.Clone(tt.labels)}, Spec: corev1.NodeSpec{Taints: slices.Clone(tt.taints)}}
			got := Apply(n, tt.pool, tt.image, now)
			if !maps.Equal(n.Labels, tt.wantLabels) {
				t.Errorf("labels %v, want %v", n.Labels, tt.wantLabels)
			}
			if !slices.EqualFunc(n.Spec.Taints, tt.wantTaints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) {
				t.Errorf("taints %v, want %v", n.Spec.Taints, tt.wantTaints)
			}
			if !slices.Equal(got.Labels, tt.want.Labels) || !slices.Equal(got.Taints, tt.want.Taints) || got.Image != tt.want.Image || got.Late != tt.want.Late || !got.At.Equal(now) {
				t.Errorf("Apply = %+v, want %+v", got, tt.want)
			}
			if back, ok := Registered(n); !ok || !slices.Equal(back.Labels, got.Labels) || back.Late != got.Late {
				t.Errorf("Registered = %+v, %v; want what Apply returned", back, ok)
			}
			if Tainted(n) {
				t.Error("still tainted")
			}
			if n.Annotations[contract.AnnotationImage] != tt.image {
				t.Errorf("image annotation %q, want %q", n.Annotations[contract.AnnotationImage], tt.image)
			}
			if got := n.Annotations[AnnotationScaleDownDisabled] == "true"; got != tt.autoscaler {
				t.Errorf("cluster-autoscaler scale-down-disabled = %v, want %v (sluice consolidates the pool: %v)", got, tt.autoscaler, tt.autoscaler)
			}
		})
	}
}
