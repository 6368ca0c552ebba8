package gcpmig

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

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
	p, err := New(ctx, env.Clock, Options{Pools: ClusterPools(env.Client), ListPools: ClusterPoolList(env.Client),
		Log: env.Log.With("provider", v1alpha1.ProviderGCPMIG)})
	if err != nil {
		return nil, fmt.Errorf("starting gcp-mig (Application Default Credentials): %w", err)
	}
	return p, nil
}

// ClusterPools reads NodePools from the cluster, for the calls that are
// given only a pool's or a machine's name. It GETs the NodePool from the
// API server each time: a provider is given a clientset, not the
// controller's informer cache, and the NodePool type is not registered in
// the clientset's scheme, hence the raw REST call. The provider asks only
// for a pool it was not handed since it started, and keeps what it reads.
func ClusterPools(c kubernetes.Interface) Pools {
	return func(ctx context.Context, name string) (*v1alpha1.NodePool, error) {
		gv := v1alpha1.SchemeGroupVersion
		raw, err := c.Discovery().RESTClient().Get().AbsPath("/apis", gv.Group, gv.Version, v1alpha1.NodePoolResource.Resource, name).DoRaw(ctx)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var np v1alpha1.NodePool
		if err := json.Unmarshal(raw, &np); err != nil {
			return nil, fmt.Errorf("reading NodePool %s: %w", name, err)
		}
		return &np, nil
	}
}

// ClusterPoolList lists the cluster's NodePools, for the calls that must
// know every gcp-mig pool's groups (Get and Delete of a machine named by
// NameOf). It LISTs from the API server each time, for the reason
// ClusterPools gives; the provider uses a listing for poolListFor (10 s),
// so a Get per Node does not LIST per Node.
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
