package nodepool_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sluice-dev/sluice/internal/controller/deletion"
	"github.com/sluice-dev/sluice/internal/controller/registration"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// staleNodes is a cache that lags: it answers a node's read with the copy
// it held before the node last changed, as an informer does behind a busy
// API server.
type staleNodes struct {
	client.Client
	held map[string]*corev1.Node
	// changed is the value of the label the change meanwhile wrote.
	changed string
}

func (s staleNodes) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if n, ok := s.held[key.Name]; ok {
		if out, isNode := obj.(*corev1.Node); isNode {
			*out = *n.DeepCopy()
			return nil
		}
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// List answers a list by one of the cache's own field indexes (the
// registration controller's index of replacements) with nothing: no node
// of these tests carries a record, so the index is empty.
func (s staleNodes) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var o client.ListOptions
	o.ApplyOptions(opts)
	if _, isNodes := list.(*corev1.NodeList); isNodes && o.FieldSelector != nil && !o.FieldSelector.Empty() {
		return nil
	}
	return s.Client.List(ctx, list, opts...)
}

// lagBehind reads the node now, then changes it (a label, as a kubelet's
// heartbeat or another controller would change it), and returns a client
// whose reads of that node answer with the copy from before the change.
func lagBehind(t *testing.T, kube client.Client, name string) staleNodes {
	t.Helper()
	ctx := t.Context()
	held := &corev1.Node{}
	if err := kube.Get(ctx, types.NamespacedName{Name: name}, held); err != nil {
		t.Fatal(err)
	}
	// A kubelet changes a node as it joins: the held copy may be stale
	// already, and the change retried on a fresh read.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed := &corev1.Node{}
		if err := kube.Get(ctx, types.NamespacedName{Name: name}, changed); err != nil {
			return err
		}
		changed.Labels["example.com/changed-meanwhile"] = held.ResourceVersion
		return kube.Update(ctx, changed)
	}); err != nil {
		t.Fatal(err)
	}
	return staleNodes{Client: kube, held: map[string]*corev1.Node{name: held}, changed: held.ResourceVersion}
}

// TestAStaleCacheDoesNotStallTheFinalizer: the deletion controller sets its
// finalizer from a cached copy the API server has moved past. The server
// refuses the write (409), and the controller reads the node live and writes
// again, keeping the change it did not know of, rather than hand the node to
// the workqueue's backoff. At 1,000 nodes this conflict came thousands of
// times in a drift. Without the live read (Options.Live nil) the conflict
// reaches the caller: that half shows the test makes a real one.
func TestAStaleCacheDoesNotStallTheFinalizer(t *testing.T) {
	s := newScene(t, 1, nil)
	name := s.waitNodes(t, 1, time.Minute)[0]
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}

	without := deletion.NewController(lagBehind(t, s.kube, name), clock.RealClock{}, nil, s.machines, deletion.Options{})
	if _, err := without.Reconcile(t.Context(), req); !apierrors.IsConflict(err) {
		t.Fatalf("from a stale copy without live reads: %v, want the API server's conflict", err)
	}

	lag := lagBehind(t, s.kube, name)
	with := deletion.NewController(lag, clock.RealClock{}, nil, s.machines, deletion.Options{Live: s.kube})
	if _, err := with.Reconcile(t.Context(), req); err != nil {
		t.Fatalf("from a stale copy with live reads: %v", err)
	}
	n := &corev1.Node{}
	if err := s.kube.Get(t.Context(), req.NamespacedName, n); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(n.Finalizers, contract.FinalizerTermination) {
		t.Errorf("finalizers %v, want %s", n.Finalizers, contract.FinalizerTermination)
	}
	if n.Labels["example.com/changed-meanwhile"] != lag.changed {
		t.Errorf("labels %v: the change made meanwhile was lost", n.Labels)
	}
}

// TestAStaleCacheDoesNotStallRegistration: the same for a new node's
// registration, whose kubelet changes the node every few seconds as it
// joins; the template is applied again to the node as read live.
func TestAStaleCacheDoesNotStallRegistration(t *testing.T) {
	s := newScene(t, 0, nil)
	name := newMachine(t, s)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}

	without := registration.New(lagBehind(t, s.kube, name), clock.RealClock{}, s.machines, registration.Options{})
	if _, err := without.Reconcile(t.Context(), req); !apierrors.IsConflict(err) {
		t.Fatalf("from a stale copy without live reads: %v, want the API server's conflict", err)
	}

	lag := lagBehind(t, s.kube, name)
	with := registration.New(lag, clock.RealClock{}, s.machines, registration.Options{Live: s.kube})
	if _, err := with.Reconcile(t.Context(), req); err != nil {
		t.Fatalf("from a stale copy with live reads: %v", err)
	}
	n := &corev1.Node{}
	if err := s.kube.Get(t.Context(), req.NamespacedName, n); err != nil {
		t.Fatal(err)
	}
	if _, registered := provider.Registered(n); !registered || provider.Tainted(n) {
		t.Errorf("node registered %v, tainted %v: want registered and untainted", registered, provider.Tainted(n))
	}
	if n.Labels["example.com/changed-meanwhile"] != lag.changed {
		t.Errorf("labels %v: the change made meanwhile was lost", n.Labels)
	}
}

// newMachine asks the scene's provider for a machine and returns its Node's
// name once it has joined: unregistered, and without the finalizer, as no
// controller runs.
func newMachine(t *testing.T, s *scene) string {
	t.Helper()
	m, err := s.machines.CreateMachine(t.Context(), s.pool(t), "")
	if err != nil {
		t.Fatal(err)
	}
	s.env.WaitFor(t, time.Minute, "the new machine's node", func(ctx context.Context) (bool, error) {
		err := s.kube.Get(ctx, types.NamespacedName{Name: m.NodeName}, &corev1.Node{})
		return err == nil, client.IgnoreNotFound(err)
	})
	return m.NodeName
}
