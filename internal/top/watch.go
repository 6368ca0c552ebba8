package top

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Watched says which resources a Watch keeps beside nodes and NodePools.
type Watched struct {
	// Pods: for drain progress and blocked pods.
	Pods bool
	// Events: sluice's Events, for what drains did and the last Events.
	Events bool
}

// maxKeptEvents bounds the Events a snapshot carries (the newest).
const maxKeptEvents = 500

// Watch keeps the cluster's nodes and NodePools (and, as asked, pods and
// sluice's Events) in informers' caches: one LIST and one WATCH per
// resource, and no other call. It notes what the watches cannot see
// (RBAC), and when the connection is lost and back.
type Watch struct {
	clk      clock.PassiveClock
	core     informers.SharedInformerFactory
	dyn      dynamicinformer.DynamicSharedInformerFactory
	informer map[string]cache.SharedIndexInformer
	changed  chan struct{}

	// link is the connection as the informers' requests find it.
	link *Link

	mu sync.Mutex
	// lostRV is each informer's resource version when the link was lost: a
	// new one says a watch listed again.
	lostRV map[string]string
	// hidden is, per resource, why it cannot be seen.
	hidden map[string]string
	// noPools: the NodePool CRD is not served.
	noPools bool
}

// Resource names, as the Watch reports them.
const (
	resNodes  = "nodes"
	resPools  = "nodepools"
	resPods   = "pods"
	resEvents = "events"
)

// consequence is what the screen loses when a resource cannot be seen.
var consequence = map[string]string{
	resNodes:  "no node can be shown",
	resPools:  "no pool can be shown",
	resPods:   "drain progress and blocked pods are hidden",
	resEvents: "drains' starts, blockers and the last Events are hidden",
}

// NewWatch prepares the informers; Start runs them. link is the link the
// clients' transport reports to (Link.Wrap); nil makes one that only the
// watches' errors move.
func NewWatch(kc kubernetes.Interface, dyn dynamic.Interface, clk clock.PassiveClock, what Watched, link *Link) *Watch {
	if link == nil {
		link = NewLink(clk)
	}
	strip := informers.WithTransform(stripManagedFields)
	w := &Watch{
		clk:      clk,
		core:     informers.NewSharedInformerFactoryWithOptions(kc, 0, strip),
		dyn:      dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "", nil),
		informer: map[string]cache.SharedIndexInformer{},
		changed:  make(chan struct{}, 1),
		hidden:   map[string]string{},
		link:     link,
	}
	link.notify(w.notify)
	w.informer[resNodes] = w.core.Core().V1().Nodes().Informer()
	w.informer[resPools] = w.dyn.ForResource(v1alpha1.NodePoolResource).Informer()
	if what.Pods {
		w.informer[resPods] = w.core.Core().V1().Pods().Informer()
	}
	if what.Events {
		w.informer[resEvents] = w.core.Core().V1().Events().Informer()
	}
	for name, inf := range w.informer {
		_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { w.watchError(name, err) })
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { w.delivered(name) },
			UpdateFunc: func(any, any) { w.delivered(name) },
			DeleteFunc: func(any) { w.delivered(name) },
		})
	}
	return w
}

// Start runs the informers until ctx ends.
func (w *Watch) Start(ctx context.Context) {
	w.core.Start(ctx.Done())
	w.dyn.Start(ctx.Done())
}

