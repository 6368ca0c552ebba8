package feed

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// TestClientGoListsWatchesAndWritesAsAgainstAnAPIServer drives the feed
// with client-go, in protobuf as the controller's clients speak: a paged
// list, an informer that sees a write made after it synced, a merge patch
// whose stale resourceVersion is a conflict, a status write that leaves the
// spec alone, and a refused eviction.
func TestClientGoListsWatchesAndWritesAsAgainstAnAPIServer(t *testing.T) {
	srv, err := New(clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []runtime.Object
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "x"}}})
	}
	if err := srv.Add(nodes...); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cfg := srv.RESTConfig()
	cfg.ContentConfig = rest.ContentConfig{ContentType: runtime.ContentTypeProtobuf, AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	page, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil || len(page.Items) != 2 || page.Continue == "" {
		t.Fatalf("first page: %d items, continue %q, err %v; want 2 and a token", len(page.Items), page.Continue, err)
	}
	rest1, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 10, Continue: page.Continue})
	if err != nil || len(rest1.Items) != 3 || rest1.Items[0].Name != "c" {
		t.Fatalf("the rest: %v, err %v; want c, d, e", rest1.Items, err)
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	seen := make(chan string, 10)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, n any) {
		if node := n.(*corev1.Node); node.Spec.Unschedulable {
			seen <- node.Name
		}
	}}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) || len(inf.GetStore().List()) != 5 {
		t.Fatal("the informer did not sync the 5 nodes")
	}
	stale := page.Items[0].ResourceVersion
	if _, err := client.CoreV1().Nodes().Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-seen:
		if name != "a" {
			t.Fatalf("the watch saw %s cordoned, want a", name)
		}
	case <-ctx.Done():
		t.Fatal("the watch never saw the cordon")
	}
	_, err = client.CoreV1().Nodes().Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"`+stale+`"},"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("a patch at a stale resourceVersion: %v, want a conflict", err)
	}
	node, err := client.CoreV1().Nodes().Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"unschedulable":false},"status":{"phase":"Running"}}`), metav1.PatchOptions{}, "status")
	if err != nil || node.Status.Phase != corev1.NodeRunning || !node.Spec.Unschedulable {
		t.Fatalf("a status write: phase %q, unschedulable %v, err %v; want the status changed and the spec not", node.Status.Phase, node.Spec.Unschedulable, err)
	}
	if err := client.CoreV1().Pods("x").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "x"}}); err == nil {
		t.Fatal("an eviction was taken: the feed must refuse what it does not decide")
	}
	if got := srv.Requests()["patch nodes/status"]; got != 1 {
		t.Fatalf("counted %d status patches, want 1", got)
	}
}
