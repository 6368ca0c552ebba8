package azurevmss_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss/azuretest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// world is a cloud, the claims' ConfigMap, and a way to make providers
// over both (a new provider is a restarted controller).
type world struct {
	cloud  *azuretest.Cloud
	kube   *k8sfake.Clientset
	claims *azurevmss.ConfigMapClaims
	// pools are the cluster's NodePools, as the providers list them.
	pools []*v1alpha1.NodePool
}

func newWorld() *world {
	kube := k8sfake.NewClientset()
	return &world{cloud: azuretest.NewCloud(clock.RealClock{}), kube: kube, claims: azurevmss.NewConfigMapClaims(kube, "sluice-system")}
}

func (w *world) provider(retries int32) *azurevmss.Provider {
	return azurevmss.New(&azfake.TokenCredential{}, w.claims, clock.RealClock{}, azurevmss.Options{
		PollEvery: 10 * time.Millisecond,
		ListPools: func(context.Context) ([]v1alpha1.NodePool, error) {
			var out []v1alpha1.NodePool
			for _, np := range w.pools {
				out = append(out, *np)
			}
			return out, nil
		},
		ClientOptions: &arm.ClientOptions{ClientOptions: policy.ClientOptions{
			Transport: w.cloud.Transport(),
			Retry:     policy.RetryOptions{MaxRetries: retries, RetryDelay: 10 * time.Millisecond},
		}},
	})
}

func pool(name string, sets ...string) *v1alpha1.NodePool {
	spec := &v1alpha1.AzureProviderSpec{SubscriptionID: azuretest.Subscription, ResourceGroup: azuretest.ResourceGroup}
	for _, s := range sets {
		spec.ScaleSets = append(spec.ScaleSets, v1alpha1.ScaleSet{Name: s})
	}
	return &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodePoolSpec{
		Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderAzureVMSS, Azure: spec},
	}}
}

// The Node's form: cloud-provider-azure lowercases the resource group.
var providerIDOf = regexp.MustCompile(`^azure:///subscriptions/` + azuretest.Subscription +
	`/resourceGroups/mc_rg_aks_westeurope/providers/Microsoft\.Compute/virtualMachineScaleSets/aks-web-vmss/virtualMachines/([0-9]+)$`)

func instance(t *testing.T, m *provider.Machine) string {
	t.Helper()
	got := providerIDOf.FindStringSubmatch(m.ProviderID)
	if got == nil {
		t.Fatalf("machine %s has providerID %q, want a scale set instance's as its Node has it", m.Name, m.ProviderID)
	}
	return got[1]
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// Create raises the set's capacity by one and claims the instance that was
// not there; asking again by the same name returns it and changes nothing.
func TestCreateClaimsTheNewInstanceOnce(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 2)
	p := w.provider(3)
	np := pool("web", "aks-web-vmss")

	m, err := p.Create(ctx(t), np, "web-a1b2c")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if id := instance(t, m); id != "2" {
		t.Errorf("machine is instance %s, want 2, the one the scale-out added", id)
	}
	if m.Name != "web-a1b2c" || m.Pool != "web" || m.InstanceType != "Standard_D4s_v5" || m.Zone != "westeurope-3" || m.State != provider.StateRunning {
		t.Errorf("machine = %+v", m)
	}
	again, err := p.Create(ctx(t), np, "web-a1b2c")
	if err != nil {
		t.Fatalf("create again: %v", err)
	}
	if again.ProviderID != m.ProviderID {
		t.Errorf("asking again gave %s, want the same machine %s", again.ProviderID, m.ProviderID)
	}
	if got := slices.Sorted(maps.Keys(w.cloud.Instances("aks-web-vmss"))); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("instances = %v, want 0 1 2: one scale-out only", got)
	}
	if n := w.cloud.Count(http.MethodPatch, "aks-web-vmss"); n != 1 {
		t.Errorf("%d scale-outs, want 1", n)
	}
	cm, err := w.kube.CoreV1().ConfigMaps("sluice-system").Get(ctx(t), azurevmss.ClaimsConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the claims ConfigMap: %v", err)
	}
	if !strings.Contains(cm.Data["web-a1b2c"], `"instanceID":"2"`) {
		t.Errorf("claim = %s, want instance 2 recorded", cm.Data["web-a1b2c"])
	}
	got, err := p.Get(ctx(t), "web-a1b2c")
	if err != nil || got.ProviderID != m.ProviderID {
		t.Errorf("get = %v, %v; want %s", got, err, m.ProviderID)
	}
	list, err := p.List(ctx(t), "web")
	if err != nil || len(list) != 1 || list[0].Name != "web-a1b2c" {
		t.Errorf("list = %v, %v; want the one machine", list, err)
	}
}

