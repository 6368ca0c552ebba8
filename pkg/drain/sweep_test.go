package drain_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// A scheduler binds a pod to a node in the moment before its cache shows the
// node's cordon; the drain's watch had already been read. Here the test binds
// the pod itself, right after the cordon, as that scheduler would.
func bindLate(t *testing.T, s *scene, node, name string) {
	t.Helper()
	pod := fixture.Pod(s.env.Namespace, name, fixture.OnNode(node), fixture.ExitsAfter(1))
	if _, err := s.env.Client.CoreV1().Pods(s.env.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Errorf("binding %s to the cordoned node: %v", name, err)
	}
}

func TestAPodBoundAfterTheCordonLeavesToo(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	node := s.nodes[0]
	ns := s.env.Namespace
	s.env.Create(t, fixture.Deployment(ns, "web", 2, s.onAll, fixture.ExitsAfter(1)))
	s.env.WaitForPods(t, "app=web", 2)
	s.addSpare(t, 1)
	s.observe = func(p drain.Progress) {
		if p.Kind == drain.ProgressCordoned {
			bindLate(t, s, node, "late")
		}
	}

	d := s.run(t, drain.Options{Force: true}, node)
	d.node(t, 0, drain.NodeDrained)
	d.expect(t, "web", want{outcome: drain.PodEvicted})
	d.expect(t, "late", want{outcome: drain.PodEvicted, message: "no controller"})
	pods, err := s.env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("pod %s is still on the node the drain called drained", p.Name)
	}
}

// Something that binds a new pod to the node each time one leaves is
// reported, not chased without end.
func TestPodsThatKeepArrivingAreReported(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	node := s.nodes[0]
	ns := s.env.Namespace
	s.env.Create(t, fixture.Deployment(ns, "web", 1, s.onAll, fixture.ExitsAfter(1)))
	s.env.WaitForPods(t, "app=web", 1)
	s.addSpare(t, 1)
	var bound atomic.Int32
	s.observe = func(p drain.Progress) {
		if p.Kind == drain.ProgressCordoned || (p.Kind == drain.ProgressGone && bound.Load() < 10) {
			bindLate(t, s, node, fmt.Sprintf("again-%d", bound.Add(1)))
		}
	}

	d := s.run(t, drain.Options{Force: true}, node)
	n := d.node(t, 0, drain.NodeBlocked)
	if !strings.Contains(n.Message, "kept arriving on the node after it was cordoned") {
		t.Errorf("node message %q; want it to say pods kept arriving", n.Message)
	}
	if b := bound.Load(); b < 4 || b >= 10 {
		t.Errorf("%d pods bound late; want the drain to give up after a few rounds, not to stop at once or chase all 10", b)
	}
}

// With --evict-daemonsets, a DaemonSet recreates its evicted pod on the
// cordoned node at once (its pods tolerate the cordon): that is not a pod
// the drain missed, and not one to chase. Here the test recreates it, as
// the DaemonSet controller would, as soon as each is evicted.
func TestRecreatedDaemonSetPodsAreNotChased(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	node := s.nodes[0]
	ns := s.env.Namespace
	s.env.Create(t, fixture.DaemonSet(ns, "agent", s.onAll, fixture.ExitsAfter(0.5)))
	pods := s.env.WaitForPods(t, "app=agent", 1)
	// The recreations name the DaemonSet, under another UID so its real
	// controller leaves them alone (it only manages its own).
	owner := *metav1.GetControllerOf(&pods[0])
	owner.UID = "00000000-0000-0000-0000-00000000da7a"
	var recreated atomic.Int32
	s.observe = func(p drain.Progress) {
		if p.Kind == drain.ProgressEvicting && strings.HasPrefix(p.Pod, ns+"/agent") && recreated.Load() < 10 {
			pod := fixture.Pod(ns, fmt.Sprintf("agent-again-%d", recreated.Add(1)), fixture.OnNode(node), fixture.Label("app", "agent"))
			pod.OwnerReferences = []metav1.OwnerReference{owner}
			if _, err := s.env.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
				t.Errorf("recreating the DaemonSet's pod: %v", err)
			}
		}
	}
	d := s.run(t, drain.Options{EvictDaemonSets: true}, node)
	d.node(t, 0, drain.NodeDrained)
	if n := recreated.Load(); n != 1 {
		t.Errorf("the DaemonSet's pod was recreated %d times; want once: the drain chased its recreations", n)
	}
}
