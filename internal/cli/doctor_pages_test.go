package cli

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestDoctorListsPodsInPages: doctor reads the pods a page at a time
// (each page a request within --request-timeout) and keeps every page.
func TestDoctorListsPodsInPages(t *testing.T) {
	const total, chunk = 1234, 500
	c := fake.NewClientset()
	var limits []int64
	c.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		limits = append(limits, opts.Limit)
		from := 0
		if opts.Continue != "" {
			from, _ = strconv.Atoi(opts.Continue)
		}
		page := &corev1.PodList{}
		for i := from; i < min(from+int(opts.Limit), total); i++ {
			page.Items = append(page.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p", i)}})
		}
		if next := from + int(opts.Limit); next < total {
			page.Continue = strconv.Itoa(next)
		}
		return true, page, nil
	})
	pods, err := allPods(context.Background(), c, chunk)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != total || pods.Items[total-1].Name != fmt.Sprint("p", total-1) {
		t.Fatalf("doctor read %d pods, want %d, the last one p%d", len(pods.Items), total, total-1)
	}
	if len(limits) != 3 || limits[0] != chunk {
		t.Fatalf("doctor asked %d pages with limits %v, want 3 of %d", len(limits), limits, chunk)
	}
}
