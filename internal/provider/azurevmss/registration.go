package azurevmss

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"k8s.io/client-go/kubernetes"

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
		Options{ListPools: ClusterPoolList(env.Client), Log: env.Log.With("provider", v1alpha1.ProviderAzureVMSS)}), nil
}

// ClusterPoolList lists the cluster's NodePools, for Delete of a VM named
// by NameOf, whose scale set must be one a pool lists. It LISTs from the
// API server each time: a provider is given a clientset, not the
// controller's cache, and the NodePool type is not in the clientset's
// scheme, hence the raw REST call. Only such a Delete asks, once.
func ClusterPoolList(c kubernetes.Interface) PoolList {
	return func(ctx context.Context) ([]v1alpha1.NodePool, error) {
		gv := v1alpha1.SchemeGroupVersion
		raw, err := c.Discovery().RESTClient().Get().AbsPath("/apis", gv.Group, gv.Version, v1alpha1.NodePoolResource.Resource).DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		var list v1alpha1.NodePoolList
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("reading the NodePools: %w", err)
		}
		return list.Items, nil
	}
}
