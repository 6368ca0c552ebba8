package clusterapi_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// These tests hold the provider's own bookkeeping: what it refuses before it
// changes anything, the mark it takes off again, the claim it resumes. The
// fake dynamic client stands in for the API server's storage only; its
// scale subresource (below) does what the API server's does for a CRD
// (spec.replicas at the resourceVersion given, a conflict otherwise).
// What Cluster API then does with the replicas is test/capi's to show,
// against Cluster API's own controllers.

const ns = "fleet"

type world struct {
	dyn    *dynamicfake.FakeDynamicClient
	claims *clusterapi.ConfigMapClaims
	p      *clusterapi.Provider

	mu        sync.Mutex
	rv        int
	scaleErrs []error // the next scale updates' answers, instead of carrying them out
}

// newWorld is Cluster c1 with MachineDeployment md-0 of n replicas, its
// MachineSet md-0-a and its n Machines md-0-a-<i>, each with a Node.
func newWorld(t *testing.T, n int) *world {
	t.Helper()
	objs := []runtime.Object{
		obj("Cluster", "c1", nil),
		obj("MachineDeployment", "md-0", map[string]any{"spec": map[string]any{"clusterName": "c1", "replicas": int64(n)}}),
		machineSet("md-0-a", n),
	}
	for i := 1; i <= n; i++ {
		objs = append(objs, machineOf("md-0-a", fmt.Sprintf("md-0-a-%d", i), time.Duration(i)*time.Minute))
	}
	listKinds := map[schema.GroupVersionResource]string{
		clusterapi.Clusters: "ClusterList", clusterapi.Machines: "MachineList",
		clusterapi.MachineSets: "MachineSetList", clusterapi.MachineDeployments: "MachineDeploymentList",
	}
	w := &world{dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...), rv: 100}
	w.dyn.PrependReactor("update", "*", w.scale)
	w.claims = clusterapi.NewConfigMapClaims(k8sfake.NewClientset(), "sluice-system")
	w.p = clusterapi.New(w.dyn, w.claims, clock.RealClock{}, clusterapi.Options{
		SettleWithin: -1, // one look for the new Machine: no controller makes it here
		ListPools: func(context.Context) ([]v1alpha1.NodePool, error) {
			return []v1alpha1.NodePool{*pool()}, nil
		},
	})
	return w
}

func pool() *v1alpha1.NodePool {
	return &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.NodePoolSpec{Provider: v1alpha1.ProviderSpec{
		Name: v1alpha1.ProviderClusterAPI, ClusterAPI: &v1alpha1.ClusterAPIProviderSpec{Namespace: ns, MachineDeployment: "md-0"}}}}
}

func obj(kind, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": clusterapi.Group + "/" + clusterapi.Version, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": "1"}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

func owner(kind, name string) map[string]any {
	return map[string]any{"apiVersion": clusterapi.Group + "/" + clusterapi.Version, "kind": kind, "name": name, "uid": name, "controller": true}
}

func machineSet(name string, replicas int) *unstructured.Unstructured {
	u := obj("MachineSet", name, map[string]any{"spec": map[string]any{"clusterName": "c1", "replicas": int64(replicas)}})
	u.SetLabels(map[string]string{clusterapi.LabelDeploymentName: "md-0"})
	_ = unstructured.SetNestedSlice(u.Object, []any{owner("MachineDeployment", "md-0")}, "metadata", "ownerReferences")
	return u
}

func machineOf(set, name string, age time.Duration) *unstructured.Unstructured {
	u := obj("Machine", name, map[string]any{
		"spec":   map[string]any{"clusterName": "c1", "providerID": "kwok://" + name, "failureDomain": "zone-a"},
		"status": map[string]any{"nodeRef": map[string]any{"name": name}, "phase": "Running"},
	})
	u.SetLabels(map[string]string{clusterapi.LabelDeploymentName: "md-0"})
	u.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC).Add(age)))
	_ = unstructured.SetNestedSlice(u.Object, []any{owner("MachineSet", set)}, "metadata", "ownerReferences")
	return u
}

