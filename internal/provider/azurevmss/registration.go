package azurevmss

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Registration is the azure-vmss provider as the registry lists it.
var Registration = provider.Registration{
	Name: v1alpha1.ProviderAzureVMSS,
	// The template's image is the model's imageReference before each
	// scale-out, in one of the forms CheckImage takes.
	Images: provider.Images{Check: CheckImage},
	Start:  start,
}

// start builds the provider on azidentity's default chain: workload identity
// in a cluster (AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE,
// set by the webhook), the environment or the Azure CLI outside one. The
// subscription is each pool's. No credential is ever logged.
func start(_ context.Context, env provider.Env) (provider.Provider, error) {
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("loading the Azure credentials: %w", err)
	}
	return New(cred, NewConfigMapClaims(env.Client, env.Namespace), env.Clock,
		Options{ListPools: provider.CachedPoolList(provider.ClusterPoolList(env.Client), env.Clock, provider.PoolListTTL), Log: env.Log.With("provider", v1alpha1.ProviderAzureVMSS)}), nil
}
