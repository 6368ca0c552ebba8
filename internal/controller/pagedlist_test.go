package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// pagingServer answers lists the way the API server does for a consistent
// read with a limit: pages from one snapshot, chained by continue tokens.
type pagingServer struct {
	pods []corev1.Pod
	asks []metav1.ListOptions
}

func (s *pagingServer) ListWithContext(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	s.asks = append(s.asks, opts)
	start := 0
	if opts.Continue != "" {
		if _, err := fmt.Sscanf(opts.Continue, "from-%d", &start); err != nil {
			return nil, err
		}
	}
	end := len(s.pods)
	if opts.Limit > 0 {
		end = min(end, start+int(opts.Limit))
	}
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: s.pods[start:end]}
	if end < len(s.pods) {
		list.Continue = fmt.Sprintf("from-%d", end)
	}
	return list, nil
}

func (s *pagingServer) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewEmptyWatch(), nil
}

func TestPagedPodsListsEveryPodStrippedAPageAtATime(t *testing.T) {
	srv := &pagingServer{}
	for i := range 1234 {
		srv.pods = append(srv.pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "ns",
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{
				Name: "app", Image: "registry/app:1", Env: []corev1.EnvVar{{Name: "SECRET", Value: "x"}}}}},
		})
	}
	obj, err := pagedPods(srv).ListWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	list := obj.(*corev1.PodList)
	if len(list.Items) != 1234 || list.ResourceVersion != "42" || list.Continue != "" {
		t.Fatalf("got %d pods at version %q, continue %q; want 1234 at 42, no continue", len(list.Items), list.ResourceVersion, list.Continue)
	}
	if len(srv.asks) != 3 {
		t.Fatalf("asked %d times, want 3 pages of %d", len(srv.asks), podPageSize)
	}
	if first := srv.asks[0]; first.ResourceVersion != "" || first.Limit != podPageSize {
		t.Errorf("first ask %+v: want a consistent read (version \"\") of %d", first, podPageSize)
	}
	if srv.asks[2].Continue != "from-1000" {
		t.Errorf("third ask continued from %q, want from-1000", srv.asks[2].Continue)
	}
	for i, p := range list.Items {
		if p.Name != fmt.Sprintf("p%d", i) || p.Spec.NodeName != "n1" {
			t.Fatalf("item %d is %s on %q", i, p.Name, p.Spec.NodeName)
		}
		if p.ManagedFields != nil || p.Spec.Containers[0].Env != nil || p.Spec.Containers[0].Image != "" {
			t.Fatalf("item %d kept what the cache never reads: %+v", i, p)
		}
	}
}

func TestPagedPodsPassesAVersionedListThroughUnpaged(t *testing.T) {
	srv := &pagingServer{pods: make([]corev1.Pod, 700)}
	// A relist at a known version is answered from the watch cache, whole;
	// paging it would send it to etcd.
	obj, err := pagedPods(srv).ListWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "40"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(obj.(*corev1.PodList).Items); n != 700 || len(srv.asks) != 1 || srv.asks[0].Limit != 0 || srv.asks[0].ResourceVersion != "40" {
		t.Fatalf("got %d pods in %d asks (%+v), want 700 in one unpaged ask at version 40", n, len(srv.asks), srv.asks)
	}
}
