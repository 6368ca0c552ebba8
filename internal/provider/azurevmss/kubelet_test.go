package azurevmss_test

import (
	"encoding/base64"
	"maps"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/sluice-dev/sluice/internal/provider/azurevmss"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss/azuretest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// A new instance's kubelet registers with what the scale set's model says,
// never with the pool's template: an instance made before a change of the
// model's user data keeps the old flags, one made after has the new.
func TestTheKubeletRegistersWithTheModelNotThePool(t *testing.T) {
	w := newWorld()
	unregistered := corev1.Taint{Key: contract.TaintUnregistered, Effect: corev1.TaintEffectNoExecute}
	w.cloud.AddSetWithModel("aks-web-vmss", "Standard_D4s_v5", 1, azuretest.Model{
		NodeLabels: map[string]string{"kubernetes.azure.com/agentpool": "web", "tier": "web"},
		NodeTaints: []corev1.Taint{unregistered, {Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
	})
	np := pool("web", "aks-web-vmss")
	np.Spec.Template = &v1alpha1.NodeTemplate{Labels: map[string]string{"tier": "frontend"}}
	p := w.provider(3)
	m, err := p.Create(ctx(t), np, "web-a1b2c")
	if err != nil {
		t.Fatal(err)
	}
	labels, taints, ok := w.cloud.Kubelet("aks-web-vmss", instance(t, m))
	if !ok || !maps.Equal(labels, map[string]string{"kubernetes.azure.com/agentpool": "web", "tier": "web"}) ||
		!equality.Semantic.DeepEqual(taints, []corev1.Taint{unregistered, {Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}) {
		t.Fatalf("kubelet = %v %v %v; want the model's labels and taints", labels, taints, ok)
	}

	// Azure answers the model's user data only with $expand=userData.
	sets, _ := vmss(t, w)
	plain, err := sets.Get(ctx(t), azuretest.ResourceGroup, "aks-web-vmss", nil)
	if err != nil || plain.Properties.VirtualMachineProfile.UserData != nil {
		t.Fatalf("get without $expand = %v; want no userData", err)
	}
	full, err := sets.Get(ctx(t), azuretest.ResourceGroup, "aks-web-vmss",
		&armcompute.VirtualMachineScaleSetsClientGetOptions{Expand: to.Ptr(armcompute.ExpandTypesForGetVMScaleSetsUserData)})
	if err != nil || !azurevmss.RegistersUnregisteredTaint(*full.Properties.VirtualMachineProfile.UserData) {
		t.Fatalf("the model's user data (%v) does not register %s", err, contract.TaintUnregistered)
	}

	script := "#!/bin/bash\nexec /usr/bin/kubelet --node-labels=tier=batch\n"
	poller, err := sets.BeginUpdate(ctx(t), azuretest.ResourceGroup, "aks-web-vmss", armcompute.VirtualMachineScaleSetUpdate{
		Properties: &armcompute.VirtualMachineScaleSetUpdateProperties{VirtualMachineProfile: &armcompute.VirtualMachineScaleSetUpdateVMProfile{
			UserData: to.Ptr(base64.StdEncoding.EncodeToString([]byte(script)))}}}, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx(t), nil)
	}
	if err != nil {
		t.Fatalf("changing the model's user data: %v", err)
	}
	next, err := p.Create(ctx(t), np, "web-d3e4f")
	if err != nil {
		t.Fatal(err)
	}
	if labels, taints, ok := w.cloud.Kubelet("aks-web-vmss", instance(t, next)); !ok || !maps.Equal(labels, map[string]string{"tier": "batch"}) || len(taints) != 0 {
		t.Errorf("the new instance's kubelet = %v %v %v; want the changed model's", labels, taints, ok)
	}
	if labels, _, _ := w.cloud.Kubelet("aks-web-vmss", instance(t, m)); labels["tier"] != "web" {
		t.Errorf("the first instance's kubelet has labels %v; want those of the model it was made from", labels)
	}
	if _, _, ok := w.cloud.Kubelet("aks-web-vmss", "99"); ok {
		t.Error("an unknown instance has a kubelet")
	}
}

func TestRegistersUnregisteredTaint(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tt := range []struct {
		userData string
		want     bool
	}{
		{"exec kubelet --register-with-taints=sluice.dev/unregistered=:NoExecute", true},
		{"exec kubelet --register-with-taints=sluice.dev/unregistered:NoExecute", true},
		{b64("#!/bin/bash\nexec kubelet --register-with-taints=a=b:NoSchedule,sluice.dev/unregistered=true:NoExecute\n"), true},
		{`KUBELET_FLAGS="--node-labels=a=b --register-with-taints sluice.dev/unregistered:NoExecute"`, true},
		{b64("#cloud-config\nruncmd:\n  - [sh, -c, 'kubelet --register-with-taints=sluice.dev/unregistered:NoExecute']\n"), true},
		{"exec kubelet --register-with-taints=dedicated=web:NoSchedule", false},
		{"exec kubelet --register-with-taints=sluice.dev/unregistered-later:NoExecute", false},
		{"exec kubelet --register-with-taints=other=sluice.dev/unregistered:NoExecute", false},
		{"exec kubelet --node-labels=sluice.dev/unregistered=true", false},
		{b64("exec kubelet"), false},
		{"", false},
	} {
		if got := azurevmss.RegistersUnregisteredTaint(tt.userData); got != tt.want {
			t.Errorf("RegistersUnregisteredTaint(%q) = %v, want %v", tt.userData, got, tt.want)
		}
	}
}
