package drain_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// mirrorPod is the API object a kubelet creates for a static pod.
func mirrorPod(ns, node string) *corev1.Pod {
	p := fixture.Pod(ns, "static-web", fixture.OnNode(node))
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "static-web-hash"}
	return p
}

func TestDrainMovesEveryClassWithKubectlsFlags(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	node := s.nodes[0]
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "plain", 1, s.onAll, fixture.ExitsAfter(1)),
		fixture.DaemonSet(ns, "agent", s.onAll),
		mirrorPod(ns, node),
		fixture.Pod(ns, "done", fixture.OnNode(node), fixture.CompletesAfter(0.5)),
		fixture.Pod(ns, "leaving", fixture.OnNode(node), fixture.GracePeriod(4)),
		fixture.Deployment(ns, "scratch", 1, s.onAll, fixture.EmptyDir(), fixture.ExitsAfter(1)),
		fixture.Pod(ns, "lonely", fixture.OnNode(node), fixture.ExitsAfter(1)),
	)
	s.env.WaitForPods(t, "app in (plain,scratch,lonely,leaving)", 4)
	s.env.WaitFor(t, 20*time.Second, "pod done to succeed", func(ctx context.Context) (bool, error) {
		p, err := s.env.Client.CoreV1().Pods(ns).Get(ctx, "done", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, nil
	})
	if err := s.env.Client.CoreV1().Pods(ns).Delete(context.Background(), "leaving", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.addSpare(t, 1)

	d := s.run(t, drain.Options{IgnoreDaemonSets: true, DeleteEmptyDirData: true, Force: true}, node)
	d.node(t, 0, drain.NodeDrained)
	d.expect(t, "plain", want{outcome: drain.PodEvicted})
	d.expect(t, "agent", want{outcome: drain.PodSkipped, reason: drain.ReasonDaemonSetPod})
	d.expect(t, "static-web", want{outcome: drain.PodSkipped, reason: drain.ReasonMirrorPod})
	d.expect(t, "done", want{outcome: drain.PodEvicted})
	d.expect(t, "leaving", want{outcome: drain.PodDeleted, reason: drain.ReasonTerminating})
	d.expect(t, "scratch", want{outcome: drain.PodEvicted, message: "emptyDir data (scratch) is deleted"})
	d.expect(t, "lonely", want{outcome: drain.PodEvicted, message: "no controller"})

	n := s.getNode(t, node)
	if !n.Spec.Unschedulable || n.Annotations[contract.AnnotationCordonedBy] != ownership.OwnerCLI {
		t.Errorf("node after drain: unschedulable=%v cordoned-by=%q; want cordoned, by sluice drain (cli)", n.Spec.Unschedulable, n.Annotations[contract.AnnotationCordonedBy])
	}
	if _, ok := n.Annotations[contract.AnnotationDrain]; ok {
		t.Errorf("node after drain still carries the claim %s", contract.AnnotationDrain)
	}
	if ev := s.events(t, metav1.NamespaceDefault, "Node", node); !ev["DrainStarted"] || !ev["DrainCompleted"] {
		t.Errorf("node events %v: want DrainStarted and DrainCompleted", ev)
	}
	for _, name := range []string{"static-web"} {
		if _, err := s.env.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("skipped pod %s: want it left alone, got %v", name, err)
		}
	}
}

