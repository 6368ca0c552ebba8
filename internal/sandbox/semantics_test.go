package sandbox_test

// These tests pin down the API-server behaviour the drain engine is built on.
// If one fails after a Kubernetes bump, sluice's assumptions need revisiting.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
)

func evict(ctx context.Context, env *sandboxtest.Env, pod corev1.Pod) error {
	return env.Client.CoreV1().Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
	})
}

func TestPDBLetsExactlyOneEvictionThrough(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	pool := fixture.AKSPool(sandboxtest.UniqueName("pdb"), 2)
	nodes := env.CreateNodes(t, pool)
	env.Create(t,
		fixture.Deployment(env.Namespace, "web", 4, fixture.NodeSelector(pool.Selector()), fixture.GracePeriod(30)),
		fixture.PDB(env.Namespace, "web", "web", fixture.MinAvailable("3")),
	)
	pods := env.WaitForPods(t, "app=web", 4)
	env.WaitFor(t, 30*time.Second, "the disruption controller to allow one disruption", func(ctx context.Context) (bool, error) {
		pdb, err := env.Client.PolicyV1().PodDisruptionBudgets(env.Namespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == 4 && pdb.Status.DisruptionsAllowed == 1, nil
	})

	// Keep the first eviction's replacement Pending: otherwise kwok makes it
	// Ready within milliseconds and the budget, rightly, allows the second.
	ctx := context.Background()
	for _, n := range nodes {
		if _, err := env.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := evict(ctx, env, pods[0]); err != nil {
		t.Fatalf("first eviction: want it allowed, got %v", err)
	}
	err := evict(ctx, env, pods[1])
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second eviction: want 429 Too Many Requests, got %v", err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("second eviction: want a Status with details, got %#v", err)
	}
	var named bool
	for _, c := range status.Status().Details.Causes {
		if c.Type == policyv1.DisruptionBudgetCause && strings.Contains(c.Message, "disruption budget web needs 3 healthy pods") {
			named = true
		}
	}
	if !named {
		t.Fatalf("second eviction: want a DisruptionBudget cause naming budget web, got %+v", status.Status().Details.Causes)
	}

	evicted, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, pods[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting the evicted pod: %v", err)
	}
	if evicted.DeletionTimestamp == nil || ptr.Deref(evicted.DeletionGracePeriodSeconds, -1) != 30 {
		t.Errorf("evicted pod: want Terminating with a 30s grace period, got deletionTimestamp=%v grace=%v",
			evicted.DeletionTimestamp, evicted.DeletionGracePeriodSeconds)
	}
	if _, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, pods[1].Name, metav1.GetOptions{}); err != nil {
		t.Errorf("refused pod: want it untouched, got %v", err)
	}
}

func TestEvictedPodIsRecreatedAndScheduledElsewhere(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	pool := fixture.EKSNodeGroup(sandboxtest.UniqueName("resched"), 2)
	env.CreateNodes(t, pool)
	env.Create(t, fixture.Deployment(env.Namespace, "api", 1, fixture.NodeSelector(pool.Selector()), fixture.GracePeriod(5)))
	old := env.WaitForPods(t, "app=api", 1)[0]

	ctx := context.Background()
	cordon := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := env.Client.CoreV1().Nodes().Patch(ctx, old.Spec.NodeName, types.MergePatchType, cordon, metav1.PatchOptions{}); err != nil {
		t.Fatalf("cordoning %s: %v", old.Spec.NodeName, err)
	}
	if err := evict(ctx, env, old); err != nil {
		t.Fatalf("evicting %s: %v", old.Name, err)
	}

	var replacement corev1.Pod
	env.WaitFor(t, 30*time.Second, "a ready replacement pod", func(ctx context.Context) (bool, error) {
		list, err := env.Client.CoreV1().Pods(env.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=api"})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if p.UID != old.UID && sandboxtest.PodReady(&p) {
				replacement = p
				return true, nil
			}
		}
		return false, nil
	})
	if replacement.Spec.NodeName == old.Spec.NodeName || replacement.Spec.NodeName == "" {
		t.Errorf("replacement on node %q: want the other node than cordoned %s", replacement.Spec.NodeName, old.Spec.NodeName)
	}
	oldOwner, newOwner := metav1.GetControllerOf(&old), metav1.GetControllerOf(&replacement)
	if oldOwner == nil || newOwner == nil || oldOwner.UID != newOwner.UID || newOwner.Kind != "ReplicaSet" {
		t.Errorf("replacement owner %+v: want the evicted pod's ReplicaSet %+v", newOwner, oldOwner)
	}
	var scheduled bool
	for _, c := range replacement.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			scheduled = true
		}
	}
	if !scheduled {
		t.Errorf("replacement has no PodScheduled=True condition: the scheduler did not place it")
	}
}