// scale is the scale subresource of a MachineDeployment or MachineSet.
func (w *world) scale(a clienttesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "scale" {
		return false, nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.scaleErrs) > 0 {
		err := w.scaleErrs[0]
		w.scaleErrs = w.scaleErrs[1:]
		return true, nil, err
	}
	s := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured)
	gvr := a.GetResource()
	cur, err := w.dyn.Tracker().Get(gvr, s.GetNamespace(), s.GetName())
	if err != nil {
		return true, nil, err
	}
	target := cur.(*unstructured.Unstructured).DeepCopy()
	if target.GetResourceVersion() != s.GetResourceVersion() {
		return true, nil, apierrors.NewConflict(gvr.GroupResource(), s.GetName(), errors.New("the object has been modified"))
	}
	replicas, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas")
	_ = unstructured.SetNestedField(target.Object, replicas, "spec", "replicas")
	w.rv++
	target.SetResourceVersion(strconv.Itoa(w.rv))
	return true, s, w.dyn.Tracker().Update(gvr, target, s.GetNamespace())
}

func (w *world) get(t *testing.T, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := w.dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (w *world) replicas(t *testing.T) int64 {
	t.Helper()
	r, _, _ := unstructured.NestedInt64(w.get(t, clusterapi.MachineDeployments, "md-0").Object, "spec", "replicas")
	return r
}

func (w *world) mark(t *testing.T, machine string) (string, bool) {
	t.Helper()
	v, ok := w.get(t, clusterapi.Machines, machine).GetAnnotations()[clusterapi.AnnotationDeleteMachine]
	return v, ok
}

// edit changes an object in storage, as a person or Cluster API would.
func (w *world) edit(t *testing.T, gvr schema.GroupVersionResource, name string, f func(u *unstructured.Unstructured)) {
	t.Helper()
	u := w.get(t, gvr, name)
	f(u)
	if err := w.dyn.Tracker().Update(gvr, u, ns); err != nil {
		t.Fatal(err)
	}
}

func (w *world) add(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		if err := w.dyn.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
}

func refusedWith(t *testing.T, what string, err error, code string, retryable bool) {
	t.Helper()
	e, ok := provider.AsError(err)
	if !ok || e.Code != code || e.Retryable != retryable {
		t.Errorf("%s: %v; want a provider.Error %s, retryable %v", what, err, code, retryable)
	}
}

func annotate(key, value string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[key] = value
		u.SetAnnotations(a)
	}
}

// Create refuses a target whose replicas something else writes, or whose
// Cluster is paused, before it writes a claim or replicas.
func TestCreateRefusesWhatItMayNotScale(t *testing.T) {
	for _, tc := range []struct {
		name      string
		edit      func(w *world, t *testing.T)
		code      string
		retryable bool
	}{
		{"cluster-autoscaler's annotations", func(w *world, t *testing.T) {
			w.edit(t, clusterapi.MachineDeployments, "md-0", annotate(clusterapi.AnnotationAutoscalerMax, "5"))
		}, clusterapi.CodeAutoscalerEnabled, false},
		{"a ClusterClass topology", func(w *world, t *testing.T) {
			w.edit(t, clusterapi.MachineDeployments, "md-0", func(u *unstructured.Unstructured) {
				u.SetLabels(map[string]string{clusterapi.LabelTopologyOwned: ""})
			})
		}, clusterapi.CodeTopologyOwned, false},
		{"a paused Cluster", func(w *world, t *testing.T) {
			w.edit(t, clusterapi.Clusters, "c1", func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, true, "spec", "paused") })
		}, clusterapi.CodeClusterPaused, true},
		{"a paused MachineDeployment", func(w *world, t *testing.T) {
			w.edit(t, clusterapi.MachineDeployments, "md-0", annotate(clusterapi.AnnotationPaused, ""))
		}, clusterapi.CodeClusterPaused, true},
		{"replicas no claim explains", func(w *world, t *testing.T) {
			w.edit(t, clusterapi.MachineDeployments, "md-0", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
			})
		}, clusterapi.CodeCapacityChangedElsewhere, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 2)
			tc.edit(w, t)
			before := w.replicas(t)
			_, err := w.p.Create(context.Background(), pool(), "web-aaaaa")
			refusedWith(t, "Create", err, tc.code, tc.retryable)
			if r := w.replicas(t); r != before {
				t.Errorf("replicas %d after the refusal; want %d, as before", r, before)
			}
			if c, err := w.claims.Get(context.Background(), "web-aaaaa"); c != nil || err != nil {
				t.Errorf("claim after the refusal: %+v, %v; want none", c, err)
			}
		})
	}
}

