package azurevmss_test

import (
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss/azuretest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// flexWorld is a world with one zonal Flexible set, "web-flex", whose
// model's kubelet registers with the labels and taint below.
func flexWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld()
	w.cloud.AddSetWithModel("web-flex", "Standard_D4s_v5", 0, azuretest.Model{
		Flexible: true, Zones: []string{"1", "2", "3"},
		NodeLabels: map[string]string{"tier": "web"},
		NodeTaints: []corev1.Taint{provider.Unregistered},
	})
	return w
}

// Create on a Flexible set PUTs a VM of the machine's name into the set,
// made from the set's model with the template's image and the pool's tag;
// asking again, by the same provider or a restarted one, returns it and
// makes nothing more.
func TestFlexibleCreateMakesTheVMByNameOnce(t *testing.T) {
	w := flexWorld(t)
	np := pool("web", "web-flex")
	np.Spec.Template = &v1alpha1.NodeTemplate{Image: jammyNew}
	m, err := w.provider(3).Create(ctx(t), np, "web-a1b2c")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	want := "azure:///subscriptions/" + azuretest.Subscription + "/resourceGroups/mc_rg_aks_westeurope/providers/Microsoft.Compute/virtualMachines/web-a1b2c"
	if m.ProviderID != want || m.ProviderID != w.cloud.ProviderID("web-flex", "web-a1b2c") {
		t.Errorf("providerID = %s, want %s, as cloud-provider-azure writes a standard VM's", m.ProviderID, want)
	}
	if m.Name != "web-a1b2c" || m.Pool != "web" || m.InstanceType != "Standard_D4s_v5" || !strings.HasPrefix(m.Zone, "westeurope-") ||
		m.Image != jammyNew || m.State != provider.StateRunning {
		t.Errorf("machine = %+v", m)
	}

	vm, ok := w.cloud.VM("web-flex", "web-a1b2c")
	if !ok {
		t.Fatal("no VM web-a1b2c in the set")
	}
	p := vm.Properties
	if id := *p.VirtualMachineScaleSet.ID; !strings.HasSuffix(id, "/providers/Microsoft.Compute/virtualMachineScaleSets/web-flex") {
		t.Errorf("the VM's virtualMachineScaleSet is %s, want the set", id)
	}
	if tag := vm.Tags[azurevmss.TagNodePool]; tag == nil || *tag != "web" {
		t.Errorf("the VM's tags are %v, want %s=web", vm.Tags, azurevmss.TagNodePool)
	}
	if r := p.StorageProfile.ImageReference; *r.Publisher+":"+*r.Offer+":"+*r.SKU+":"+*r.Version != jammyNew {
		t.Errorf("the VM boots %+v, want the template's %s", r, jammyNew)
	}
	if *p.OSProfile.ComputerName != "web-a1b2c" || w.cloud.NodeName("web-flex", "web-a1b2c") != "web-a1b2c" {
		t.Errorf("computerName = %s, want the machine's name, which its Node takes", *p.OSProfile.ComputerName)
	}
	if *p.StorageProfile.OSDisk.DeleteOption != "Delete" || *p.NetworkProfile.NetworkInterfaceConfigurations[0].Properties.DeleteOption != "Delete" {
		t.Error("the VM's disk and network interface stay behind when it is deleted")
	}
	if labels, taints, ok := w.cloud.Kubelet("web-flex", "web-a1b2c"); !ok || !maps.Equal(labels, map[string]string{"tier": "web"}) ||
		len(taints) != 1 || taints[0] != provider.Unregistered {
		t.Errorf("the VM's kubelet = %v %v %v; want the model's user data's", labels, taints, ok)
	}

	for _, p := range []*azurevmss.Provider{w.provider(3), w.provider(3)} { // the same name, then after a restart
		again, err := p.Create(ctx(t), np, "web-a1b2c")
		if err != nil || again.ProviderID != m.ProviderID {
			t.Fatalf("create again = %+v, %v; want the same VM", again, err)
		}
	}
	if n := w.cloud.Count(http.MethodPut, "/virtualMachines/web-a1b2c"); n != 1 {
		t.Errorf("%d PUTs of the VM, want 1", n)
	}
	if n := len(w.cloud.Instances("web-flex")); n != 1 {
		t.Errorf("the set has %d VMs, want 1", n)
	}
	got, err := w.provider(3).Get(ctx(t), "web-a1b2c")
	if err != nil || got.ProviderID != m.ProviderID {
		t.Errorf("get = %+v, %v", got, err)
	}
}

