package nodepool

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

func TestCoexistence(t *testing.T) {
	pool := func(name string, provider v1alpha1.ProviderName, consolidateAfter string) v1alpha1.NodePool {
		return v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": name}},
			Provider:     v1alpha1.ProviderSpec{Name: provider},
			Disruption:   &v1alpha1.DisruptionSpec{ConsolidateAfter: consolidateAfter},
		}}
	}
	node := func(name, pool string, edit ...func(*corev1.Node)) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}, Annotations: map[string]string{}}}
		for _, e := range edit {
			e(&n)
		}
		return n
	}
	late := func(n *corev1.Node) {
		n.Annotations[contract.AnnotationRegistered] = `{"late":true,"at":"2026-11-27T12:00:00Z"}`
	}
	onTime := func(n *corev1.Node) { n.Annotations[contract.AnnotationRegistered] = `{"at":"2026-11-27T12:00:00Z"}` }
	karpenter := func(n *corev1.Node) { n.Labels["karpenter.sh/nodepool"] = "default" }
	quietPool := func(n *corev1.Node) { n.Labels["karpenter.sh/nodepool"] = "quiet" }
	optedOut := func(n *corev1.Node) { n.Annotations[provider.AnnotationScaleDownDisabled] = "true" }
	caTaint := func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "DeletionCandidateOfClusterAutoscaler", Value: "1764244800", Effect: corev1.TaintEffectPreferNoSchedule})
	}
	ca := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cluster-autoscaler-7d9f", Namespace: "kube-system"},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "cluster-autoscaler", Image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.34.0"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	tests := []struct {
		name  string
		pools []v1alpha1.NodePool
		nodes []corev1.Node
		pods  []corev1.Pod
		want  []string // "code pool: a word of the fix"
	}{
		{"nothing to say", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderAWSASG, "30s")},
			[]corev1.Node{node("n1", "a", onTime, optedOut)}, []corev1.Pod{ca}, nil},
		{"machines of an aws-asg pool join late", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderAWSASG, v1alpha1.Never)},
			[]corev1.Node{node("n1", "a", late), node("n2", "a", onTime)}, nil, []string{"RegisteredLate a: AL2023"}},
		{"an azure-vmss pool's fix points AKS users to aks-agentpool", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderAzureVMSS, v1alpha1.Never)},
			[]corev1.Node{node("n1", "a", late)}, nil, []string{"RegisteredLate a: aks-agentpool"}},
		{"an aks-agentpool pool's fix names AKS's initialization taints", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderAKS, v1alpha1.Never)},
			[]corev1.Node{node("n1", "a", late)}, nil, []string{"RegisteredLate a: --node-init-taints"}},
		{"a gcp-mig pool's fix names the instance template", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderGCPMIG, v1alpha1.Never)},
			[]corev1.Node{node("n1", "a", late)}, nil, []string{"RegisteredLate a: instance template"}},
		{"Karpenter's nodes in a pool", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderNone, v1alpha1.Never)},
			[]corev1.Node{node("n1", "a", karpenter)}, nil, []string{"KarpenterNodes a: karpenter.sh/nodepool"}},
		{"Karpenter's nodes in a pool, its disruption off", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderNone, v1alpha1.Never)},
			[]corev1.Node{node("n1", "a", karpenter, quietPool)}, nil, nil},
		{"cluster-autoscaler runs beside a pool sluice consolidates", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderKwok, "30s")},
			[]corev1.Node{node("n1", "a"), node("n2", "a", optedOut)}, []corev1.Pod{ca}, []string{"ClusterAutoscaler a: scale-down-disabled"}},
		{"cluster-autoscaler runs, sluice does not consolidate", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderKwok, v1alpha1.Never)},
			[]corev1.Node{node("n1", "a")}, []corev1.Pod{ca}, nil},
		{"cluster-autoscaler's taint on a pool's node", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderNone, v1alpha1.Never)},
			[]corev1.Node{node("n1", "a", caTaint)}, nil, []string{"ClusterAutoscaler a: node-group options"}},
		{"the cloud labels an AKS pool's machines otherwise than its template", []v1alpha1.NodePool{templateDiffers(pool("a", v1alpha1.ProviderAKS, v1alpha1.Never))},
			nil, nil, []string{"TemplateDiffers a: --node-taints"}},
		{"the provider read that new machines will join untainted, before any has", []v1alpha1.NodePool{taintMissing(pool("a", v1alpha1.ProviderAWSASG, v1alpha1.Never))},
			nil, nil, []string{"TaintMissing a: AL2023"}},
		{"a node no pool selects is not judged", []v1alpha1.NodePool{pool("a", v1alpha1.ProviderAWSASG, v1alpha1.Never)},
			[]corev1.Node{node("n1", "b", late, karpenter)}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CoexistenceWith(tt.pools, tt.nodes, tt.pods, map[string]bool{"quiet": true})
			if len(got) != len(tt.want) {
				t.Fatalf("findings %+v, want %v", got, tt.want)
			}
			for i, w := range tt.want {
				code, rest, _ := strings.Cut(w, " ")
				object, word, _ := strings.Cut(rest, ": ")
				f := got[i]
				if f.Code != code || f.Object != "NodePool "+object || !strings.Contains(f.Fix, word) || f.Message == "" {
					t.Errorf("finding %d = %+v, want code %s on NodePool %s with a fix naming %q", i, f, code, object, word)
				}
			}
		})
	}
}

func taintMissing(p v1alpha1.NodePool) v1alpha1.NodePool {
	p.Status.Conditions = []metav1.Condition{{Type: ConditionRegistration, Status: metav1.ConditionFalse, Reason: ReasonTaintMissing,
		Message: "launch template web version 3 (group eks-web): its user data is not AL2023's"}}
	return p
}

func templateDiffers(p v1alpha1.NodePool) v1alpha1.NodePool {
	p.Status.Conditions = []metav1.Condition{{Type: ConditionRegistration, Status: metav1.ConditionFalse, Reason: ReasonTemplateDiffers,
		Message: "agent pool rg/aks/web differs from the template: label tier=web not in nodeLabels"}}
	return p
}