// TestTerminationTiming checks the simulated kubelet's shutdown: a deleted pod
// stays Terminating for its grace period, or less when it exits sooner.
func TestTerminationTiming(t *testing.T) {
	t.Parallel()
	env := sandboxtest.New(t)
	pool := fixture.KarpenterPool(sandboxtest.UniqueName("grace"), 1)
	nodes := env.CreateNodes(t, pool)
	onNode := fixture.OnNode(nodes[0].Name)

	cases := []struct {
		name     string
		opts     []fixture.PodOption
		deleteIn *int64 // grace period passed on delete, nil for the pod's own
		min, max time.Duration
	}{
		{name: "grace-20s", opts: []fixture.PodOption{fixture.GracePeriod(20)}, min: 18 * time.Second, max: 26 * time.Second},
		{name: "exits-after-3s", opts: []fixture.PodOption{fixture.GracePeriod(60), fixture.ExitsAfter(3)}, min: 2 * time.Second, max: 8 * time.Second},
		{name: "delete-grace-5s", opts: []fixture.PodOption{fixture.GracePeriod(60)}, deleteIn: ptr.To[int64](5), min: 3 * time.Second, max: 10 * time.Second},
		{name: "exit-capped-by-grace", opts: []fixture.PodOption{fixture.GracePeriod(8), fixture.ExitsAfter(60)}, min: 6 * time.Second, max: 13 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env.Create(t, fixture.Pod(env.Namespace, tc.name, append(tc.opts, onNode)...))
			env.WaitForPods(t, "app="+tc.name, 1)
			ctx := context.Background()
			start := time.Now()
			if err := env.Client.CoreV1().Pods(env.Namespace).Delete(ctx, tc.name, metav1.DeleteOptions{GracePeriodSeconds: tc.deleteIn}); err != nil {
				t.Fatalf("deleting: %v", err)
			}
			var gone time.Duration
			env.WaitFor(t, tc.max+10*time.Second, "the pod to be gone", func(ctx context.Context) (bool, error) {
				p, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, tc.name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					gone = time.Since(start)
					return true, nil
				}
				if err == nil && p.DeletionTimestamp == nil {
					t.Fatalf("pod not marked Terminating after delete")
				}
				return false, err
			})
			if gone < tc.min || gone > tc.max {
				t.Errorf("pod gone after %s: want between %s and %s", gone.Round(100*time.Millisecond), tc.min, tc.max)
			}
		})
	}

	t.Run("finalizer-holds", func(t *testing.T) {
		t.Parallel()
		const finalizer = "sluice.dev/test-hold"
		// "unheld" is "held" without the finalizer, deleted after it with a
		// longer grace period: the kubelet's turn at it comes later, so once
		// it is gone the kubelet has had its turn at "held" too, however
		// slow the machine.
		env.Create(t,
			fixture.Pod(env.Namespace, "held", onNode, fixture.GracePeriod(1), fixture.Finalizer(finalizer)),
			fixture.Pod(env.Namespace, "unheld", onNode, fixture.GracePeriod(3)))
		env.WaitForPods(t, "app=held", 1)
		env.WaitForPods(t, "app=unheld", 1)
		ctx := context.Background()
		ends := map[string]time.Time{}
		for _, name := range []string{"held", "unheld"} {
			if err := env.Client.CoreV1().Pods(env.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting %s: %v", name, err)
			}
			p, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.DeletionTimestamp == nil {
				t.Fatalf("%s after delete: want it Terminating, got %v", name, err)
			}
			ends[name] = p.DeletionTimestamp.Time
		}
		if !ends["unheld"].After(ends["held"]) {
			t.Fatalf("grace periods end at %s (held) and %s (unheld): want unheld's later", ends["held"], ends["unheld"])
		}
		env.WaitFor(t, 30*time.Second, "the pod without a finalizer to be gone", func(ctx context.Context) (bool, error) {
			_, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, "unheld", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		if _, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, "held", metav1.GetOptions{}); err != nil {
			t.Fatalf("pod with a finalizer: want it still Terminating after the kubelet removed a pod whose grace period ended later, got %v", err)
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := env.Client.CoreV1().Pods(env.Namespace).Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("removing the finalizer: %v", err)
		}
		env.WaitFor(t, 10*time.Second, "the pod to be gone once its finalizer is removed", func(ctx context.Context) (bool, error) {
			_, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, "held", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
}
