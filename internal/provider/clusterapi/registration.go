package clusterapi

import (
	"context"
	"errors"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// ImagesUnsupported says why the provider cannot set a machine's image, and
// what to do instead.
const ImagesUnsupported = "a Cluster API machine's image is its MachineDeployment's to roll (its infrastructure template, bootstrap and version), " +
	"the same for every Machine it makes: sluice cannot choose one per machine. Change the MachineDeployment's template; " +
	"Cluster API rolls the change out, and sluice drains the rollout"

// Registration is the cluster-api provider as the registry lists it.
var Registration = provider.Registration{
	Name:   v1alpha1.ProviderClusterAPI,
	Images: provider.Images{Unsupported: ImagesUnsupported},
	Start:  start,
}

// start builds the provider on the controller's own cluster, where it looks
// for Cluster API's objects, and keeps its claims in the controller's
// namespace.
func start(_ context.Context, env provider.Env) (provider.Provider, error) {
	if env.Dynamic == nil {
		return nil, errors.New("the cluster-api provider needs a dynamic client (provider.Env.Dynamic)")
	}
	return New(env.Dynamic, NewConfigMapClaims(env.Client, env.Namespace), env.Clock,
		Options{ListPools: provider.CachedPoolList(provider.ClusterPoolList(env.Client), env.Clock, provider.PoolListTTL), Log: env.Log.With("provider", v1alpha1.ProviderClusterAPI)}), nil
}
