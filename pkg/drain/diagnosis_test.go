package drain

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	policylisters "k8s.io/client-go/listers/policy/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// The pods a budget holds wake together on each change of its status; their
// diagnoses must share one list of the budget's pods, not send one each
// (BenchmarkDrainTwentyNodes counted 1,922 such lists for 1,000 pods).
func TestDiagnosesOfOneBudgetShareOneList(t *testing.T) {
	const waiters = 15
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "1"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DesiredHealthy: 15, CurrentHealthy: 14, ExpectedPods: 20},
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := indexer.Add(pdb); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	var lists atomic.Int32
	release := make(chan struct{})
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		<-release
		starting := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-new", Labels: map[string]string{"app": "web"}},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
		return true, &corev1.PodList{Items: []corev1.Pod{starting}}, nil
	})
	r := &run{Drainer: &Drainer{client: client, clock: clk}, pdbs: policylisters.NewPodDisruptionBudgetLister(indexer), diags: map[string]*diagnosis{}}

	var wg sync.WaitGroup
	reasons := make([]Reason, waiters)
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reasons[i], _ = r.diagnose(context.Background(), pdb)
		}()
	}
	// Give every waiter the time to ask while the first list is in flight;
	// one list each would show here.
	deadline := time.Now().Add(200 * time.Millisecond)
	for lists.Load() < waiters && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if n := lists.Load(); n != 1 {
		t.Fatalf("%d waiters sent %d lists of the budget's pods; want one between them", waiters, n)
	}
	for i, reason := range reasons {
		if reason != ReasonPDBWaitingForPods {
			t.Errorf("waiter %d: %s, want the shared diagnosis %s", i, reason, ReasonPDBWaitingForPods)
		}
	}
	// Once the answer is old and the budget has changed, the next look lists again, once.
	clk.Step(diagnosisMinAge)
	next := pdb.DeepCopy()
	next.ResourceVersion = "2"
	if err := indexer.Update(next); err != nil {
		t.Fatal(err)
	}
	r.diagnose(context.Background(), next)
	r.diagnose(context.Background(), next)
	if n := lists.Load(); n != 2 {
		t.Fatalf("%d lists after the budget changed; want 2", n)
	}
}
