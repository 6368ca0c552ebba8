package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/simulate"
)

const diffScenarios, diffPodsPer = 10, 200

// TestSimulationAgreesWithKubeScheduler generates small clusters in the
// sandbox and, pod by pod, asks pkg/simulate whether any node can take the
// pod, then lets the real kube-scheduler try. Every answer must agree.
func TestSimulationAgreesWithKubeScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the sandbox")
	}
	var compared, agreed, unschedulable atomic.Int64
	t.Run("scenarios", func(t *testing.T) {
		for i := range diffScenarios {
			t.Run(fmt.Sprintf("seed-%d", i), func(t *testing.T) {
				t.Parallel()
				n, ok, refused := runDiffScenario(t, uint64(i))
				compared.Add(int64(n))
				agreed.Add(int64(ok))
				unschedulable.Add(int64(refused))
			})
		}
	})
	t.Logf("simulation and kube-scheduler agreed on %d of %d pods (%d of them unschedulable)", agreed.Load(), compared.Load(), unschedulable.Load())
	if compared.Load() < diffScenarios*diffPodsPer {
		t.Errorf("compared only %d pods", compared.Load())
	}
}

func runDiffScenario(t *testing.T, seed uint64) (compared, agreed, unschedulable int) {
	env := sandboxtest.New(t)
	rng := rand.New(rand.NewPCG(seed, 42)) //nolint:gosec // reproducible test data
	id := env.Namespace
	scope := map[string]string{"sluice.dev/diff": id}
	ctx := context.Background()

	var names []string
	for i := range 4 + rng.IntN(5) {
		cpu := []string{"2", "4", "8"}[rng.IntN(3)]
		mem := []string{"4Gi", "8Gi", "16Gi"}[rng.IntN(3)]
		labels := map[string]string{"sluice.dev/diff": id, "disk": []string{"ssd", "hdd"}[rng.IntN(2)]}
		opts := []fixture.PoolOption{fixture.InstanceType("gen", cpu, mem), fixture.MaxPods(10 + rng.IntN(30)),
			fixture.Zones([]string{"z1", "z2", "z3"}[rng.IntN(3)]), fixture.WithLabels(labels)}
		if rng.IntN(4) == 0 {
			opts = append(opts, fixture.WithTaints(corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}))
		}
		node := fixture.KarpenterPool(fmt.Sprintf("%s-%d", id, i), 1, opts...).Nodes()[0]
		node.Spec.Unschedulable = rng.IntN(8) == 0
		env.Create(t, node)
		name := node.Name
		names = append(names, name)
		t.Cleanup(func() { _ = env.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	env.WaitFor(t, 60*time.Second, "nodes Ready and without start-up taints", func(ctx context.Context) (bool, error) {
		for _, name := range names {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, taint := range n.Spec.Taints {
				if strings.HasPrefix(taint.Key, "node.kubernetes.io/") && taint.Key != corev1.TaintNodeUnschedulable {
					return false, nil
				}
			}
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if !ready {
				return false, nil
			}
		}
		return true, nil
	})

	for i := range diffPodsPer {
		pod := randomPod(rng, id, fmt.Sprintf("p%03d", i), scope)
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "sluice.dev/diff=" + id})
		if err != nil {
			t.Fatal(err)
		}
		bound, err := env.Client.CoreV1().Pods(id).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var nodePtrs []*corev1.Node
		for i := range nodes.Items {
			nodePtrs = append(nodePtrs, &nodes.Items[i])
		}
		var podPtrs []*corev1.Pod
		for i := range bound.Items {
			podPtrs = append(podPtrs, &bound.Items[i])
		}
		c := simulate.NewCluster(nodePtrs, podPtrs)
		var fits []string
		var why []string
		for _, n := range nodePtrs {
			if f := c.Check(pod, n.Name); len(f) == 0 {
				fits = append(fits, n.Name)
			} else {
				why = append(why, f[0].Detail)
			}
		}

		if _, err := env.Client.CoreV1().Pods(id).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", pod.Name, err)
		}
		scheduled, message := awaitScheduling(t, env, id, pod.Name)
		compared++
		if scheduled == (len(fits) > 0) {
			agreed++
		} else {
			t.Errorf("%s: scheduler scheduled=%v (%s); simulation fits=%v (%s)\npod: %s", pod.Name, scheduled, message, fits, strings.Join(why, "; "), describe(pod))
		}
		if !scheduled {
			unschedulable++
			_ = env.Client.CoreV1().Pods(id).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			env.WaitFor(t, 20*time.Second, "unschedulable pod deleted", func(ctx context.Context) (bool, error) {
				_, err := env.Client.CoreV1().Pods(id).Get(ctx, pod.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		}
	}
	return compared, agreed, unschedulable
}

// awaitScheduling waits until the scheduler binds the pod or marks it
// unschedulable, and returns which, with the scheduler's message.
func awaitScheduling(t *testing.T, env *sandboxtest.Env, ns, name string) (bool, string) {
	t.Helper()
	var scheduled bool
	var message string
	env.WaitFor(t, 30*time.Second, "the scheduler's decision on "+name, func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if p.Spec.NodeName != "" {
			scheduled = true
			return true, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				message = c.Message
				return true, nil
			}
		}
		return false, nil
	})
	return scheduled, message
}

// randomPod makes a pod with a random mix of the constraints the simulation
// models, confined to the scenario's nodes.
func randomPod(rng *rand.Rand, ns, name string, scope map[string]string) *corev1.Pod {
	app := []string{"a", "b", "c", "d"}[rng.IntN(4)]
	cpu := fmt.Sprintf("%dm", 50*(1+rng.IntN(10)))
	mem := fmt.Sprintf("%dMi", 64*(1+rng.IntN(10)))
	opts := []fixture.PodOption{fixture.NodeSelector(scope), fixture.Label("app", app), fixture.Requests(cpu, mem)}
	p := fixture.Pod(ns, name, opts...)
	if rng.IntN(2) == 0 {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule})
	}
	if rng.IntN(3) == 0 {
		p.Spec.NodeSelector["disk"] = []string{"ssd", "hdd"}[rng.IntN(2)]
	}
	if rng.IntN(5) == 0 {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: fixture.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{[]string{"z1", "z2", "z3"}[rng.IntN(3)]}}}}}}}}
	}
	if rng.IntN(10) == 0 {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: int32(8080 + rng.IntN(2))}}
	}
	term := func(target, key string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": target}}, TopologyKey: key}
	}
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	switch rng.IntN(7) {
	case 0:
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term(app, fixture.LabelHostname)}}
	case 1:
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			term([]string{"a", "b", "c", "d"}[rng.IntN(4)], fixture.LabelZone)}}
	case 2:
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: int32(1 + rng.IntN(2)), TopologyKey: fixture.LabelZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	case 3:
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term(app, fixture.LabelZone)}}
	}
	if p.Spec.Affinity.NodeAffinity == nil && p.Spec.Affinity.PodAffinity == nil && p.Spec.Affinity.PodAntiAffinity == nil {
		p.Spec.Affinity = nil
	}
	return p
}

func describe(p *corev1.Pod) string {
	return fmt.Sprintf("labels=%v requests=%v nodeSelector=%v tolerations=%d affinity=%+v spread=%+v ports=%v",
		p.Labels, p.Spec.Containers[0].Resources.Requests, p.Spec.NodeSelector, len(p.Spec.Tolerations), p.Spec.Affinity, p.Spec.TopologySpreadConstraints, p.Spec.Containers[0].Ports)
}
