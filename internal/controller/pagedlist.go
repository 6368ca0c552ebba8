package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/pkg/drain"
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
		lw = pagedPods(toolscache.ToListerWatcherWithContext(lw))
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}

// pagedPods lists pods page by page, stripped; it watches as it is told.
func pagedPods(inner toolscache.ListerWatcherWithContext) drain.PagedLists {
	return drain.PagedLists{Inner: inner, Chunk: podPageSize, Transform: func(obj runtime.Object) runtime.Object {
		slim, _ := stripPod(obj)
		return slim.(runtime.Object)
	}}
}
