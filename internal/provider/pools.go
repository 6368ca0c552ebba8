package provider

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// PoolGetter reads a NodePool by name; nil, nil when there is none.
type PoolGetter func(ctx context.Context, name string) (*v1alpha1.NodePool, error)

// PoolList lists the cluster's NodePools.
type PoolList func(ctx context.Context) ([]v1alpha1.NodePool, error)

// The cloud providers are given only a machine's name by Get and Delete.
// Where the name cannot say which of the cloud's groups or sets the machine
// is in (a Node the cloud made before sluice, named by its providerID), a
// provider reads the NodePools to learn them, and deletes only in a group
// or set some pool of its names. They read from the API server each time: a
// provider is given a clientset, not the controller's informer cache, and
// NodePool is not in the clientset's scheme, hence the raw REST calls.

// ClusterPool reads a NodePool from the cluster.
func ClusterPool(c kubernetes.Interface) PoolGetter {
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

// ClusterPoolList lists the cluster's NodePools.
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
