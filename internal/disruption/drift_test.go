package disruption_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func TestDrift(t *testing.T) {
	const (
		instanceType = "node.kubernetes.io/instance-type"
		sluiceCap    = "sluice.dev/capacity-type"
		karpenterCap = "karpenter.sh/capacity-type"
		aksPriority  = "kubernetes.azure.com/scalesetpriority"
		eksCap       = "eks.amazonaws.com/capacityType"
		aksImage     = "kubernetes.azure.com/node-image-version"
		eksImage     = "eks.amazonaws.com/nodegroup-image"
	)
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	cilium := corev1.Taint{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}
	full := &v1alpha1.NodeTemplate{
		Labels:        map[string]string{"team": "ml", "tier": "batch"},
		Taints:        []corev1.Taint{gpu},
		StartupTaints: []corev1.Taint{cilium},
		InstanceTypes: []string{"m6i.xlarge", "m6i.2xlarge"},
		Capacity:      v1alpha1.CapacityOnDemand,
		Image:         "ami-2",
	}
	// asTemplate is a node made exactly from full by sluice, with hash "h1".
	asTemplate := []nodeOpt{label("team", "ml"), label("tier", "batch"), tainted("dedicated", "gpu", corev1.TaintEffectNoSchedule),
		label(instanceType, "m6i.xlarge"), label(sluiceCap, "on-demand"), annotate(disruption.AnnotationImage, "ami-2"),
		annotate(disruption.AnnotationTemplateHash, "h1")}
	with := func(opts ...nodeOpt) []nodeOpt { return append(append([]nodeOpt{}, asTemplate...), opts...) }
	imageOnly := &v1alpha1.NodeTemplate{Image: "AKSUbuntu-2204gen2containerd-202411.12.0"}
	galleryImage := &v1alpha1.NodeTemplate{Image: "/subscriptions/109a5e88-712a-48ae-9078-9ca8b3c81345/resourceGroups/AKS-Ubuntu/providers/Microsoft.Compute/galleries/AKSUbuntu/images/2204gen2containerd/versions/202411.12.0"}
	spot := &v1alpha1.NodeTemplate{Capacity: v1alpha1.CapacitySpot}
	onDemand := &v1alpha1.NodeTemplate{Capacity: v1alpha1.CapacityOnDemand}

	for _, tc := range []struct {
		name     string
		template *v1alpha1.NodeTemplate
		node     []nodeOpt
		hash     string
		want     []disruption.Difference
	}{
		{"no template", nil, []nodeOpt{label("team", "other")}, "h1", nil},
		{"node as the template", full, asTemplate, "h1", nil},
		{"empty template", &v1alpha1.NodeTemplate{}, []nodeOpt{label("team", "x"), tainted("a", "b", corev1.TaintEffectNoSchedule)}, "", nil},

		{"label missing", &v1alpha1.NodeTemplate{Labels: full.Labels}, []nodeOpt{label("tier", "batch")}, "",
			[]disruption.Difference{{Field: "labels[team]", Want: "ml"}}},
		{"label different", full, with(label("team", "web")), "h1",
			[]disruption.Difference{{Field: "labels[team]", Want: "ml", Got: "web"}}},
		{"label wanted empty, node has none", &v1alpha1.NodeTemplate{Labels: map[string]string{"spare": ""}}, nil, "",
			[]disruption.Difference{{Field: "labels[spare]"}}},

		{"taint missing", &v1alpha1.NodeTemplate{Taints: []corev1.Taint{gpu}}, nil, "",
			[]disruption.Difference{{Field: "taints[dedicated=gpu:NoSchedule]", Want: "dedicated=gpu:NoSchedule"}}},
		{"taint with another value", &v1alpha1.NodeTemplate{Taints: []corev1.Taint{gpu}}, []nodeOpt{tainted("dedicated", "cpu", corev1.TaintEffectNoSchedule)}, "",
			[]disruption.Difference{{Field: "taints[dedicated=gpu:NoSchedule]", Want: "dedicated=gpu:NoSchedule", Got: "dedicated=cpu:NoSchedule"}}},
		{"taint with another effect", &v1alpha1.NodeTemplate{Taints: []corev1.Taint{gpu}}, []nodeOpt{tainted("dedicated", "gpu", corev1.TaintEffectNoExecute)}, "",
			[]disruption.Difference{{Field: "taints[dedicated=gpu:NoSchedule]", Want: "dedicated=gpu:NoSchedule", Got: "dedicated=gpu:NoExecute"}}},
		{"extra node taints are ignored", full, with(tainted("node.kubernetes.io/unschedulable", "", corev1.TaintEffectNoSchedule),
			tainted("sluice.dev/maintenance", "Preempt", corev1.TaintEffectNoSchedule), tainted("someone", "else", corev1.TaintEffectNoExecute)), "h1", nil},
		{"template taints on managed keys are not compared", &v1alpha1.NodeTemplate{Taints: []corev1.Taint{
			{Key: "node.kubernetes.io/out-of-service", Effect: corev1.TaintEffectNoExecute}, {Key: "sluice.dev/maintenance", Effect: corev1.TaintEffectNoSchedule}}}, nil, "", nil},
		{"startup taint absent on node", &v1alpha1.NodeTemplate{StartupTaints: []corev1.Taint{cilium}}, nil, "", nil},
		{"taint that is also a startup taint, gone", &v1alpha1.NodeTemplate{Taints: []corev1.Taint{cilium}, StartupTaints: []corev1.Taint{cilium}}, nil, "", nil},

		{"instance type not listed", full, with(label(instanceType, "c5.large")), "h1",
			[]disruption.Difference{{Field: "instanceType", Want: "m6i.xlarge or m6i.2xlarge", Got: "c5.large"}}},
		{"instance type listed second", full, with(label(instanceType, "m6i.2xlarge")), "h1", nil},
		{"instance type unknown", &v1alpha1.NodeTemplate{InstanceTypes: []string{"m6i.xlarge"}}, nil, "", nil},

		{"image via annotation", full, with(annotate(disruption.AnnotationImage, "ami-1")), "h1",
			[]disruption.Difference{{Field: "image", Want: "ami-2", Got: "ami-1"}}},
		{"image annotation before the cloud's label", full, with(label(eksImage, "ami-1")), "h1", nil},
		{"image via AKS label", imageOnly, []nodeOpt{label(aksImage, "AKSUbuntu-2204gen2containerd-202410.15.0")}, "",
			[]disruption.Difference{{Field: "image", Want: "AKSUbuntu-2204gen2containerd-202411.12.0", Got: "AKSUbuntu-2204gen2containerd-202410.15.0"}}},
		{"image via AKS label, same", imageOnly, []nodeOpt{label(aksImage, "AKSUbuntu-2204gen2containerd-202411.12.0")}, "", nil},
		{"a gallery image version ID and the AKS label naming it", galleryImage, []nodeOpt{label(aksImage, "AKSUbuntu-2204gen2containerd-202411.12.0")}, "", nil},
		{"a gallery image version ID and an older AKS label", galleryImage, []nodeOpt{label(aksImage, "AKSUbuntu-2204gen2containerd-202410.15.0")}, "",
			[]disruption.Difference{{Field: "image", Want: galleryImage.Image, Got: "AKSUbuntu-2204gen2containerd-202410.15.0"}}},
		{"Azure IDs in another case", galleryImage, []nodeOpt{annotate(disruption.AnnotationImage, strings.ToLower(galleryImage.Image))}, "", nil},
		{"image via EKS label", &v1alpha1.NodeTemplate{Image: "ami-2"}, []nodeOpt{label(eksImage, "ami-1")}, "",
			[]disruption.Difference{{Field: "image", Want: "ami-2", Got: "ami-1"}}},
		{"image unknown", imageOnly, nil, "", nil},
		{"image not in the template", &v1alpha1.NodeTemplate{}, []nodeOpt{annotate(disruption.AnnotationImage, "ami-1")}, "", nil},

		{"capacity: sluice's on-demand, template spot", spot, []nodeOpt{label(sluiceCap, "on-demand")}, "",
			[]disruption.Difference{{Field: "capacity", Want: "spot", Got: "on-demand"}}},
		{"capacity: sluice's spot, template on-demand", onDemand, []nodeOpt{label(sluiceCap, "spot")}, "",
			[]disruption.Difference{{Field: "capacity", Want: "on-demand", Got: "spot"}}},
		{"capacity: sluice's spot, template spot", spot, []nodeOpt{label(sluiceCap, "spot")}, "", nil},
		{"capacity: sluice's label before Karpenter's", spot, []nodeOpt{label(sluiceCap, "spot"), label(karpenterCap, "on-demand")}, "", nil},
		{"capacity: Karpenter's on-demand, template spot", spot, []nodeOpt{label(karpenterCap, "on-demand")}, "",
			[]disruption.Difference{{Field: "capacity", Want: "spot", Got: "on-demand"}}},
		{"capacity: Karpenter's spot, template on-demand", onDemand, []nodeOpt{label(karpenterCap, "spot")}, "",
			[]disruption.Difference{{Field: "capacity", Want: "on-demand", Got: "spot"}}},
		{"capacity: Karpenter's reserved is not judged", onDemand, []nodeOpt{label(karpenterCap, "reserved")}, "", nil},
		{"capacity: AKS regular, template spot", spot, []nodeOpt{label(aksPriority, "regular")}, "",
			[]disruption.Difference{{Field: "capacity", Want: "spot", Got: "on-demand"}}},
		{"capacity: AKS spot, template on-demand", onDemand, []nodeOpt{label(aksPriority, "spot")}, "",
			[]disruption.Difference{{Field: "capacity", Want: "on-demand", Got: "spot"}}},
		{"capacity: AKS spot, template spot", spot, []nodeOpt{label(aksPriority, "spot")}, "", nil},
		{"capacity: EKS ON_DEMAND, template spot", spot, []nodeOpt{label(eksCap, "ON_DEMAND")}, "",
			[]disruption.Difference{{Field: "capacity", Want: "spot", Got: "on-demand"}}},
		{"capacity: EKS SPOT, template on-demand", onDemand, []nodeOpt{label(eksCap, "SPOT")}, "",
			[]disruption.Difference{{Field: "capacity", Want: "on-demand", Got: "spot"}}},
		{"capacity: EKS SPOT, template spot", spot, []nodeOpt{label(eksCap, "SPOT")}, "", nil},
		{"capacity: EKS CAPACITY_BLOCK is not judged", onDemand, []nodeOpt{label(eksCap, "CAPACITY_BLOCK")}, "", nil},
		{"capacity unknown", spot, nil, "", nil},
		{"capacity not in the template", &v1alpha1.NodeTemplate{}, []nodeOpt{label(sluiceCap, "spot")}, "", nil},

		{"hash mismatch", full, asTemplate, "h2",
			[]disruption.Difference{{Field: "kubelet", Want: "h2", Got: "h1"}}},
		{"no hash on the node", &v1alpha1.NodeTemplate{}, nil, "h2", nil},
		{"no hash from the caller", &v1alpha1.NodeTemplate{}, []nodeOpt{annotate(disruption.AnnotationTemplateHash, "h1")}, "", nil},

		{"every difference, sorted by field", full, []nodeOpt{label("tier", "web"), label(instanceType, "c5.large"), label(sluiceCap, "spot"),
			annotate(disruption.AnnotationImage, "ami-1"), annotate(disruption.AnnotationTemplateHash, "h0")}, "h1",
			[]disruption.Difference{
				{Field: "capacity", Want: "on-demand", Got: "spot"},
				{Field: "image", Want: "ami-2", Got: "ami-1"},
				{Field: "instanceType", Want: "m6i.xlarge or m6i.2xlarge", Got: "c5.large"},
				{Field: "kubelet", Want: "h1", Got: "h0"},
				{Field: "labels[team]", Want: "ml"},
				{Field: "labels[tier]", Want: "batch", Got: "web"},
				{Field: "taints[dedicated=gpu:NoSchedule]", Want: "dedicated=gpu:NoSchedule"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := disruption.Drift(node("n1", tc.node...), tc.template, tc.hash)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Drift =\n  %v\nwant\n  %v", got, tc.want)
			}
		})
	}
}

