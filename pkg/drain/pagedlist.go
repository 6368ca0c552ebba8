package drain

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// listFunc and watchFunc list and watch one kind of object.
type (
	listFunc  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)
)

// pagedInformerFor registers with factory the informer of obj's kind, its
// lists paged by chunk: the factory's own typed informer and lister for the
// kind then use it.
func pagedInformerFor(factory informers.SharedInformerFactory, obj runtime.Object, chunk int64, list listFunc, watchFn watchFunc) {
	lw := &cache.ListWatch{ListWithContextFunc: cache.ListWithContextFunc(list), WatchFuncWithContext: cache.WatchFuncWithContext(watchFn)}
	factory.InformerFor(obj, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(pagedInformer(lw, chunk), obj, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	})
}

// pagedInformer returns the informer's ListerWatcher with its lists read in
// pages of chunk (--chunk-size), as kubectl's own lists are; chunk 0 leaves
// it as it is. The reflector asks for resourceVersion "0", which the API
// server answers from its watch cache in one piece whatever the limit, so a
// paged list asks for the latest instead: a consistent read, which it pages,
// and at least as fresh as the reflector wanted.
func pagedInformer(lw cache.ListerWatcher, chunk int64) cache.ListerWatcher {
	if chunk <= 0 {
		return lw
	}
	return pagedLists{inner: cache.ToListerWatcherWithContext(lw), chunk: chunk}
}

type pagedLists struct {
	inner cache.ListerWatcherWithContext
	chunk int64
}

var _ cache.ListerWatcherWithContext = pagedLists{}

func (p pagedLists) List(opts metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), opts)
}

func (p pagedLists) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return p.inner.WatchWithContext(context.Background(), opts)
}

func (p pagedLists) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return p.inner.WatchWithContext(ctx, opts)
}

// ListWithContext reads every page and answers with one list, as the
// reflector expects.
func (p pagedLists) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue != "" {
		return p.inner.ListWithContext(ctx, opts)
	}
	if opts.ResourceVersion == "0" {
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
	opts.Limit = p.chunk
	first, err := p.inner.ListWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(first)
	if err != nil {
		return nil, err
	}
	head, err := meta.ListAccessor(first)
	if err != nil {
		return nil, err
	}
	for next := head.GetContinue(); next != ""; {
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = next, "", ""
		page, err := p.inner.ListWithContext(ctx, opts)
		if err != nil {
			return nil, err
		}
		more, err := meta.ExtractList(page)
		if err != nil {
			return nil, err
		}
		items = append(items, more...)
		acc, err := meta.ListAccessor(page)
		if err != nil {
			return nil, fmt.Errorf("reading a page's continue token: %w", err)
		}
		next = acc.GetContinue()
	}
	head.SetContinue("")
	head.SetRemainingItemCount(nil)
	return first, meta.SetList(first, items)
}
