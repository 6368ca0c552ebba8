package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

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

// PoolListTTL is how long Start's providers use a listing of the cluster's
// NodePools again (CachedPoolList). Get and Delete of a machine named by its
// providerID need every pool's groups or sets, and the controller asks a Get
// per Node; listing for each would LIST the NodePools once per Node. A pool
// listed up to this long ago is at worst a refusal the next try after it
// corrects, or a group whose pool was deleted moments ago still counted.
const PoolListTTL = 10 * time.Second

// CachedPoolList gives list's last answer again for up to ttl after it was
// made; an error is never kept.
func CachedPoolList(list PoolList, clk clock.PassiveClock, ttl time.Duration) PoolList {
	var (
		mu     sync.Mutex
		listed []v1alpha1.NodePool
		at     time.Time
	)
	return func(ctx context.Context) ([]v1alpha1.NodePool, error) {
		mu.Lock()
		if listed != nil && clk.Now().Before(at.Add(ttl)) {
			defer mu.Unlock()
			return listed, nil
		}
		mu.Unlock()
		pools, err := list(ctx)
		if err != nil {
			return nil, err
		}
		if pools == nil {
			pools = []v1alpha1.NodePool{}
		}
		mu.Lock()
		defer mu.Unlock()
		listed, at = pools, clk.Now()
		return pools, nil
	}
}
