package aksagentpool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"k8s.io/client-go/kubernetes"

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
		Options{ListPools: ClusterPoolList(env.Client), Log: env.Log.With("provider", v1alpha1.ProviderAKS)}), nil
}

// ClusterPoolList lists the cluster's NodePools, for Get and Delete of a
// machine no claim holds (Options.ListPools).
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
