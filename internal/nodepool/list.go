package nodepool

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// List returns every NodePool in the cluster. It reads them through a dynamic
// client, so callers need no typed clientset for sluice's own API.
func List(ctx context.Context, client dynamic.Interface) ([]v1alpha1.NodePool, error) {
	list, err := client.Resource(v1alpha1.NodePoolResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing node pools: %w", err)
	}
	pools := make([]v1alpha1.NodePool, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &pools[i]); err != nil {
			return nil, fmt.Errorf("decoding node pool %s: %w", list.Items[i].GetName(), err)
		}
	}
	return pools, nil
}
