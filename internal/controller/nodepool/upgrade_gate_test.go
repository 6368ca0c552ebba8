package nodepool_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// agentReadyOn says whether a pod of the DaemonSet agent on node is Ready.
func (s *scene) agentReadyOn(ctx context.Context, node string) (bool, error) {
	pods, err := s.env.Client.CoreV1().Pods(s.env.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=agent", FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return false, err
	}
	for i := range pods.Items {
		for _, c := range pods.Items[i].Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
	}
	return false, nil
}

// With the health gate on, an old node is drained only once the node agent
// (a DaemonSet whose pods turn Ready 6 s after they start) is Ready on its
// surge node: watched throughout, no node is ever Draining while its
// replacement's agent is not Ready. Without the gate the drain starts as
// soon as the surge node is Ready, seconds before its agent is.
func TestUpgradeHealthGateWaitsForDaemonSetPods(t *testing.T) {
	s := newScene(t, 2, nil)
	s.env.Create(t, fixture.DaemonSet(s.env.Namespace, "agent", s.onPool, fixture.StartsAfter(6)))
	s.workload(t, 2, "1")
	s.env.WaitFor(t, time.Minute, "the agent Ready on both nodes", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if ok, err := s.agentReadyOn(ctx, n.Name); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	s.start(t)
	var mu sync.Mutex
	early := map[string]string{}
	drained := map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.eachNodeChange(ctx, t, func(n *corev1.Node) {
			rec, _ := disruption.RecordOf(n)
			if rec == nil || rec.Phase != disruption.PhaseDraining {
				return
			}
			ok, err := s.agentReadyOn(ctx, rec.Replacement)
			mu.Lock()
			defer mu.Unlock()
			drained[n.Name] = true
			if err == nil && !ok {
				early[n.Name] = fmt.Sprintf("%s draining while the agent on its surge node %s is not Ready", n.Name, rec.Replacement)
			}
		})
	}()
	s.upgrade(t, "img-2", v1alpha1.UpgradeSpec{MaxSurge: surge(intstr.FromInt32(1)), HealthGate: &v1alpha1.HealthGate{DaemonSetPodsReady: true}})
	st := s.waitUpgrade(t, "img-2", v1alpha1.UpgradeSucceeded, 3*time.Minute)
	cancel()
	<-done
	if st.Upgraded != 2 {
		t.Errorf("status.upgrade %+v; want 2 of 2 upgraded", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(drained) == 0 {
		t.Error("no node was seen Draining: the watch saw nothing to check")
	}
	for _, e := range early {
		t.Error(e)
	}
}

// A node agent that never runs on the new image (here a DaemonSet only for
// nodes labelled by hand, which surge nodes are not) fails the gate: past
// the registration timeout each old node is rolled back untouched and
// labelled Blocked (by HealthGate), its surge node removed, and the pool
// says why. Once more nodes than maxBlockedNodes (1) have failed so, the
// upgrade is Failed, blaming the image, and the third node is never tried.
func TestUpgradeHealthGateFailsAnImageWhoseAgentNeverRuns(t *testing.T) {
	s := newScene(t, 3, nil)
	nodes, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		patch := []byte(`{"metadata":{"labels":{"test.sluice.dev/agent":"yes"}}}`)
		if _, err := s.env.Client.CoreV1().Nodes().Patch(context.Background(), n.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.env.Create(t, fixture.DaemonSet(s.env.Namespace, "agent", fixture.NodeSelector(map[string]string{"test.sluice.dev/agent": "yes"})))
	s.env.WaitForPods(t, "app=agent", 3)
	s.start(t)
	s.upgrade(t, "img-2", v1alpha1.UpgradeSpec{MaxSurge: surge(intstr.FromInt32(1)), MaxBlockedNodes: ptr.To(int32(1)),
		HealthGate: &v1alpha1.HealthGate{DaemonSetPodsReady: true}})
	st := s.waitUpgrade(t, "img-2", v1alpha1.UpgradeFailed, 3*time.Minute)
	if len(st.Blocked) != 2 || st.Upgraded != 0 || !strings.Contains(st.Message, "did not pass the health gate") {
		t.Errorf("status.upgrade %+v; want 2 nodes blocked by the health gate, none upgraded, the message saying so", st)
	}
	rolledBack := 0
	for _, e := range s.poolEvents(t) {
		if strings.HasPrefix(e, "UpgradeRolledBack: ") && strings.Contains(e, "did not pass the health gate") && strings.Contains(e, "DaemonSet "+s.env.Namespace+"/agent") {
			rolledBack++
		}
	}
	if rolledBack != 2 {
		t.Errorf("%d UpgradeRolledBack Events name the health gate and the agent; want 2: %v", rolledBack, s.poolEvents(t))
	}
	s.env.WaitFor(t, time.Minute, "the surge nodes removed", func(ctx context.Context) (bool, error) { return s.settled(ctx, t) })
	after, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gated := 0
	for _, name := range nodeNames(nodes) {
		n := findNode(after, name)
		switch {
		case n == nil:
			t.Errorf("old node %s is gone: a node whose surge node failed the gate must stay", name)
		case n.Spec.Unschedulable || n.Annotations[contract.AnnotationImage] != "img-1":
			t.Errorf("old node %s: unschedulable %v, image %s; want back in service on img-1", name, n.Spec.Unschedulable, n.Annotations[contract.AnnotationImage])
		case n.Annotations[contract.AnnotationUpgradeBlockedBy] == v1alpha1.BlockedByHealthGate:
			gated++
		}
	}
	if gated != 2 || len(after) != 3 {
		t.Errorf("%d old nodes blocked by the health gate and %d nodes in the pool; want 2 and 3 (the third never tried)", gated, len(after))
	}
}

func nodeNames(nodes []*corev1.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

func findNode(nodes []*corev1.Node, name string) *corev1.Node {
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
