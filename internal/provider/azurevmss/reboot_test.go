package azurevmss_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss/azuretest"
)

// A reboot of a Uniform set's machine is one restart of its instance,
// returned once Azure accepted it (202): the operation is never polled.
func TestARebootIsAcceptedNotAwaited(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 2)
	p := w.provider(3)
	m, err := p.Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Reboot(ctx(t), m.Name); err != nil {
		t.Fatalf("Reboot(%s): %v", m.Name, err)
	}
	id := instance(t, m)
	for _, other := range []string{"0", "1", id} {
		want := 0
		if other == id {
			want = 1
		}
		if n := w.cloud.Restarts("aks-web-vmss", other); n != want {
			t.Errorf("instance %s restarted %d times; want %d (the machine is instance %s)", other, n, want, id)
		}
	}
	for _, r := range w.cloud.Requests() {
		if strings.Contains(r.Path, "/operations/") {
			t.Errorf("%s %s: Reboot polled the restart; it returns once Azure accepted it", r.Method, r.Path)
		}
		if strings.HasSuffix(r.Path, "/restart") && r.Status != http.StatusAccepted {
			t.Errorf("%s %s answered %d; want 202", r.Method, r.Path, r.Status)
		}
	}
}

// Nodes the sets had before sluice are rebooted by the names NameOf gives
// them: a Uniform set's instance through the scale set VM API, a Flexible
// set's own VM through the VM API.
func TestANodeOfTheSetIsRebootedByItsProviderID(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 2)
	w.cloud.AddSetWithModel("web-flex", "Standard_D4s_v5", 1, azuretest.Model{Flexible: true, Zones: []string{"1"}})
	var vm string
	for name := range w.cloud.Instances("web-flex") {
		vm = name
	}
	p := w.provider(3)
	for set, id := range map[string]string{"aks-web-vmss": "1", "web-flex": vm} {
		name := p.NameOf(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: w.cloud.ProviderID(set, id)}})
		if err := p.Reboot(ctx(t), name); err != nil {
			t.Fatalf("Reboot(%s): %v", name, err)
		}
		if n := w.cloud.Restarts(set, id); n != 1 {
			t.Errorf("%s of set %s restarted %d times after Reboot(%s); want 1", id, set, n, name)
		}
	}
	if n := w.cloud.Restarts("aks-web-vmss", "0"); n != 0 {
		t.Errorf("instance 0 restarted %d times; want 0", n)
	}
	if n := w.cloud.Count(http.MethodPost, "/virtualMachines/"+vm+"/restart"); n != 1 {
		t.Errorf("%d restarts of VM %s through the VM API; want 1", n, vm)
	}
}

// A restart Azure refuses is the provider's refusal, read as every other
// answer is: throttled past the SDK's retries is Throttled with Azure's
// Retry-After.
func TestARefusedRestartIsARefusal(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	p := w.provider(-1)
	m, err := p.Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c")
	if err != nil {
		t.Fatal(err)
	}
	// The Reboot reads the instance first; its restart is the one refused.
	w.cloud.Answered = func(r azuretest.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/virtualMachines/"+instance(t, m)) {
			w.cloud.Throttle(1, 2)
		}
	}
	err = p.Reboot(ctx(t), m.Name)
	if e, ok := provider.AsError(err); !ok || e.Code != azurevmss.CodeThrottled || !e.Retryable || e.RetryAfter != 2*time.Second {
		t.Errorf("Reboot(%s) throttled = %v; want a retryable Throttled asking for Azure's Retry-After of 2s", m.Name, err)
	}
	if n := w.cloud.Restarts("aks-web-vmss", instance(t, m)); n != 0 {
		t.Errorf("instance restarted %d times after a refused restart; want 0", n)
	}
}

// An instance deleted between the Reboot's read and its restart (by
// someone else) is not found: Azure answers the restart 404.
func TestAnInstanceGoneBeforeItsRestartIsNotFound(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	p := w.provider(3)
	m, err := p.Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c")
	if err != nil {
		t.Fatal(err)
	}
	id := instance(t, m)
	sets, _ := vmss(t, w)
	var once atomic.Bool
	w.cloud.Answered = func(r azuretest.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.Path, "/virtualMachines/"+id) || !once.CompareAndSwap(false, true) {
			return
		}
		poller, err := sets.BeginDeleteInstances(context.Background(), azuretest.ResourceGroup, "aks-web-vmss",
			armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: []*string{to.Ptr(id)}}, nil)
		if err == nil {
			_, err = poller.PollUntilDone(context.Background(), &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond})
		}
		if err != nil {
			t.Errorf("deleting instance %s behind the provider's back: %v", id, err)
		}
	}
	err = p.Reboot(ctx(t), m.Name)
	if !provider.IsNotFound(err) {
		t.Errorf("Reboot(%s) of an instance deleted before its restart = %v; want an error for which provider.IsNotFound is true", m.Name, err)
	}
	if n := w.cloud.Count(http.MethodPost, "/restart"); n != 1 {
		t.Errorf("%d restarts asked; want 1, answered 404", n)
	}
}