func TestDriftIsStable(t *testing.T) {
	// Map iteration order differs from run to run; the answer must not.
	labels := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		labels[k] = "x"
	}
	tmpl := &v1alpha1.NodeTemplate{Labels: labels}
	first := disruption.Drift(node("n1"), tmpl, "")
	if len(first) != len(labels) {
		t.Fatalf("Drift found %d differences, want %d", len(first), len(labels))
	}
	for i := 0; i < 20; i++ {
		if got := disruption.Drift(node("n1"), tmpl, ""); !reflect.DeepEqual(got, first) {
			t.Fatalf("Drift = %v, before %v", got, first)
		}
	}
}

func TestDifferenceString(t *testing.T) {
	for _, tc := range []struct {
		d    disruption.Difference
		want string
	}{
		{disruption.Difference{Field: "image", Want: "ami-2", Got: "ami-1"}, "image: want ami-2, node has ami-1"},
		{disruption.Difference{Field: "labels[team]", Want: "ml"}, "labels[team]: want ml, node has none"},
		{disruption.Difference{Field: "labels[spare]", Got: "x"}, `labels[spare]: want "", node has x`},
		{disruption.Difference{Field: "instanceType", Want: "a or b", Got: "c"}, "instanceType: want a or b, node has c"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.d, got, tc.want)
		}
	}
}
