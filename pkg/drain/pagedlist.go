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
// it as it is.
func pagedInformer(lw cache.ListerWatcher, chunk int64) cache.ListerWatcher {
	if chunk <= 0 {
		return lw
	}
	return PagedLists{Inner: cache.ToListerWatcherWithContext(lw), Chunk: chunk}
}

// PagedLists is an informer's ListerWatcher whose lists are read in pages of
// Chunk and answered as one list, as the reflector expects; it watches as it
// is told. The reflector asks for resourceVersion "0", which the API server
// answers from its watch cache in one piece whatever the limit, so a paged
// list asks for the latest instead: a consistent read, which the API server
// pages, and at least as fresh as the reflector wanted. A relist at a known
// version is passed through whole: paged, it would go to etcd.
type PagedLists struct {
	Inner cache.ListerWatcherWithContext
	Chunk int64
	// Transform, when set, replaces each item as its page arrives (with a
	// copy holding only what the caller reads), so a page's full objects are
	// released before the next page is read.
	Transform func(runtime.Object) runtime.Object
}

var _ cache.ListerWatcherWithContext = PagedLists{}

// List is ListWithContext without a context.
func (p PagedLists) List(opts metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), opts)
}

// Watch is WatchWithContext without a context.
func (p PagedLists) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return p.Inner.WatchWithContext(context.Background(), opts)
}

// WatchWithContext watches as the inner ListerWatcher does.
func (p PagedLists) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return p.Inner.WatchWithContext(ctx, opts)
}

// ListWithContext reads every page from one snapshot and answers with one
// list, without a continue token.
func (p PagedLists) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue != "" {
		// The reflector's own pager never gets here: each answer has no
		// continue token.
		return p.Inner.ListWithContext(ctx, opts)
	}
	if opts.ResourceVersion == "0" {
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
	if opts.ResourceVersion == "" || opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact {
		opts.Limit = p.Chunk
	}
	var (
		all   runtime.Object
		items []runtime.Object
	)
	for {
		page, err := p.Inner.ListWithContext(ctx, opts)
		if err != nil {
			return nil, err
		}
		more, err := meta.ExtractList(page)
		if err != nil {
			return nil, err
		}
		for _, item := range more {
			if p.Transform != nil {
				item = p.Transform(item)
			}
			items = append(items, item)
		}
		head, err := meta.ListAccessor(page)
		if err != nil {
			return nil, fmt.Errorf("reading a page's continue token: %w", err)
		}
		next := head.GetContinue()
		if all == nil {
			// The first page's list metadata (its resourceVersion) is the
			// answer's; its items are dropped now and set from items at the end.
			all = page
			head.SetContinue("")
			head.SetRemainingItemCount(nil)
			if err := meta.SetList(all, nil); err != nil {
				return nil, err
			}
		}
		if next == "" {
			return all, meta.SetList(all, items)
		}
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = next, "", ""
	}
}