// Delete is refused where Cluster API would remove another Machine than the
// one asked for, and then marks nothing and lowers nothing.
func TestDeleteRefusedWhereClusterAPIWouldTakeAnother(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(w *world, t *testing.T)
		code string
	}{
		{"a rollout", func(w *world, t *testing.T) {
			w.add(t, machineSet("md-0-b", 1), machineOf("md-0-b", "md-0-b-1", time.Hour))
		}, clusterapi.CodeRolloutInProgress},
		{"a Machine of the set deleting", func(w *world, t *testing.T) {
			w.edit(t, clusterapi.Machines, "md-0-a-2", func(u *unstructured.Unstructured) {
				now := metav1.Now()
				u.SetDeletionTimestamp(&now)
				u.SetFinalizers([]string{"machine.cluster.x-k8s.io"})
			})
		}, clusterapi.CodeDeletionInProgress},
		{"a person's mark on another Machine", func(w *world, t *testing.T) {
			w.edit(t, clusterapi.Machines, "md-0-a-2", annotate(clusterapi.AnnotationDeleteMachine, "yes"))
		}, clusterapi.CodeAnotherMachineMarked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3)
			tc.edit(w, t)
			err := w.p.Delete(context.Background(), clusterapi.MachineName(ns, "md-0-a-1"))
			refusedWith(t, "Delete", err, tc.code, true)
			if r := w.replicas(t); r != 3 {
				t.Errorf("replicas %d after the refusal; want 3", r)
			}
			if v, ok := w.mark(t, "md-0-a-1"); ok {
				t.Errorf("Machine md-0-a-1 marked %q after the refusal; want no mark", v)
			}
		})
	}
}

func conflict() error {
	return apierrors.NewConflict(clusterapi.MachineDeployments.GroupResource(), "md-0", errors.New("the object has been modified"))
}

// A decrement the API server refuses takes the mark off again: the next
// scale-down (Cluster API's, a person's) must not remove that Machine.
func TestDeleteRollsBackItsMark(t *testing.T) {
	w := newWorld(t, 2)
	w.scaleErrs = []error{conflict(), conflict(), conflict()}
	err := w.p.Delete(context.Background(), clusterapi.MachineName(ns, "md-0-a-1"))
	refusedWith(t, "Delete with the decrement refused", err, clusterapi.CodeConflict, true)
	if v, ok := w.mark(t, "md-0-a-1"); ok {
		t.Errorf("Machine md-0-a-1 still marked %q after a refused decrement; want the mark taken off", v)
	}
	if r := w.replicas(t); r != 2 {
		t.Errorf("replicas %d; want 2", r)
	}
}

// A conflict with a write that left the replicas as they were (Cluster
// API's status) is tried again at the new resourceVersion.
func TestDeleteTriesAgainAfterAConflict(t *testing.T) {
	w := newWorld(t, 2)
	w.scaleErrs = []error{conflict()}
	if err := w.p.Delete(context.Background(), clusterapi.MachineName(ns, "md-0-a-1")); err != nil {
		t.Fatal(err)
	}
	if r := w.replicas(t); r != 1 {
		t.Errorf("replicas %d; want 1", r)
	}
	if v, _ := w.mark(t, "md-0-a-1"); v != "sluice:2" {
		t.Errorf("md-0-a-1 marked %q; want sluice:2", v)
	}
}

// A decrement whose answer was lost may have been carried out: the mark
// stays, and Delete asked again lowers the replicas once, whichever way it
// went.
func TestDeleteAfterALostAnswer(t *testing.T) {
	w := newWorld(t, 2)
	w.scaleErrs = []error{errors.New("read tcp: connection reset by peer")}
	name := clusterapi.MachineName(ns, "md-0-a-1")
	if err := w.p.Delete(context.Background(), name); err == nil {
		t.Fatal("Delete with its decrement's answer lost = nil; want the error")
	}
	if v, _ := w.mark(t, "md-0-a-1"); v != "sluice:2" {
		t.Errorf("mark after a lost answer = %q; want sluice:2 kept (the decrement may have happened)", v)
	}
	for i := range 2 {
		if err := w.p.Delete(context.Background(), name); err != nil {
			t.Fatalf("Delete %d: %v", i+2, err)
		}
		if r := w.replicas(t); r != 1 {
			t.Errorf("replicas after Delete %d = %d; want 1: lowered once", i+2, r)
		}
	}
	if v, _ := w.mark(t, "md-0-a-1"); v != "sluice:2" {
		t.Errorf("mark = %q; want sluice:2", v)
	}
}

