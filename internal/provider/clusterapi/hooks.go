package clusterapi

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// ReleaseHooks removes sluice's pre-drain hook from every Machine that
// carries it, so that Cluster API drains and deletes them as it does without
// sluice: `sluice uninstall` (the chart's pre-delete hook) calls it, and so
// does a controller started without the cluster-api provider. A Machine
// Cluster API is deleting goes on at once, drained by Cluster API. It returns
// the Machines released (namespace/name); a cluster that does not serve
// Machines has none. A Machine it cannot patch does not stop it: the error
// names each. With dryRun it only lists them.
func ReleaseHooks(ctx context.Context, dyn dynamic.Interface, dryRun bool) ([]string, error) {
	list, err := dyn.Resource(Machines).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing Cluster API Machines: %w; grant list and patch on machines.cluster.x-k8s.io "+
			"(the chart does), or remove the annotation %s from the Machines that have it", err, AnnotationPreDrainHook)
	}
	if err != nil {
		return nil, fmt.Errorf("listing Cluster API Machines: %w", err)
	}
	var released []string
	var errs []error
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, AnnotationPreDrainHook)
	for _, m := range list.Items {
		if _, ok := m.GetAnnotations()[AnnotationPreDrainHook]; !ok {
			continue
		}
		name := m.GetNamespace() + "/" + m.GetName()
		if !dryRun {
			_, err := dyn.Resource(Machines).Namespace(m.GetNamespace()).Patch(ctx, m.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "sluice"})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("removing sluice's pre-drain hook from Machine %s: %w", name, err))
				continue
			}
		}
		released = append(released, name)
	}
	return released, errors.Join(errs...)
}