// A controller that dies after Azure accepted the scale-out, before it saw
// the instance, is replaced by one that finds the instance through the
// claim and does not raise the capacity again.
func TestARestartFindsTheInstanceItsPredecessorAskedFor(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 2)
	first, dies := context.WithCancel(context.Background())
	defer dies()
	w.cloud.Answered = func(r azuretest.Request) {
		if r.Method == http.MethodPatch {
			dies()
		}
	}

	if m, err := w.provider(3).Create(first, pool("web", "aks-web-vmss"), "web-a1b2c"); err != nil || m.State != provider.StateLaunching || m.ProviderID != "" {
		t.Fatalf("create cut short after Azure accepted it = %+v, %v; want a Launching machine whose instance is not known yet", m, err)
	}
	w.cloud.Answered = nil

	// The new controller reads the machine first (the controller looks for
	// its replacement's Node): the claim is settled then.
	restarted := w.provider(3)
	got, err := restarted.Get(ctx(t), "web-a1b2c")
	if err != nil || instance(t, got) != "2" {
		t.Fatalf("get after the restart = %+v, %v; want instance 2 with its providerID", got, err)
	}
	m, err := restarted.Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c")
	if err != nil {
		t.Fatalf("create after the restart: %v", err)
	}
	if id := instance(t, m); id != "2" {
		t.Errorf("machine is instance %s, want 2", id)
	}
	if n := w.cloud.Count(http.MethodPatch, "aks-web-vmss"); n != 1 {
		t.Errorf("%d scale-outs, want 1: the restart raised the capacity again", n)
	}
	if n := len(w.cloud.Instances("aks-web-vmss")); n != 3 {
		t.Errorf("%d instances, want 3", n)
	}
}

// A controller that dies after writing its claim but before asking Azure
// leaves a claim with no instance: the next Create raises the capacity.
func TestAClaimWithoutAScaleOutScalesOut(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 2)
	if err := w.claims.Put(ctx(t), &azurevmss.Claim{Machine: "web-a1b2c", Pool: "web", Subscription: azuretest.Subscription,
		ResourceGroup: azuretest.ResourceGroup, ScaleSet: "aks-web-vmss", Before: w.cloud.VMIDs("aks-web-vmss"), Capacity: 3}); err != nil {
		t.Fatal(err)
	}
	p := w.provider(3)
	if _, err := p.Get(ctx(t), "web-a1b2c"); !provider.IsNotFound(err) {
		t.Fatalf("get of a machine never asked for = %v, want not found (the controller then asks again by its name)", err)
	}
	m, err := p.Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if id := instance(t, m); id != "2" {
		t.Errorf("machine is instance %s, want 2", id)
	}
	if n := w.cloud.Count(http.MethodPatch, "aks-web-vmss"); n != 1 {
		t.Errorf("%d scale-outs, want 1", n)
	}
}

// A scale-out Azure cannot place (AllocationFailed) leaves a Failed
// instance in the set; the provider deletes it, so the set is as it was,
// makes the machine in the pool's next set, and passes the refused size
// over for a while.
func TestNoCapacityCleansUpAndFallsBack(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-d4-vmss", "Standard_D4s_v5", 1)
	w.cloud.AddSet("aks-d8-vmss", "Standard_D8s_v5", 1)
	w.cloud.FailScaleOut = []string{"AllocationFailed"}
	p := w.provider(3)
	np := pool("web", "aks-d4-vmss", "aks-d8-vmss")

	m, err := p.Create(ctx(t), np, "web-a1b2c")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if m.InstanceType != "Standard_D8s_v5" || !strings.Contains(m.ProviderID, "/aks-d8-vmss/virtualMachines/1") {
		t.Errorf("machine = %s (%s), want instance 1 of aks-d8-vmss", m.ProviderID, m.InstanceType)
	}
	if got := w.cloud.Instances("aks-d4-vmss"); !maps.Equal(got, map[string]string{"0": "Succeeded"}) {
		t.Errorf("aks-d4-vmss instances = %v, want only 0: the failed instance deleted", got)
	}
	if _, err := p.Create(ctx(t), np, "web-d3e4f"); err != nil {
		t.Fatalf("second create: %v", err)
	}
	if n := w.cloud.Count(http.MethodPatch, "aks-d4-vmss"); n != 1 {
		t.Errorf("aks-d4-vmss was asked %d times, want once: a refused size is passed over for 3 minutes", n)
	}
	claims, err := w.claims.List(ctx(t))
	if err != nil || len(claims) != 2 {
		t.Fatalf("claims = %v, %v; want the two machines' only", claims, err)
	}
}