// A mark sluice left on another Machine whose decrement never happened
// (replicas still what the mark says) is taken off, so that the next
// scale-down does not take that Machine.
func TestDeleteTakesOffAStrayMark(t *testing.T) {
	w := newWorld(t, 3)
	w.edit(t, clusterapi.Machines, "md-0-a-2", annotate(clusterapi.AnnotationDeleteMachine, "sluice:3"))
	if err := w.p.Delete(context.Background(), clusterapi.MachineName(ns, "md-0-a-1")); err != nil {
		t.Fatal(err)
	}
	if v, ok := w.mark(t, "md-0-a-2"); ok {
		t.Errorf("stray mark %q on md-0-a-2 kept; want it taken off", v)
	}
	if v, _ := w.mark(t, "md-0-a-1"); v != "sluice:3" {
		t.Errorf("md-0-a-1 marked %q; want sluice:3", v)
	}
	if r := w.replicas(t); r != 2 {
		t.Errorf("replicas %d; want 2", r)
	}
}

// A mark whose decrement did happen (replicas one below it) is Cluster
// API's to act on: another Delete lowers the replicas once more and leaves
// it, so that both Machines go.
func TestDeleteKeepsAMarkClusterAPIHasYetToActOn(t *testing.T) {
	w := newWorld(t, 3)
	w.edit(t, clusterapi.Machines, "md-0-a-2", annotate(clusterapi.AnnotationDeleteMachine, "sluice:4"))
	if err := w.p.Delete(context.Background(), clusterapi.MachineName(ns, "md-0-a-1")); err != nil {
		t.Fatal(err)
	}
	if v, _ := w.mark(t, "md-0-a-2"); v != "sluice:4" {
		t.Errorf("md-0-a-2 marked %q; want sluice:4 kept", v)
	}
	if r := w.replicas(t); r != 2 {
		t.Errorf("replicas %d; want 2", r)
	}
}

// A controller that crashed after raising replicas finds its claim: the
// replicas are not raised again, and the new Machine is the claim's.
func TestCreateResumesAClaimAfterItsScaleUp(t *testing.T) {
	w := newWorld(t, 2)
	ctx := context.Background()
	claim := &clusterapi.Claim{Machine: "web-aaaaa", Pool: "web", Namespace: ns, MachineDeployment: "md-0",
		Before: []string{"md-0-a-1", "md-0-a-2"}, Replicas: 3, Created: time.Now()}
	if err := w.claims.Put(ctx, claim); err != nil {
		t.Fatal(err)
	}
	w.edit(t, clusterapi.MachineDeployments, "md-0", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
	})
	// Cluster API made the claim's Machine, and one for a remediation
	// after it: the older is the claim's.
	w.add(t, machineOf("md-0-a", "md-0-a-0", 2*time.Hour), machineOf("md-0-a", "md-0-a-3", time.Hour))
	m, err := w.p.Create(ctx, pool(), "web-aaaaa")
	if err != nil {
		t.Fatal(err)
	}
	if r := w.replicas(t); r != 3 {
		t.Errorf("replicas %d after resuming; want 3: raised once, before the crash", r)
	}
	if m.Name != "web-aaaaa" || m.ProviderID != "kwok://md-0-a-3" || m.State != provider.StateRunning || m.Zone != "zone-a" {
		t.Errorf("Create = %+v; want web-aaaaa on Machine md-0-a-3 (kwok://md-0-a-3), Running in zone-a", m)
	}
	node := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "kwok://md-0-a-3"}}
	if got := w.p.NameOf(node); got != "web-aaaaa" {
		t.Errorf("NameOf(the claimed Machine's Node) = %q; want web-aaaaa", got)
	}
}

