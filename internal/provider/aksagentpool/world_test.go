package aksagentpool_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider/aksagentpool"
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool/akstest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// world is a cluster, the claims' ConfigMap, and a way to make providers
// over both (a new provider is a restarted controller).
type world struct {
	cloud  *akstest.Cloud
	kube   *k8sfake.Clientset
	claims *aksagentpool.ConfigMapClaims
}

func newWorld() *world {
	kube := k8sfake.NewClientset()
	return &world{cloud: akstest.NewCloud(clock.RealClock{}), kube: kube, claims: aksagentpool.NewConfigMapClaims(kube, "sluice-system")}
}

func (w *world) provider(retries int32) *aksagentpool.Provider {
	return aksagentpool.New(&azfake.TokenCredential{}, w.claims, clock.RealClock{}, aksagentpool.Options{
		PollEvery: 10 * time.Millisecond,
		ListPools: func(context.Context) ([]v1alpha1.NodePool, error) {
			return []v1alpha1.NodePool{*pool("web", "web")}, nil
		},
		ClientOptions: &arm.ClientOptions{ClientOptions: policy.ClientOptions{
			Transport: w.cloud.Transport(),
			Retry:     policy.RetryOptions{MaxRetries: retries, RetryDelay: 10 * time.Millisecond},
		}},
	})
}

func pool(name, agentPool string) *v1alpha1.NodePool {
	return &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodePoolSpec{
		Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderAKS, AKS: &v1alpha1.AKSProviderSpec{
			SubscriptionID: akstest.Subscription, ResourceGroup: akstest.ResourceGroup, Cluster: akstest.Cluster, AgentPool: agentPool}},
	}}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
