package nodepool_test

import (
	"context"
	"fmt"
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
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool"
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool/akstest"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A pool of an AKS agent pool (armcontainerservice's fake servers over a
// model of AKS) drifts on its template's labels and then expires, 6 nodes,
// through the aks-agentpool provider and the AKS API only: each
// replacement is one raise of the agent pool's count, found by the pool's
// machine list, registered with the template over the labels AKS gives it,
// and each old node leaves by DeleteMachines after its drain. The agent
// pool ends with 6 machines, none of the first; the pool says that the
// template's labels are not the agent pool's (AKS keeps its own).
func TestAnAgentPoolDriftsAndExpiresThroughTheAKSAPI(t *testing.T) {
	s := baseScene(t)
	cloud := akstest.NewCloud(clock.RealClock{})
	ap := "p" + strings.ReplaceAll(strings.TrimPrefix(s.name, "pool-"), "-", "")
	ap = ap[:min(len(ap), 12)]
	cloud.AddPool(ap, rollSize, akstest.Pool{NodeLabels: s.selector, NodeInitializationTaints: []corev1.Taint{provider.Unregistered}})
	first := cloud.Machines(ap)
	s.agentPool(t, cloud, ap)
	before := s.waitNodes(t, rollSize, time.Minute)

	s.driftAndExpire(t, before, func(context.Context) (int, error) { return len(cloud.Machines(ap)), nil })
	for name := range cloud.Machines(ap) {
		if _, ok := first[name]; ok {
			t.Errorf("agent pool %s still holds its first machine %s after the drift and the expiry", ap, name)
		}
	}
	s.wantRegistration(t, metav1.ConditionFalse, pools.ReasonTemplateDiffers)
}

// agentPool makes the scene's pool of the AKS agent pool in cloud, made by
// the aks-agentpool provider, and plays the agent pool's kubelets until the
// test ends.
func (s *scene) agentPool(t *testing.T, cloud *akstest.Cloud, ap string) {
	t.Helper()
	claims := aksagentpool.NewConfigMapClaims(s.env.Client, s.env.Namespace)
	s.machines = provider.NewMachines(provider.Set{v1alpha1.ProviderAKS: aksagentpool.New(&azfake.TokenCredential{}, claims, clock.RealClock{},
		aksagentpool.Options{PollEvery: 50 * time.Millisecond, ListPools: provider.ClusterPoolList(s.env.Client), ClientOptions: &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: cloud.Transport()}}})},
		clock.RealClock{})
	ctx := s.cloudPool(t, v1alpha1.ProviderSpec{Name: v1alpha1.ProviderAKS, AKS: &v1alpha1.AKSProviderSpec{
		SubscriptionID: akstest.Subscription, ResourceGroup: akstest.ResourceGroup, Cluster: akstest.Cluster, AgentPool: ap}})
	go s.kubelet(ctx, t, "aks", func(ctx context.Context, reg map[string]bool) error { return s.registerAgentPool(ctx, cloud, ap, reg) })
}

// registerAgentPool plays the kubelets of the agent pool's machines: each
// machine AKS finished making registers a Node named after it, with the
// providerID cloud-provider-azure writes and the labels and taints AKS
// gives it (its own, the agent pool's nodeLabels, nodeTaints and
// initialization taints), never the NodePool's. kwok keeps it Ready.
func (s *scene) registerAgentPool(ctx context.Context, cloud *akstest.Cloud, ap string, registered map[string]bool) error {
	for name, state := range cloud.Machines(ap) {
		if registered[name] || state != "Succeeded" {
			continue
		}
		labels, taints, nodeName, providerID, ok := cloud.Kubelet(name)
		if !ok {
			continue // deleted meanwhile
		}
		n := fixture.AKSPool(s.name, 1, fixture.WithLabels(labels), fixture.WithTaints(taints...)).Nodes()[0]
		n.Name = nodeName
		n.Labels[corev1.LabelHostname] = nodeName
		n.Spec.ProviderID = providerID
		if _, err := s.env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering machine %s: %w", name, err)
		}
		registered[name] = true
	}
	return nil
}