// When every set refuses, Create returns the cloud's refusal, retryable.
func TestNoCapacityAnywhereIsARetryableRefusal(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	w.cloud.FailScaleOut = []string{"ZonalAllocationFailed"}
	_, err := w.provider(3).Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c")
	pe, ok := provider.AsError(err)
	if !ok || pe.Code != provider.CodeInsufficientCapacity || !pe.Retryable || !strings.Contains(pe.Message, "ZonalAllocationFailed") {
		t.Fatalf("create = %v, want a retryable InsufficientCapacity naming Azure's code", err)
	}
	if got := w.cloud.Instances("aks-web-vmss"); len(got) != 1 {
		t.Errorf("instances = %v, want the one there before", got)
	}
}

// Instances the claims cannot explain are refused, not guessed at.
func TestAnotherWriterOfCapacityIsRefused(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	w.cloud.AfterScaleOut = w.cloud.AddInstance // a cluster autoscaler, at the same moment
	_, err := w.provider(3).Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c")
	pe, ok := provider.AsError(err)
	if !ok || pe.Code != azurevmss.CodeCapacityChangedElsewhere {
		t.Fatalf("create = %v, want CapacityChangedElsewhere", err)
	}
}

// A scale-out that fails while something else scales the set: two new
// instances, one Failed. Neither is deleted: which is the machine's is not
// known.
func TestAFailedScaleOutBesideAnotherWriterDeletesNothing(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	w.cloud.FailScaleOut = []string{"AllocationFailed"}
	w.cloud.AfterScaleOut = w.cloud.AddInstance
	_, err := w.provider(3).Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c")
	if pe, ok := provider.AsError(err); !ok || pe.Code != azurevmss.CodeCapacityChangedElsewhere && pe.Code != provider.CodeInsufficientCapacity {
		t.Fatalf("create = %v, want the refusal", err)
	}
	if !strings.Contains(err.Error(), azurevmss.CodeCapacityChangedElsewhere) {
		t.Errorf("create = %v; want it to say the set changed elsewhere", err)
	}
	if n := w.cloud.Count(http.MethodPost, "/delete"); n != 0 {
		t.Errorf("%d deletions; want none", n)
	}
}

// Delete deletes the one instance (the set's capacity goes down with it)
// and the claim; deleting again asks Azure to delete nothing.
func TestDeleteRemovesTheInstanceAndItsClaim(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 2)
	p := w.provider(3)
	if _, err := p.Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c"); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx(t), "web-a1b2c"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got := slices.Sorted(maps.Keys(w.cloud.Instances("aks-web-vmss"))); !slices.Equal(got, []string{"0", "1"}) {
		t.Errorf("instances = %v, want 0 1", got)
	}
	if c, err := w.claims.Get(ctx(t), "web-a1b2c"); err != nil || c != nil {
		t.Errorf("claim after delete = %+v, %v; want none", c, err)
	}
	deletes := w.cloud.Count(http.MethodPost, "/delete")
	if err := p.Delete(ctx(t), "web-a1b2c"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if n := w.cloud.Count(http.MethodPost, "/delete"); n != deletes || deletes != 1 {
		t.Errorf("DeleteInstances calls: %d then %d, want 1 and no more", deletes, n)
	}
	if _, err := p.Get(ctx(t), "web-a1b2c"); !provider.IsNotFound(err) {
		t.Errorf("get after delete = %v, want not found", err)
	}
}

