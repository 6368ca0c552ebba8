package gcpmig

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Registration is the gcp-mig provider as the registry lists it. It needs
// no claims: an instance is created by the name sluice chose, so asking
// again finds it.
var Registration = provider.Registration{
	Name: v1alpha1.ProviderGCPMIG,
	// A pool's image becomes the group's instance template's boot image
	// before a create that needs it, in one of the forms CheckImage takes.
	Images: provider.Images{Check: CheckImage},
	Start:  start,
}

// start builds the provider on Application Default Credentials: Workload
// Identity (or the node's service account) in a cluster,
// GOOGLE_APPLICATION_CREDENTIALS or gcloud's outside one. The project is
// each pool's. No credential is ever logged.
func start(ctx context.Context, env provider.Env) (provider.Provider, error) {
	p, err := New(ctx, env.Clock, Options{Pools: provider.ClusterPool(env.Client), ListPools: provider.CachedPoolList(provider.ClusterPoolList(env.Client), env.Clock, provider.PoolListTTL),
		Log: env.Log.With("provider", v1alpha1.ProviderGCPMIG)})
	if err != nil {
		return nil, fmt.Errorf("starting gcp-mig (Application Default Credentials): %w", err)
	}
	return p, nil
}
