package nodepool_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss/azuretest"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A pool of an Azure VM scale set (the Azure SDK's fakes over a model of a
// Uniform set) drifts: the controller scales the set out once per
// replacement through the azure-vmss provider, finds each replacement's
// Node (named by its "kubelet" as AKS names them) by a providerID whose
// resource group is in another case than Azure's answers, deletes the old
// Nodes (drained first) and their instances, which the set had before
// sluice: the set ends with 2 instances, the replacements.
func TestAScaleSetPoolDriftsThroughTheProvider(t *testing.T) {
	s := baseScene(t)
	cloud := azuretest.NewCloud(clock.RealClock{})
	set := "aks-" + strings.ReplaceAll(s.name, "pool", "") + "-12345678-vmss"
	// The set's model registers its kubelets with the pool's selector and
	// nothing else of the pool, and without sluice.dev/unregistered (a
	// user who has not set it): the replacements join late, are registered
	// all the same, and say so.
	cloud.AddSetWithModel(set, "Standard_D4s_v5", 2, azuretest.Model{NodeLabels: s.selector})
	s.scaleSetPool(t, cloud, set)
	before := s.waitNodes(t, 2, time.Minute)
	s.start(t)

	ids := s.driftMidRollout(t, before)
	s.wantRegistration(t, metav1.ConditionFalse, pools.ReasonTaintMissing) // the model lacks it
	if got := slices.Sorted(maps.Keys(cloud.Instances(set))); !slices.Equal(got, ids) || len(ids) != 2 || slices.Contains(ids, "0") || slices.Contains(ids, "1") {
		t.Errorf("scale set %s holds instances %v, the Nodes are instances %v; want the same two replacements, the first two (0, 1) deleted", set, got, ids)
	}
	nodes, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if a, _ := provider.Registered(n); !a.Late || !slices.ContainsFunc(s.nodeEvents(t, n.Name), func(e string) bool { return strings.HasPrefix(e, "RegisteredLate: ") }) {
			t.Errorf("node %s joined without the taint: registered %+v, Events %v; want it late and a RegisteredLate Event", n.Name, a, s.nodeEvents(t, n.Name))
		}
	}
}

// scaleSetPool makes the scene's pool of the scale set in cloud, made by the
// azure-vmss provider, and plays the set's kubelets until the test ends.
func (s *scene) scaleSetPool(t *testing.T, cloud *azuretest.Cloud, set string) {
	t.Helper()
	claims := azurevmss.NewConfigMapClaims(s.env.Client, s.env.Namespace)
	s.machines = provider.NewMachines(provider.Set{v1alpha1.ProviderAzureVMSS: azurevmss.New(&azfake.TokenCredential{}, claims, clock.RealClock{},
		azurevmss.Options{PollEvery: 50 * time.Millisecond, ListPools: provider.ClusterPoolList(s.env.Client), ClientOptions: &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: cloud.Transport()}}})},
		clock.RealClock{})
	ctx := s.cloudPool(t, v1alpha1.ProviderSpec{Name: v1alpha1.ProviderAzureVMSS, Azure: &v1alpha1.AzureProviderSpec{
		SubscriptionID: azuretest.Subscription, ResourceGroup: azuretest.ResourceGroup, ScaleSets: []v1alpha1.ScaleSet{{Name: set}}}})
	go s.kubelet(ctx, t, "aks", func(ctx context.Context, reg map[string]bool) error { return s.registerScaleSet(ctx, cloud, set, reg) })
}

// registerScaleSet plays the kubelets of the set's instances: each
// instance Azure finished making registers a Node named as AKS names it
// (<set>0000<n> in base 36; a Flexible set's VM by its computerName) with the providerID cloud-provider-azure wrote
// before it lowercased resource groups (the case of the group as created:
// the controller must match it to Azure's answers whatever the case), and
// the labels and taints the model it was made from gives its kubelet, never
// the pool's. kwok keeps it Ready.
func (s *scene) registerScaleSet(ctx context.Context, cloud *azuretest.Cloud, set string, registered map[string]bool) error {
	for id, state := range cloud.Instances(set) {
		if registered[id] || state != "Succeeded" {
			continue
		}
		labels, taints, ok := cloud.Kubelet(set, id)
		if !ok {
			continue // deleted meanwhile
		}
		n := fixture.AKSPool(s.name, 1, fixture.WithLabels(labels), fixture.WithTaints(taints...)).Nodes()[0]
		if num, err := strconv.Atoi(id); err == nil {
			n.Name = fmt.Sprintf("%s%06s", strings.TrimSuffix(set, "-vmss")+"-vmss", strconv.FormatInt(int64(num), 36))
			n.Spec.ProviderID = fmt.Sprintf("azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s/virtualMachines/%s",
				azuretest.Subscription, strings.ToUpper(azuretest.ResourceGroup), set, id)
		} else {
			// A Flexible set's VM, named by its creator: the Node is its
			// computerName, its providerID the VM's own.
			n.Name, n.Spec.ProviderID = cloud.NodeName(set, id), cloud.ProviderID(set, id)
		}
		n.Labels[corev1.LabelHostname] = n.Name
		if _, err := s.env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering instance %s: %w", id, err)
		}
		registered[id] = true
	}
	return nil
}

// A pool of a Flexible scale set (the Azure SDK's fakes over a model of the
// set) drifts on its template's labels and then expires, 6 nodes, through
// the azure-vmss provider: each replacement is a VM created by name in the
// set from the set's model, each old node's VM is deleted after its drain,
// the set's own first VMs too. The set ends with 6 VMs, none of the first.
func TestAFlexibleScaleSetPoolDriftsAndExpires(t *testing.T) {
	s := baseScene(t)
	cloud := azuretest.NewCloud(clock.RealClock{})
	set := strings.ReplaceAll(s.name, "pool", "flex") + "-vmss"
	cloud.AddSetWithModel(set, "Standard_D4s_v5", rollSize, azuretest.Model{Flexible: true, Zones: []string{"1", "2", "3"},
		NodeLabels: s.selector, NodeTaints: []corev1.Taint{provider.Unregistered}})
	first := slices.Collect(maps.Keys(cloud.Instances(set)))
	s.scaleSetPool(t, cloud, set)
	before := s.waitNodes(t, rollSize, time.Minute)

	s.driftAndExpire(t, before, func(context.Context) (int, error) { return len(cloud.Instances(set)), nil })
	for name := range cloud.Instances(set) {
		if slices.Contains(first, name) {
			t.Errorf("scale set %s still holds its first VM %s after the drift and the expiry", set, name)
		}
	}
	s.wantRegistration(t, metav1.ConditionTrue, pools.ReasonTainted)
}