// A controller that crashed between its claim and the scale-up raises the
// replicas when Create is asked again.
func TestCreateResumesAClaimBeforeItsScaleUp(t *testing.T) {
	w := newWorld(t, 2)
	ctx := context.Background()
	if err := w.claims.Put(ctx, &clusterapi.Claim{Machine: "web-aaaaa", Pool: "web", Namespace: ns, MachineDeployment: "md-0",
		Before: []string{"md-0-a-1", "md-0-a-2"}, Replicas: 3, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	m, err := w.p.Create(ctx, pool(), "web-aaaaa")
	if err != nil {
		t.Fatal(err)
	}
	if r := w.replicas(t); r != 3 {
		t.Errorf("replicas %d; want 3, raised once for the claim", r)
	}
	if m.State != provider.StateLaunching || m.ProviderID != "" {
		t.Errorf("Create = %+v; want Launching, no Machine yet", m)
	}
	if _, err := w.p.Create(ctx, pool(), "web-aaaaa"); err != nil {
		t.Fatal(err)
	}
	if r := w.replicas(t); r != 3 {
		t.Errorf("replicas %d after a second Create of the name; want 3", r)
	}
}

// Machines no claim holds are named after their Machine, and act in the
// pool's target; names that lead nowhere are not found, and deleting them
// is no error.
func TestMachinesNoClaimHolds(t *testing.T) {
	w := newWorld(t, 2)
	ctx := context.Background()
	name := clusterapi.MachineName(ns, "md-0-a-1")
	if got := w.p.NameOf(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: "kwok://md-0-a-1"}}); got != name {
		t.Errorf("NameOf = %q; want %s", got, name)
	}
	if got := w.p.NameOf(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-0abc"}}); got != "" {
		t.Errorf("NameOf(a Node of no Machine) = %q; want \"\"", got)
	}
	for _, n := range []string{name, "md-0-a-1"} {
		m, err := w.p.Get(ctx, n)
		if err != nil || m.Pool != "web" || m.State != provider.StateRunning || m.ProviderID != "kwok://md-0-a-1" {
			t.Errorf("Get(%s) = %+v, %v; want machine of pool web, Running, kwok://md-0-a-1", n, m, err)
		}
	}
	for _, n := range []string{"web-never", clusterapi.MachineName(ns, "gone")} {
		if m, err := w.p.Get(ctx, n); !provider.IsNotFound(err) {
			t.Errorf("Get(%s) = %+v, %v; want not found", n, m, err)
		}
		if err := w.p.Delete(ctx, n); err != nil {
			t.Errorf("Delete(%s) = %v; want nil", n, err)
		}
	}
	if ms, err := w.p.List(ctx, "web"); err != nil || len(ms) != 0 {
		t.Errorf("List(web) = %v, %v; want none: the pool's own Machines are not sluice's", ms, err)
	}
}

// Create takes off the marks sluice left behind too, and leaves those
// Cluster API has yet to act on; it does not raise the replicas while one of
// those waits, as a raise then would cancel the decrement.
func TestCreateTakesOffAStrayMark(t *testing.T) {
	w := newWorld(t, 3)
	w.edit(t, clusterapi.Machines, "md-0-a-1", annotate(clusterapi.AnnotationDeleteMachine, "sluice:3"))
	w.edit(t, clusterapi.Machines, "md-0-a-2", annotate(clusterapi.AnnotationDeleteMachine, "sluice:4"))
	_, err := w.p.Create(context.Background(), pool(), "web-aaaaa")
	if e, ok := provider.AsError(err); !ok || e.Code != clusterapi.CodeDeletionInProgress || !e.Retryable {
		t.Errorf("Create with a decrement Cluster API has yet to act on = %v; want a retryable %s", err, clusterapi.CodeDeletionInProgress)
	}
	if v, ok := w.mark(t, "md-0-a-1"); ok {
		t.Errorf("stray mark %q on md-0-a-1 kept; want it taken off", v)
	}
	if v, _ := w.mark(t, "md-0-a-2"); v != "sluice:4" {
		t.Errorf("md-0-a-2 marked %q; want sluice:4 kept, its decrement to 3 done", v)
	}
	if r := w.replicas(t); r != 3 {
		t.Errorf("replicas %d; want 3, not raised while the decrement waits", r)
	}
}

// Delete waits while Cluster API has yet to make the Machines of a raise:
// a decrement now would cancel it.
func TestDeleteWaitsForARaiseToShow(t *testing.T) {
	w := newWorld(t, 3)
	w.edit(t, clusterapi.MachineDeployments, "md-0", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "replicas")
	})
	err := w.p.Delete(context.Background(), clusterapi.MachineName(ns, "md-0-a-1"))
	if e, ok := provider.AsError(err); !ok || e.Code != clusterapi.CodeCreationInProgress || !e.Retryable {
		t.Errorf("Delete with 3 Machines for 4 replicas = %v; want a retryable %s", err, clusterapi.CodeCreationInProgress)
	}
	if v, ok := w.mark(t, "md-0-a-1"); ok {
		t.Errorf("md-0-a-1 marked %q; want no mark", v)
	}
	if r := w.replicas(t); r != 4 {
		t.Errorf("replicas %d; want 4", r)
	}
}