// A VM of the machine's name that is not the pool's is never taken for it.
func TestFlexibleCreateRefusesAnotherPoolsVM(t *testing.T) {
	w := flexWorld(t)
	if _, err := w.provider(3).Create(ctx(t), pool("batch", "web-flex"), "web-a1b2c"); err != nil {
		t.Fatal(err)
	}
	if err := w.claims.Delete(ctx(t), "web-a1b2c"); err != nil { // its record lost
		t.Fatal(err)
	}
	m, err := w.provider(3).Create(ctx(t), pool("web", "web-flex"), "web-a1b2c")
	if pe, ok := provider.AsError(err); !ok || pe.Code != provider.CodeInvalidTemplate {
		t.Fatalf("create = %+v, %v; want InvalidTemplate: the VM is pool batch's", m, err)
	}
}

// Delete deletes the VM (forceDeletion false) and its record; deleting again
// is no error and asks Azure nothing.
func TestFlexibleDeleteIsIdempotent(t *testing.T) {
	w := flexWorld(t)
	p := w.provider(3)
	if _, err := p.Create(ctx(t), pool("web", "web-flex"), "web-a1b2c"); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx(t), "web-a1b2c"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if n := len(w.cloud.Instances("web-flex")); n != 0 {
		t.Errorf("the set has %d VMs after the delete, want 0", n)
	}
	var deletes []azuretest.Request
	for _, r := range w.cloud.Requests() {
		if r.Method == http.MethodDelete {
			deletes = append(deletes, r)
		}
	}
	if len(deletes) != 1 || !strings.Contains(deletes[0].Query, "forceDeletion=false") {
		t.Errorf("DELETEs = %+v, want one with forceDeletion=false", deletes)
	}
	if c, err := w.claims.Get(ctx(t), "web-a1b2c"); err != nil || c != nil {
		t.Errorf("record after delete = %+v, %v; want none", c, err)
	}
	if err := p.Delete(ctx(t), "web-a1b2c"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if n := w.cloud.Count(http.MethodDelete, ""); n != 1 {
		t.Errorf("%d DELETEs, want 1", n)
	}
	if _, err := p.Get(ctx(t), "web-a1b2c"); !provider.IsNotFound(err) {
		t.Errorf("get after delete = %v, want not found", err)
	}
}

// A deletion Azure accepts and then fails keeps the record; a second Delete
// finishes it.
func TestFlexibleFailedDeletionIsRetried(t *testing.T) {
	w := flexWorld(t)
	p := w.provider(3)
	if _, err := p.Create(ctx(t), pool("web", "web-flex"), "web-a1b2c"); err != nil {
		t.Fatal(err)
	}
	w.cloud.FailDelete = []string{"InternalExecutionError"}
	if err := p.Delete(ctx(t), "web-a1b2c"); err == nil || !strings.Contains(err.Error(), "InternalExecutionError") {
		t.Fatalf("delete = %v, want Azure's failure", err)
	}
	if c, err := w.claims.Get(ctx(t), "web-a1b2c"); err != nil || c == nil {
		t.Fatalf("record after a failed delete = %v, %v; want it kept", c, err)
	}
	if err := p.Delete(ctx(t), "web-a1b2c"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if n := len(w.cloud.Instances("web-flex")); n != 0 {
		t.Errorf("the set has %d VMs, want 0", n)
	}
}

// List reads the set's VMs once, by the set's id, and answers the pool's
// only: not another pool's, nor the set's own.
func TestFlexibleListFindsThePoolsVMsOnly(t *testing.T) {
	w := flexWorld(t)
	p := w.provider(3)
	w.cloud.AddInstance("web-flex")
	for _, m := range []struct{ pool, name string }{{"web", "web-a1b2c"}, {"web", "web-d3e4f"}, {"batch", "batch-x1y2z"}} {
		if _, err := p.Create(ctx(t), pool(m.pool, "web-flex"), m.name); err != nil {
			t.Fatal(err)
		}
	}
	before := len(w.cloud.Requests())
	list, err := p.List(ctx(t), "web")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list {
		names = append(names, m.Name)
	}
	if strings.Join(names, " ") != "web-a1b2c web-d3e4f" {
		t.Errorf("List(web) = %v, want web-a1b2c web-d3e4f", names)
	}
	// One list of the set's four VMs, in two pages; no VM read one by one.
	filter := url.Values{"$filter": {"'virtualMachineScaleSet/id' eq '/subscriptions/" + azuretest.Subscription + "/resourceGroups/" +
		azuretest.ResourceGroup + "/providers/Microsoft.Compute/virtualMachineScaleSets/web-flex'"}}.Encode()
	sent := w.cloud.Requests()[before:]
	for _, r := range sent {
		if r.Method != http.MethodGet || !strings.Contains(r.Query, filter) {
			t.Errorf("List sent %s %s?%s; want the VM list filtered by the set's id only", r.Method, r.Path, r.Query)
		}
	}
	if len(sent) != 2 {
		t.Errorf("List sent %d requests, want the list's 2 pages", len(sent))
	}
}

// A VM Azure cannot place (AllocationFailed) is deleted, and the machine is
// made in the pool's next set.
func TestFlexibleNoCapacityCleansUpAndFallsBack(t *testing.T) {
	w := flexWorld(t)
	w.cloud.AddSetWithModel("web-flex-d8", "Standard_D8s_v5", 0, azuretest.Model{Flexible: true})
	w.cloud.FailScaleOut = []string{"AllocationFailed"}
	m, err := w.provider(3).Create(ctx(t), pool("web", "web-flex", "web-flex-d8"), "web-a1b2c")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if m.InstanceType != "Standard_D8s_v5" {
		t.Errorf("machine = %+v, want the second set's", m)
	}
	if n := len(w.cloud.Instances("web-flex")); n != 0 {
		t.Errorf("the first set keeps %d VMs, want the failed one deleted", n)
	}
	if _, ok := w.cloud.VM("web-flex-d8", "web-a1b2c"); !ok {
		t.Error("no VM web-a1b2c in the second set")
	}
	c, err := w.claims.Get(ctx(t), "web-a1b2c")
	if err != nil || c == nil || c.ScaleSet != "web-flex-d8" {
		t.Errorf("record = %+v, %v; want the second set's", c, err)
	}
}

// A VM Azure cannot place in its zone (ZonalAllocationFailed,
// OverconstrainedZonalAllocationRequest) is refused, retryably; the zone is
// passed over for the set's size, not the size itself, so the machine
// asked again is made in another of the set's zones.
func TestFlexibleZonalFailureTriesAnotherZone(t *testing.T) {
	for _, code := range []string{"ZonalAllocationFailed", "OverconstrainedZonalAllocationRequest"} {
		t.Run(code, func(t *testing.T) {
			first, err := flexWorld(t).provider(3).Create(ctx(t), pool("web", "web-flex"), "web-a1b2c")
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			w := flexWorld(t)
			w.cloud.FailScaleOut = []string{code}
			p := w.provider(3)
			_, err = p.Create(ctx(t), pool("web", "web-flex"), "web-a1b2c")
			if e, ok := provider.AsError(err); !ok || e.Code != provider.CodeInsufficientCapacity || !e.Retryable {
				t.Fatalf("create in a zone without capacity: %v; want a retryable InsufficientCapacity", err)
			}
			m, err := p.Create(ctx(t), pool("web", "web-flex"), "web-a1b2c")
			if err != nil {
				t.Fatalf("create asked again: %v; want the VM in another zone of the set", err)
			}
			if m.Zone == first.Zone || !strings.HasPrefix(m.Zone, "westeurope-") {
				t.Errorf("the VM asked again is in %s; want another zone than %s, which had no capacity", m.Zone, first.Zone)
			}
		})
	}
}

// A Node of a Flexible set that sluice did not make is named from its
// providerID and deleted through the VM API, its set being a pool's.
func TestFlexibleNodeIsDeletedByItsProviderID(t *testing.T) {
	w := flexWorld(t)
	w.pools = append(w.pools, pool("web", "web-flex"))
	w.cloud.AddInstance("web-flex")
	var vm string
	for name := range w.cloud.Instances("web-flex") {
		vm = name
	}
	p := w.provider(3)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: w.cloud.NodeName("web-flex", vm)},
		Spec: corev1.NodeSpec{ProviderID: w.cloud.ProviderID("web-flex", vm)}}
	name := p.NameOf(node)
	if name != "azure-vmss/"+azuretest.Subscription+"/mc_rg_aks_westeurope/"+vm {
		t.Fatalf("NameOf = %q", name)
	}
	m, err := p.Get(ctx(t), name)
	if err != nil || m.ProviderID != node.Spec.ProviderID {
		t.Fatalf("get %s = %+v, %v", name, m, err)
	}
	if err := p.Delete(ctx(t), name); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
	if n := len(w.cloud.Instances("web-flex")); n != 0 {
		t.Errorf("the set has %d VMs, want 0", n)
	}
}