// A Node the pool had before sluice is named from its providerID (in the
// Node's case) and deleted through its set, once a pool lists the set;
// before, it is refused (ForeignVM) and nothing is deleted.
func TestANodeOfTheSetIsDeletedByItsProviderID(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 3)
	w.pools = []*v1alpha1.NodePool{pool("web", "aks-other-vmss")}
	p := w.provider(3)
	foreign := p.NameOf(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: "azure:///subscriptions/" + azuretest.Subscription +
		"/resourceGroups/mc_rg_aks_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/aks-web-vmss/virtualMachines/1"}})
	if e, ok := provider.AsError(p.Delete(ctx(t), foreign)); !ok || e.Code != azurevmss.CodeForeignVM {
		t.Errorf("delete %s of a set no pool lists: %v; want ForeignVM", foreign, e)
	}
	if n := len(w.cloud.Instances("aks-web-vmss")); n != 3 {
		t.Fatalf("the set has %d instances after a refused delete, want 3", n)
	}
	w.pools = append(w.pools, pool("web2", "aks-web-vmss"))
	node := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "azure:///subscriptions/" + azuretest.Subscription +
		"/resourceGroups/mc_rg_aks_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/aks-web-vmss/virtualMachines/1"}}
	name := p.NameOf(node)
	if name == "" {
		t.Fatal("NameOf gave nothing for a scale set instance's providerID")
	}
	m, err := p.Get(ctx(t), name)
	if err != nil || instance(t, m) != "1" {
		t.Fatalf("get %s = %v, %v", name, m, err)
	}
	if err := p.Delete(ctx(t), name); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
	if got := slices.Sorted(maps.Keys(w.cloud.Instances("aks-web-vmss"))); !slices.Equal(got, []string{"0", "2"}) {
		t.Errorf("instances = %v, want 0 2", got)
	}
}

// Partial failure: Azure accepts DeleteInstances and then fails it. The
// instance is there, so the claim must stay and a second Delete finish it.
func TestAFailedDeletionIsRetried(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	p := w.provider(3)
	if _, err := p.Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c"); err != nil {
		t.Fatal(err)
	}
	w.cloud.FailDelete = []string{"InternalExecutionError"}
	if err := p.Delete(ctx(t), "web-a1b2c"); err == nil || !strings.Contains(err.Error(), "InternalExecutionError") {
		t.Fatalf("delete = %v, want Azure's failure", err)
	}
	if c, err := w.claims.Get(ctx(t), "web-a1b2c"); err != nil || c == nil || c.InstanceID != "1" {
		t.Fatalf("claim after a failed delete = %+v, %v; want it kept", c, err)
	}
	if err := p.Delete(ctx(t), "web-a1b2c"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if got := w.cloud.Instances("aks-web-vmss"); len(got) != 1 {
		t.Errorf("instances = %v, want only 0", got)
	}
}

// A 429 holds every request to the subscription until its Retry-After, not
// only the refused one: a second pool's Create started right after it
// waits too. The refused request itself is retried after Retry-After.
func TestThrottlingHoldsTheWholeSubscription(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	w.cloud.AddSet("aks-batch-vmss", "Standard_D4s_v5", 1)
	p := w.provider(3)
	w.cloud.Throttle(1, 2)
	refusals := make(chan azuretest.Request, 1)
	w.cloud.Refused = func(r azuretest.Request) { refusals <- r }

	done := make(chan error, 1)
	go func() {
		_, err := p.Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c")
		done <- err
	}()
	var refused time.Time
	select {
	case r := <-refusals:
		refused = r.At
	case <-time.After(10 * time.Second):
		t.Fatal("no request was throttled")
	}
	// The fake says it refused as it answers: the first create's client
	// reads that answer a moment later (0.6 ms once, on a loaded machine).
	// The second pool asks after that moment, and the hold is judged from
	// it: a request already on its way when the answer came is not held.
	const inFlight = 100 * time.Millisecond
	time.Sleep(inFlight)
	if _, err := p.Create(ctx(t), pool("batch", "aks-batch-vmss"), "batch-a1b2c"); err != nil {
		t.Fatalf("the second pool's create: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the throttled create: %v", err)
	}
	for _, r := range w.cloud.Requests() {
		if r.Status != http.StatusTooManyRequests && r.At.Before(refused.Add(2*time.Second-50*time.Millisecond)) && !r.At.Before(refused.Add(inFlight)) {
			t.Errorf("%s %s went %v after the 429, inside its Retry-After of 2s", r.Method, r.Path, r.At.Sub(refused))
		}
	}
}

