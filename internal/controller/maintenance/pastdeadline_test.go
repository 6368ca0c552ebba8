package maintenance

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// The gauge reads only the controller's cache, so a fake reader stands in for
// it here; what a drain leaves is proven against the API server by
// test/walk, where the alert on this gauge fires and clears.
func TestPastDeadlineCountsNodesStillHoldingPodsTheDrainHadToMove(t *testing.T) {
	deadline := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(deadline.Add(-time.Minute))
	blocked := func(name, event string) *corev1.Node {
		st := state{Event: event, Type: maintenance.TypeRedeploy, Phase: PhaseBlocked, Deadline: &deadline}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{contract.AnnotationMaintenanceState: st.encode()}}}
	}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	kube := fake.NewClientBuilder().WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}).WithObjects(
		blocked("held", "e1"), pod("stuck", "held"),
		blocked("policy", "e2"), pod("cache", "policy"),
		blocked("moved", "e3"), pod("db-0", "elsewhere"),
		blocked("ended", "e4"), pod("late", "ended"),
	).Build()
	reg := prometheus.NewRegistry()
	c := NewController(kube, kube, clk, nil, Options{Metrics: NewMetrics(reg)})
	left := func(reason drain.Reason, names ...string) []drain.PodReport {
		var out []drain.PodReport
		for _, n := range names {
			out = append(out, drain.PodReport{Namespace: "shop", Name: n, Outcome: drain.PodBlocked, Reason: reason})
		}
		return out
	}
	c.stranded.record("held", "e1", deadline, left(drain.ReasonTerminating, "stuck"))
	c.stranded.record("policy", "e2", deadline, left(drain.ReasonLocalStorage, "cache")) // left on purpose
	c.stranded.record("moved", "e3", deadline, left(drain.ReasonPDBDeadlock, "db-0"))    // recreated on another node
	c.stranded.record("ended", "e4", deadline, left(drain.ReasonTimeout, "late"))
	gauge := func() float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "sluice_maintenance_past_deadline_nodes" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no sluice_maintenance_past_deadline_nodes")
		return 0
	}

	if got := gauge(); got != 0 {
		t.Errorf("before the deadline: %v nodes; want 0", got)
	}
	clk.Step(2 * time.Minute)
	// held and ended still hold a pod their drain had to move.
	if got := gauge(); got != 2 {
		t.Errorf("past the deadline: %v nodes; want 2 (held, ended)", got)
	}

	// ended's event is over: its record goes, and so does the node here.
	ended := &corev1.Node{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "ended"}, ended); err != nil {
		t.Fatal(err)
	}
	delete(ended.Annotations, contract.AnnotationMaintenanceState)
	if err := kube.Update(context.Background(), ended); err != nil {
		t.Fatal(err)
	}
	// held's stuck pod finally goes.
	if err := kube.Delete(context.Background(), pod("stuck", "held")); err != nil {
		t.Fatal(err)
	}
	if got := gauge(); got != 0 {
		t.Errorf("after the pods went and the event ended: %v nodes; want 0", got)
	}
	if _, ok := c.stranded.nodes["ended"]; ok {
		t.Error("a node whose event ended is still remembered")
	}

	// A later drain that drains clean forgets the node.
	c.stranded.record("held", "e1", deadline, nil)
	if _, ok := c.stranded.nodes["held"]; ok {
		t.Error("a node drained clean is still remembered")
	}

	// A controller started since (a new leader) has no drain report: the
	// pods still on a node past its deadline stand in for it, less those a
	// drain leaves on purpose when not forced.
	restarted := NewController(kube, kube, clk, nil, Options{Metrics: NewMetrics(prometheus.NewRegistry())})
	var policy corev1.Node
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "policy"}, &policy); err != nil {
		t.Fatal(err)
	}
	cache := pod("cache", "policy")
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(cache), cache); err != nil {
		t.Fatal(err)
	}
	cache.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	cache.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "cache-1", Controller: ptr.To(true), APIVersion: "apps/v1"}}
	if err := kube.Update(context.Background(), cache); err != nil {
		t.Fatal(err)
	}
	st, _ := stateOf(&policy)
	for _, force := range []bool{false, true} {
		restarted.stranded.forget("policy", "e2")
		if err := restarted.recoverStranded(context.Background(), &policy, st, force); err != nil {
			t.Fatal(err)
		}
		if got, want := restarted.stranded.has("policy", "e2"), force; got != want {
			t.Errorf("recovered with force %v: an emptyDir pod counted %v; want %v", force, got, want)
		}
	}
}