// NameOf names any standard VM's Node. Delete of such a name deletes the
// VM only when its scale set is one an azure-vmss NodePool lists: a VM of
// another set, or any VM when the NodePools cannot be listed, is refused
// (ForeignVM) and left running.
func TestFlexibleNodeOfNoPoolsSetIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		pools []*v1alpha1.NodePool
		list  bool
	}{
		"no pool lists the set": {pools: []*v1alpha1.NodePool{pool("web", "web-other"), func() *v1alpha1.NodePool {
			np := pool("aks", "web-flex") // another provider's pool over the set
			np.Spec.Provider.Name = v1alpha1.ProviderAKS
			return np
		}()}, list: true},
		"the pools cannot be listed": {pools: []*v1alpha1.NodePool{pool("web", "web-flex")}},
	} {
		t.Run(name, func(t *testing.T) {
			w := flexWorld(t)
			w.pools = tc.pools
			w.cloud.AddInstance("web-flex")
			var vm string
			for name := range w.cloud.Instances("web-flex") {
				vm = name
			}
			p := w.provider(3)
			if !tc.list {
				p = azurevmss.New(&azfake.TokenCredential{}, w.claims, clock.RealClock{}, azurevmss.Options{PollEvery: 10 * time.Millisecond,
					ClientOptions: &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: w.cloud.Transport()}}})
			}
			name := p.NameOf(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: w.cloud.ProviderID("web-flex", vm)}})
			err := p.Delete(ctx(t), name)
			if e, ok := provider.AsError(err); !ok || e.Code != azurevmss.CodeForeignVM || !strings.Contains(e.Message, "web-flex") {
				t.Errorf("delete %s: %v; want ForeignVM naming the set", name, err)
			}
			if _, ok := w.cloud.VM("web-flex", vm); !ok {
				t.Error("the VM was deleted")
			}
		})
	}
}

// A Flexible VM carries the model's user data, which Azure answers only
// with $expand=userData.
func TestFlexibleVMCarriesTheModelsUserData(t *testing.T) {
	w := flexWorld(t)
	p := w.provider(3)
	np := pool("web", "web-flex")
	if _, err := p.Create(ctx(t), np, "web-a1b2c"); err != nil {
		t.Fatal(err)
	}
	vm, _ := w.cloud.VM("web-flex", "web-a1b2c")
	text, err := base64.StdEncoding.DecodeString(*vm.Properties.UserData)
	if err != nil || !azurevmss.RegistersUnregisteredTaint(string(text)) {
		t.Errorf("the VM's user data %q (%v) does not register the unregistered taint", text, err)
	}
}
