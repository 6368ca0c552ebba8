package aksagentpool

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// ImagesUnsupported says why the provider cannot set a machine's image, and
// what to do instead.
const ImagesUnsupported = "an AKS agent pool's node image is AKS's (its nodeImageVersion), the same for every machine AKS makes: " +
	"sluice cannot choose one per machine. Upgrade the pool's image with AKS, which surges and drains by its own rules: " +
	"az aks nodepool upgrade --node-image-only --resource-group <group> --cluster-name <cluster> --name <agent pool> (AgentPools_UpgradeNodeImageVersion)"

// Registration is the aks-agentpool provider as the registry lists it.
var Registration = provider.Registration{
	Name:   v1alpha1.ProviderAKS,
	Images: provider.Images{Unsupported: ImagesUnsupported},
	Start:  start,
}

// start builds the provider on azidentity's default chain: workload identity
// in a cluster, the environment or the Azure CLI outside one. The
// subscription is each pool's. No credential is ever logged.
func start(_ context.Context, env provider.Env) (provider.Provider, error) {
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("loading the Azure credentials: %w", err)
	}
	return New(cred, NewConfigMapClaims(env.Client, env.Namespace), env.Clock,
		Options{ListPools: provider.CachedPoolList(provider.ClusterPoolList(env.Client), env.Clock, provider.PoolListTTL), Log: env.Log.With("provider", v1alpha1.ProviderAKS)}), nil
}