// Throttled past the SDK's retries: a retryable Throttled refusal.
func TestThrottledPastTheRetriesIsRetryable(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	w.cloud.Throttle(10, 1)
	_, err := w.provider(1).Create(ctx(t), pool("web", "aks-web-vmss"), "web-a1b2c")
	pe, ok := provider.AsError(err)
	if !ok || pe.Code != azurevmss.CodeThrottled || !pe.Retryable || pe.RetryAfter != time.Second {
		t.Fatalf("create = %v (%+v), want a retryable Throttled asking for Azure's Retry-After of 1s", err, pe)
	}
	if n := len(w.cloud.Instances("aks-web-vmss")); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
}

func TestRefusals(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	p := w.provider(3)
	for _, tt := range []struct {
		name string
		pool *v1alpha1.NodePool
		want string
	}{
		{"no such set", pool("web", "aks-nope-vmss"), provider.CodeInvalidTemplate},
		{"no settings", &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, provider.CodeInvalidTemplate},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Create(ctx(t), tt.pool, "web-a1b2c")
			if pe, ok := provider.AsError(err); !ok || pe.Code != tt.want {
				t.Errorf("create = %v, want %s", err, tt.want)
			}
		})
	}
	allowed := pool("web", "aks-web-vmss")
	allowed.Spec.Template = &v1alpha1.NodeTemplate{InstanceTypes: []string{"Standard_E4s_v5"}}
	if _, err := p.Create(ctx(t), allowed, "web-a1b2c"); err == nil {
		t.Error("create in a set whose VM size the template does not allow succeeded")
	}
	if n := w.cloud.Count(http.MethodPatch, ""); n != 0 {
		t.Errorf("%d scale-outs after refusals, want none", n)
	}
}

func TestNameOf(t *testing.T) {
	p := newWorld().provider(0)
	base := "azure:///subscriptions/" + azuretest.Subscription + "/resourceGroups/MC_rg_aks_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/aks-web-vmss/virtualMachines/"
	for id, want := range map[string]string{
		base + "12":                 "azure-vmss/" + azuretest.Subscription + "/MC_rg_aks_westeurope/aks-web-vmss/12",
		strings.ToLower(base) + "3": "azure-vmss/" + azuretest.Subscription + "/mc_rg_aks_westeurope/aks-web-vmss/3",
		base + "12/extra":           "",
		base + "x":                  "",
		// A standard VM's: a Flexible set's, as far as a Node tells.
		"azure:///subscriptions/" + azuretest.Subscription + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-a1b2c":   "azure-vmss/" + azuretest.Subscription + "/rg/web-a1b2c",
		"azure:///subscriptions/" + azuretest.Subscription + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-a1b2c/x": "",
		"azure:///subscriptions/" + azuretest.Subscription + "/resourceGroups/rg/providers/Microsoft.Compute/disks/web-a1b2c":             "",
		"aws:///us-east-1a/i-0123456789abcdef0": "",
		"":                                      "",
	} {
		if got := p.NameOf(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: id}}); got != want {
			t.Errorf("NameOf(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestErrorCodes(t *testing.T) {
	w := newWorld()
	w.cloud.AddSet("aks-web-vmss", "Standard_D4s_v5", 1)
	for code, want := range map[string]string{
		"SkuNotAvailable":        provider.CodeInsufficientCapacity,
		"AllocationFailed":       provider.CodeInsufficientCapacity,
		"QuotaExceeded":          provider.CodeQuotaExceeded,
		"InvalidParameter":       provider.CodeInvalidTemplate,
		"ImageNotFound":          provider.CodeInvalidTemplate,
		"AuthorizationFailed":    azurevmss.CodeAccessDenied,
		"InternalExecutionError": "",
	} {
		w.cloud.FailScaleOut = []string{code}
		_, err := w.provider(0).Create(ctx(t), pool("web", "aks-web-vmss"), "web-"+strings.ToLower(code))
		pe, ok := provider.AsError(err)
		switch {
		case want == "" && ok:
			t.Errorf("%s: got %s, want an error that is not a refusal (retried as it is)", code, pe.Code)
		case want != "" && (!ok || pe.Code != want):
			t.Errorf("%s: got %v, want %s", code, err, want)
		}
		var re *azcore.ResponseError
		if want == "" && !errors.As(err, &re) {
			t.Errorf("%s: Azure's error is lost: %v", code, err)
		}
	}
}
