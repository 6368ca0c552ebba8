package nodepool

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

func TestOverLimits(t *testing.T) {
	q := resource.MustParse
	have := corev1.ResourceList{corev1.ResourceCPU: q("16"), corev1.ResourceMemory: q("64Gi")}
	each := corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("16Gi")}
	cpu, mem := q("20"), q("80Gi")
	tests := []struct {
		name   string
		limits *v1alpha1.Limits
		more   int
		want   string
	}{
		{"no limits", nil, 1, ""},
		{"cpu fits exactly", &v1alpha1.Limits{CPU: &cpu}, 1, ""},
		{"cpu passed with two more", &v1alpha1.Limits{CPU: &cpu}, 2, "spec.limits.cpu is 20"},
		{"memory fits", &v1alpha1.Limits{Memory: &mem}, 1, ""},
		{"memory passed", &v1alpha1.Limits{Memory: &mem}, 2, "spec.limits.memory is 80Gi"},
		{"nodes only", &v1alpha1.Limits{}, 5, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := overLimits(tt.limits, have, each, tt.more)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("overLimits = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestInitialized(t *testing.T) {
	startup := corev1.Taint{Key: "cni-not-ready", Effect: corev1.TaintEffectNoSchedule}
	tmpl := &v1alpha1.NodeTemplate{StartupTaints: []corev1.Taint{startup}}
	node := func(ready corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{contract.AnnotationRegistered: "{}"}},
			Spec:   corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	unregistered := node(corev1.ConditionTrue)
	unregistered.Annotations = nil
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"ready, no taints", node(corev1.ConditionTrue), true},
		{"not ready", node(corev1.ConditionFalse), false},
		{"ready with a startup taint", node(corev1.ConditionTrue, startup), false},
		{"ready with the node lifecycle's not-ready taint", node(corev1.ConditionTrue, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}), false},
		{"ready with another taint", node(corev1.ConditionTrue, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}), true},
		{"ready, not registered yet", unregistered, false},
		{"ready, registered, the unregistered taint not lifted yet", node(corev1.ConditionTrue, corev1.Taint{Key: contract.TaintUnregistered, Effect: corev1.TaintEffectNoExecute}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := initialized(tt.node, tmpl); got != tt.want {
				t.Errorf("initialized = %v, want %v", got, tt.want)
			}
		})
	}
}
