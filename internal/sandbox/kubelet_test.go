package sandbox_test

// The simulated kubelets: nodes stay Ready on their leases, become NotReady on
// demand, pods start and (for Jobs) finish.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/contract"
)

func annotateNode(t *testing.T, env *sandboxtest.Env, node, key string, value *string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]*string{key: value}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotating node %s: %v", node, err)
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == key {
			return true
		}
	}
	return false
}

func TestNodeNotReadyOnDemand(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	node := env.CreateNodes(t, fixture.AKSPool(sandboxtest.UniqueName("nr"), 1))[0].Name
	yes := "true"

	annotateNode(t, env, node, contract.SandboxNotReady, &yes)
	env.WaitForNodeReady(t, node, false)
	// The real node lifecycle controller reacts as it would to a dead kubelet.
	env.WaitFor(t, 30*time.Second, "the not-ready taint", func(ctx context.Context) (bool, error) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && hasTaint(n, corev1.TaintNodeNotReady), nil
	})

	annotateNode(t, env, node, contract.SandboxNotReady, nil)
	env.WaitForNodeReady(t, node, true)
	env.WaitFor(t, 30*time.Second, "the not-ready taint to be lifted", func(ctx context.Context) (bool, error) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && !hasTaint(n, corev1.TaintNodeNotReady), nil
	})
}

func TestNodeLeaseIsRenewed(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	node := env.CreateNodes(t, fixture.EKSNodeGroup(sandboxtest.UniqueName("lease"), 1))[0].Name
	var first time.Time
	env.WaitFor(t, 30*time.Second, "the node's lease", func(ctx context.Context) (bool, error) {
		lease, err := env.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		if err != nil || lease.Spec.RenewTime == nil {
			return false, nil
		}
		// kwok holds every lease under its own identity, where a kubelet uses the node name.
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Fatalf("lease %s has no holder", node)
		}
		first = lease.Spec.RenewTime.Time
		return true, nil
	})
	// kwok renews a 40s lease every quarter of it.
	env.WaitFor(t, 30*time.Second, "the lease to be renewed", func(ctx context.Context) (bool, error) {
		lease, err := env.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		return err == nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(first), nil
	})
}

func TestPodsStartAndJobsComplete(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	pool := fixture.AKSPool(sandboxtest.UniqueName("job"), 1)
	env.CreateNodes(t, pool)
	env.Create(t, fixture.Job(env.Namespace, "report", 2, fixture.NodeSelector(pool.Selector()), fixture.CompletesAfter(2)))

	pods := env.WaitForPods(t, "app=report", 2)
	for _, p := range pods {
		if p.Status.PodIP == "" || p.Status.HostIP == "" || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			t.Errorf("pod %s: want an IP and a running container, got podIP=%q hostIP=%q containers=%+v",
				p.Name, p.Status.PodIP, p.Status.HostIP, p.Status.ContainerStatuses)
		}
	}
	env.WaitFor(t, 30*time.Second, "the job to complete", func(ctx context.Context) (bool, error) {
		job, err := env.Client.BatchV1().Jobs(env.Namespace).Get(ctx, "report", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return job.Status.Succeeded == 2, nil
			}
		}
		return false, nil
	})
}

func TestPodsCanTakeTimeToStart(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	node := env.CreateNodes(t, fixture.AKSPool(sandboxtest.UniqueName("slow"), 1))[0].Name
	env.Create(t, fixture.Pod(env.Namespace, "slow", fixture.OnNode(node), fixture.StartsAfter(4)))
	start := time.Now()
	// As a kubelet reports it: Running with its container started, not Ready
	// until the readiness probe passes.
	env.WaitFor(t, 10*time.Second, "the pod Running and not Ready", func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, "slow", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				t.Fatalf("Ready %s after creation: want Running and not Ready first", time.Since(start))
			}
		}
		cs := p.Status.ContainerStatuses
		if len(cs) != 1 || cs[0].Ready || cs[0].Started == nil || !*cs[0].Started || cs[0].State.Running == nil || p.Status.PodIP == "" {
			t.Fatalf("starting pod: want an IP and one started, running, unready container; got podIP=%q %+v", p.Status.PodIP, cs)
		}
		return true, nil
	})
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Running after %s; want at once", took)
	}
	env.WaitForPods(t, "app=slow", 1)
	if took := time.Since(start); took < 3*time.Second || took > 10*time.Second {
		t.Errorf("pod with ready-after-seconds 4 was Ready after %s", took)
	}
}

// The node lifecycle controller marks a lost node's pods Ready=False; once
// the node is back a kubelet reports them Ready again, and so does the
// sandbox. A pod whose containers are not ready stays as it is.
func TestPodsMarkedNotReadyByTheControlPlaneRecover(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	node := env.CreateNodes(t, fixture.AKSPool(sandboxtest.UniqueName("mark"), 1))[0].Name
	env.Create(t, fixture.Pod(env.Namespace, "marked", fixture.OnNode(node)), fixture.Pod(env.Namespace, "failing", fixture.OnNode(node)))
	env.WaitForPods(t, "app in (marked,failing)", 2)
	ctx := context.Background()
	setReady := func(name string, containers bool) {
		p, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || containers && c.Type == corev1.ContainersReady {
				c.Status = corev1.ConditionFalse
			}
		}
		if _, err := env.Client.CoreV1().Pods(env.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setReady("marked", false) // as the node lifecycle controller does
	setReady("failing", true) // as a failing readiness probe does
	ready := func(name string) bool {
		p, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	env.WaitFor(t, 15*time.Second, "the marked pod Ready again", func(context.Context) (bool, error) { return ready("marked"), nil })
	if ready("failing") {
		t.Errorf("a pod whose containers are not ready was made Ready")
	}
}
