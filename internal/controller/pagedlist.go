package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// podPageSize is how many pods one page of the cache's list holds: at
// 30,000 pods the whole list decoded at once was most of the controller's
// peak memory, a page of 500 is a few megabytes.
const podPageSize = 500

// newInformer is the cache's informer constructor with one change: pods
// are listed a page at a time and each page is stripped before the next is
// read, so the untrimmed pods of the whole cluster are never in memory
// together. The reflector would otherwise hold the full decoded list (the
// API server ignores a page size when it answers resourceVersion "0" from
// its watch cache) and a copy of it while the transform runs item by item.
func newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if _, ok := obj.(*corev1.Pod); ok {
		lw = pagedPods{toolscache.ToListerWatcherWithContext(lw)}
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}

// pagedPods lists pods page by page, stripped; it watches as it is told.
type pagedPods struct {
	inner toolscache.ListerWatcherWithContext
}

var _ toolscache.ListerWatcherWithContext = pagedPods{}

func (p pagedPods) List(opts metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), opts)
}

func (p pagedPods) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return p.inner.WatchWithContext(context.Background(), opts)
}

func (p pagedPods) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return p.inner.WatchWithContext(ctx, opts)
}

// ListWithContext answers the reflector's list with every pod, read in
// pages from one snapshot. A request for resourceVersion "0" (any version)
// becomes a consistent read, which the API server pages; the result is at
// least as fresh as the reflector asked for, which is all it requires.
func (p pagedPods) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue != "" {
		// The reflector's own pager never gets here: each answer below has
		// no continue token.
		return p.inner.ListWithContext(ctx, opts)
	}
	if opts.ResourceVersion == "0" {
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
	if opts.ResourceVersion == "" || opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact {
		opts.Limit = podPageSize
	}
	all := &corev1.PodList{}
	for page := 0; ; page++ {
		obj, err := p.inner.ListWithContext(ctx, opts)
		if err != nil {
			return nil, err
		}
		list, ok := obj.(*corev1.PodList)
		if !ok {
			return nil, fmt.Errorf("listing pods: got a %T", obj)
		}
		if page == 0 {
			all.ListMeta = list.ListMeta
		}
		for i := range list.Items {
			slim, _ := stripPod(&list.Items[i])
			all.Items = append(all.Items, *slim.(*corev1.Pod))
		}
		if list.Continue == "" {
			all.Continue, all.RemainingItemCount = "", nil
			return all, nil
		}
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = list.Continue, "", ""
	}
}