// WaitForSync waits until every informer has listed once, or has been
// refused (RBAC, no NodePool CRD); an API server it cannot reach before ctx
// ends is an error.
func (w *Watch) WaitForSync(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond) // reads local state only
	defer tick.Stop()
	for {
		if w.synced() {
			return nil
		}
		select {
		case <-ctx.Done():
			if _, lostErr := w.link.State(); lostErr != "" {
				return fmt.Errorf("reaching the API server: %s", lostErr)
			}
			return fmt.Errorf("waiting for the first list of nodes and NodePools: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

func (w *Watch) synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, inf := range w.informer {
		_, refused := w.hidden[name]
		if !inf.HasSynced() && !refused && (name != resPools || !w.noPools) {
			return false
		}
	}
	return true
}

// Changed receives when anything watched changed, or the connection was
// lost or is back; several changes may come as one.
func (w *Watch) Changed() <-chan struct{} { return w.changed }

func (w *Watch) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// delivered notes that a watch delivered an object: the connection is live,
// and the resource can be seen.
func (w *Watch) delivered(name string) {
	w.link.answered()
	w.mu.Lock()
	delete(w.hidden, name)
	if name == resPools {
		w.noPools = false
	}
	w.mu.Unlock()
	w.notify()
}

// watchError sorts a watch's error: RBAC refusing a resource, the NodePool
// CRD missing, a watch closed as watches are (not a loss), or the API
// server out of reach.
func (w *Watch) watchError(name string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), apierrors.IsResourceExpired(err), apierrors.IsGone(err):
		return // the reflector lists again; nothing is lost
	case apierrors.IsForbidden(err):
		w.hidden[name] = fmt.Sprintf("cannot list %s (forbidden by RBAC): %s", name, consequence[name])
	case name == resPools && (apierrors.IsNotFound(err) || meta.IsNoMatchError(err)):
		w.noPools = true
	default:
		go w.link.failed(err)
	}
	go w.notify()
}

// Snapshot copies what the caches hold now.
func (w *Watch) Snapshot() Snapshot {
	s := Snapshot{Now: w.clk.Now()}
	s.LostSince, s.LostError = w.link.State()
	w.mu.Lock()
	switch {
	case s.LostSince == nil:
		w.lostRV = nil
	case w.lostRV == nil:
		w.lostRV = map[string]string{}
		for n, inf := range w.informer {
			w.lostRV[n] = inf.LastSyncResourceVersion()
		}
	default:
		// A watch that listed again since the loss is back, even when no
		// object changed meanwhile (so none was delivered).
		for n, inf := range w.informer {
			if rv := inf.LastSyncResourceVersion(); rv != "" && rv != w.lostRV[n] {
				w.link.answered()
				s.LostSince, s.LostError, w.lostRV = nil, "", nil
				break
			}
		}
	}
	for _, name := range []string{resNodes, resPools, resPods, resEvents} {
		if h, ok := w.hidden[name]; ok {
			s.Hidden = append(s.Hidden, h)
		}
	}
	s.PoolsInstalled = !w.noPools
	_, podsHidden := w.hidden[resPods]
	w.mu.Unlock()

	for _, o := range w.informer[resNodes].GetStore().List() {
		s.Nodes = append(s.Nodes, *o.(*corev1.Node))
	}
	slices.SortFunc(s.Nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, o := range w.informer[resPools].GetStore().List() {
		var p v1alpha1.NodePool
		if u, ok := o.(*unstructured.Unstructured); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p) == nil {
			s.Pools = append(s.Pools, p)
		}
	}
	slices.SortFunc(s.Pools, func(a, b v1alpha1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	if inf, ok := w.informer[resPods]; ok && !podsHidden {
		s.Pods = []*corev1.Pod{}
		for _, o := range inf.GetStore().List() {
			s.Pods = append(s.Pods, o.(*corev1.Pod))
		}
	}
	if inf, ok := w.informer[resEvents]; ok {
		for _, o := range inf.GetStore().List() {
			if e := o.(*corev1.Event); bySluice(e) {
				s.Events = append(s.Events, e)
			}
		}
		slices.SortFunc(s.Events, func(a, b *corev1.Event) int { return eventTime(b).Compare(eventTime(a)) })
		if len(s.Events) > maxKeptEvents {
			s.Events = s.Events[:maxKeptEvents]
		}
	}
	return s
}

// bySluice says whether sluice wrote the Event: its drains, controller and
// agents sign them sluice-*.
func bySluice(e *corev1.Event) bool {
	return strings.HasPrefix(e.Source.Component, "sluice") || strings.HasPrefix(e.ReportingController, contract.Prefix)
}

// stripManagedFields keeps the caches small: nothing here reads them.
func stripManagedFields(o any) (any, error) {
	if m, err := meta.Accessor(o); err == nil {
		m.SetManagedFields(nil)
	}
	return o, nil
}