func TestDrainRefusesUpFrontAndTouchesNothing(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	node := s.nodes[0]
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "plain", 1, s.onAll),
		fixture.DaemonSet(ns, "agent", s.onAll),
		fixture.Deployment(ns, "scratch", 1, s.onAll, fixture.EmptyDir()),
		fixture.Pod(ns, "lonely", fixture.OnNode(node)),
	)
	s.env.WaitForPods(t, "app in (plain,agent,scratch,lonely)", 4)
	before := s.podUIDs(t)

	d := s.run(t, drain.Options{}, node)
	n := d.node(t, 0, drain.NodeBlocked)
	d.expect(t, "plain", want{outcome: drain.PodNotEvicted})
	d.expect(t, "agent", want{outcome: drain.PodBlocked, reason: drain.ReasonDaemonSetPod, message: "use --ignore-daemonsets"})
	d.expect(t, "scratch", want{outcome: drain.PodBlocked, reason: drain.ReasonLocalStorage, message: "use --delete-emptydir-data"})
	d.expect(t, "lonely", want{outcome: drain.PodBlocked, reason: drain.ReasonUnreplicated, message: "use --force"})
	if n.Cordoned || s.getNode(t, node).Spec.Unschedulable {
		t.Errorf("a drain refused up front cordoned the node")
	}
	if after := s.podUIDs(t); len(after) != len(before) {
		t.Errorf("pods before %v, after %v: a refused drain must evict nothing", before, after)
	}
	if ev := s.events(t, metav1.NamespaceDefault, "Node", node); !ev["DrainBlocked"] {
		t.Errorf("node events %v: want DrainBlocked", ev)
	}
}

func TestDoNotDisruptAnnotationsHoldTheDrain(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "ours", 1, s.onAll, fixture.Annotate(contract.AnnotationDoNotDisrupt, "true")),
		fixture.Deployment(ns, "karpenter", 1, s.onAll, fixture.Annotate("karpenter.sh/do-not-disrupt", "true")),
		fixture.Deployment(ns, "autoscaler", 1, s.onAll, fixture.Annotate("cluster-autoscaler.kubernetes.io/safe-to-evict", "false")),
		fixture.Deployment(ns, "plain", 1, s.onAll),
	)
	s.env.WaitForPods(t, "app in (ours,karpenter,autoscaler,plain)", 4)
	d := s.run(t, drain.Options{}, s.nodes[0])
	d.node(t, 0, drain.NodeBlocked)
	d.expect(t, "ours", want{outcome: drain.PodBlocked, reason: drain.ReasonDoNotDisrupt, message: "sluice.dev/do-not-disrupt=true"})
	d.expect(t, "karpenter", want{outcome: drain.PodBlocked, reason: drain.ReasonDoNotDisrupt, message: "karpenter.sh/do-not-disrupt=true"})
	d.expect(t, "autoscaler", want{outcome: drain.PodBlocked, reason: drain.ReasonDoNotDisrupt, message: "safe-to-evict=false"})
	d.expect(t, "plain", want{outcome: drain.PodNotEvicted})
}

// A do-not-disrupt duration holds a pod until it has run that long, then
// the drain moves it as any other: the drain waits for a hold that ends
// before it must stop, and refuses at once, evicting nothing, one that ends
// after. An unreadable value holds, and says so.
func TestDoNotDisruptDurationsHoldTheDrainUntilTheyEnd(t *testing.T) {
	t.Parallel()
	s := newScene(t, 2)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "briefly", 1, s.onAll, onNode(s.nodes[0]), fixture.Annotate(contract.AnnotationDoNotDisrupt, "20s")),
		fixture.Deployment(ns, "typo", 1, s.onAll, onNode(s.nodes[1]), fixture.Annotate(contract.AnnotationDoNotDisrupt, "20 seconds")),
	)
	pods := s.env.WaitForPods(t, "app in (briefly,typo)", 2)
	s.addSpare(t, 1)
	var started time.Time
	for _, p := range pods {
		if p.Labels[fixture.LabelApp] == "briefly" && p.Status.StartTime != nil {
			started = p.Status.StartTime.Time
		}
	}
	if started.IsZero() {
		t.Fatal("the held pod has no start time")
	}

	// A 5 s timeout ends before the 20 s hold: refused, nothing touched.
	before := s.podUIDs(t)
	d := s.run(t, drain.Options{Timeout: 5 * time.Second}, s.nodes[0])
	if time.Since(started) < 20*time.Second {
		d.node(t, 0, drain.NodeBlocked)
		d.expect(t, "briefly", want{outcome: drain.PodBlocked, reason: drain.ReasonDoNotDisrupt, message: "held until"})
		if s.getNode(t, s.nodes[0]).Spec.Unschedulable {
			t.Error("a drain refused for a hold past its timeout cordoned the node")
		}
		if after := s.podUIDs(t); len(after) != len(before) {
			t.Errorf("pods before %v, after %v: a refused drain must evict nothing", before, after)
		}
	}

	// Without a timeout the drain waits for the hold to end, then moves it.
	d = s.run(t, drain.Options{}, s.nodes[0])
	d.node(t, 0, drain.NodeDrained)
	d.expect(t, "briefly", want{outcome: drain.PodEvicted})
	if gone := time.Since(started); gone < 20*time.Second {
		t.Errorf("the pod left %s after it started, before its 20s hold ended", gone.Round(time.Second))
	}

	// An unreadable value holds for good.
	d = s.run(t, drain.Options{}, s.nodes[1])
	d.node(t, 0, drain.NodeBlocked)
	d.expect(t, "typo", want{outcome: drain.PodBlocked, reason: drain.ReasonDoNotDisrupt, message: "neither true nor a duration"})
}

func TestPodSelectorLimitsTheDrain(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	s.env.Create(t, fixture.Deployment(ns, "a", 1, s.onAll, fixture.ExitsAfter(1)), fixture.Deployment(ns, "b", 1, s.onAll))
	pods := s.env.WaitForPods(t, "app in (a,b)", 2)
	s.addSpare(t, 1)
	sel, _ := labels.Parse("app=a")
	d := s.run(t, drain.Options{PodSelector: sel}, s.nodes[0])
	d.node(t, 0, drain.NodeDrained)
	d.expect(t, "a", want{outcome: drain.PodEvicted})
	if len(d.byApp["b"]) != 0 {
		t.Errorf("pod b is outside --pod-selector but in the report: %+v", d.byApp["b"])
	}
	for _, p := range pods {
		if p.Labels["app"] == "b" {
			if _, err := s.env.Client.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("pod b was touched: %v", err)
			}
		}
	}
}

func TestGracePeriodOverrideAndDisableEviction(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	// minAvailable 1 over one replica: eviction would never pass; deletion ignores budgets.
	s.env.Create(t,
		fixture.Deployment(ns, "solo", 1, s.onAll, fixture.GracePeriod(60)),
		fixture.PDB(ns, "solo", "solo", fixture.MinAvailable("1")),
	)
	s.env.WaitForPods(t, "app=solo", 1)
	s.addSpare(t, 1)
	d := s.run(t, drain.Options{DisableEviction: true, GracePeriodSeconds: ptr.To[int64](2)}, s.nodes[0])
	d.node(t, 0, drain.NodeDrained)
	d.expect(t, "solo", want{outcome: drain.PodDeleted})
	p := d.byApp["solo"][0]
	if p.GracePeriodSeconds == nil || *p.GracePeriodSeconds != 2 || p.GoneAfterSeconds == nil || *p.GoneAfterSeconds > 8 {
		t.Errorf("solo: grace %v gone after %v; want grace 2 and gone within a few seconds", ptr.Deref(p.GracePeriodSeconds, -1), ptr.Deref(p.GoneAfterSeconds, -1))
	}
}

func TestUIDPreconditionSparesARecreatedPod(t *testing.T) {
	t.Parallel()
	s := newScene(t, 1)
	ns := s.env.Namespace
	sts, svc := fixture.StatefulSet(ns, "db", 1, s.onAll)
	s.env.Create(t, svc, sts)
	old := s.env.WaitForPods(t, "app=db", 1)[0]
	ctx := context.Background()
	if err := s.env.Client.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	var fresh corev1.Pod
	s.env.WaitFor(t, 30*time.Second, "db-0 recreated", func(ctx context.Context) (bool, error) {
		p, err := s.env.Client.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{})
		if err != nil || p.UID == old.UID {
			return false, nil
		}
		fresh = *p
		return true, nil
	})
	err := drain.EvictWithUID(ctx, s.env.Client, &old, 1)
	if !apierrors.IsConflict(err) {
		t.Fatalf("evicting db-0 by its old UID: want 409 Conflict, got %v", err)
	}
	if p, err := s.env.Client.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{}); err != nil || p.UID != fresh.UID || p.DeletionTimestamp != nil {
		t.Errorf("the recreated db-0 was touched: %v %+v", err, p.ObjectMeta)
	}
}
