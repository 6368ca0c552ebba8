package maintenance_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
)

// A person drains one node of a pool with `sluice drain` while the controller
// drains another for a maintenance event, and one PDB covers pods on both.
// The two drains run in different processes and share no memory: what they
// share is the budget the API server keeps, and the drain engine must spend
// it only through evictions (never a delete before a deadline), so together
// they never take more pods than the budget allows. A watch of the pods sees
// every state they pass through and checks the budget in each.
func TestAPersonAndTheControllerNeverOverspendOneBudget(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	ns := s.env.Namespace
	tier := fixture.Label("tier", "web")
	pace := []fixture.PodOption{s.onPool, tier, fixture.StartsAfter(4), fixture.GracePeriod(5), fixture.ExitsAfter(1)}
	// web-a lands on the scene's node (the only one of the pool yet), web-b
	// on the person's node, which it prefers; replacements go anywhere.
	s.env.Create(t, fixture.Deployment(ns, "web-a", 2, pace...))
	s.env.WaitForPods(t, "app=web-a", 2)
	person := s.env.CreateNodes(t, fixture.AKSPool(s.id+"-b", 1, fixture.WithLabels(map[string]string{labelPool: s.id})))[0].Name
	s.env.Create(t, fixture.Deployment(ns, "web-b", 2, append(pace, prefer(person))...))
	for _, p := range s.env.WaitForPods(t, "tier=web", 4) {
		if want := map[string]string{"web-a": s.node, "web-b": person}[p.Labels[fixture.LabelApp]]; p.Spec.NodeName != want {
			t.Fatalf("pod %s is on %s; the test needs it on %s", p.Name, p.Spec.NodeName, want)
		}
	}
	s.env.Create(t, fixture.PDB(ns, "web", "", fixture.SelectLabels(map[string]string{"tier": "web"}), fixture.MinAvailable("3")))
	s.env.WaitForPDB(t, "web", 4)
	s.addSpare(t)
	w := watchHealthy(t, s.env, "tier=web")
	startController(t, s.env)

	s.azure.Schedule(azure.RawEvent{EventID: "redeploy-11", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{vmName(t, s)},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(5 * time.Minute)), EventSource: "Platform", DurationInSeconds: -1})
	s.waitForReason(t, 15*time.Second, "DrainStarted")
	if left := w.countOn(s.node); left == 0 {
		t.Fatalf("the controller's drain ended before the person's began; the test needs them at once")
	}
	d, err := drain.New(s.env.Client, clock.RealClock{}, drain.Options{IgnoreDaemonSets: true, Holder: "alice"}, drain.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	report, err := d.Drain(context.Background(), []string{person})
	if err != nil || !report.Drained() {
		t.Fatalf("alice's drain: %v %+v", err, report)
	}
	s.waitForPhase(t, 90*time.Second, mcontroller.PhaseDrained)

	least, evicted := w.result()
	t.Logf("fewest healthy pods seen: %d of 4 (minAvailable 3); pods that left: %d", least, evicted)
	if evicted < 4 {
		t.Errorf("%d pods of the budget left their nodes; want the 4 on the two drained nodes", evicted)
	}
	if least < 3 {
		t.Errorf("the budget's pods fell to %d healthy; minAvailable is 3: the two drains spent more than it allows", least)
	}
}

// prefer makes the pods prefer the node, without requiring it.
func prefer(node string) fixture.PodOption {
	return func(t *corev1.PodTemplateSpec) {
		t.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	}
}

// healthWatch follows every state a set of pods passes through, in the order
// the API server wrote them, and keeps the fewest healthy ones seen: Ready and
// not terminating, as the disruption controller counts them.
type healthWatch struct {
	mu       sync.Mutex
	pods     map[string]*corev1.Pod
	least    int
	departed map[string]bool // pods seen terminating or deleted
}

func watchHealthy(t *testing.T, env *sandboxtest.Env, selector string) *healthWatch {
	t.Helper()
	w := &healthWatch{pods: map[string]*corev1.Pod{}, least: 1 << 30, departed: map[string]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace(env.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := factory.Core().V1().Pods().Informer()
	set := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			w.record(p.Name, p)
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				w.record(p.Name, nil)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, reg.HasSynced) {
		t.Fatal("the pod watch did not sync")
	}
	w.mu.Lock()
	w.least = w.healthyLocked() // the initial list arrives one pod at a time
	w.mu.Unlock()
	return w
}

// record applies one watched change (pod nil: deleted) and counts the state
// it leads to.
func (w *healthWatch) record(name string, pod *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pod == nil || pod.DeletionTimestamp != nil {
		w.departed[name] = true
	}
	if pod == nil {
		delete(w.pods, name)
	} else {
		w.pods[name] = pod
	}
	if healthy := w.healthyLocked(); healthy < w.least {
		w.least = healthy
	}
}

func (w *healthWatch) healthyLocked() int {
	healthy := 0
	for _, p := range w.pods {
		if p.DeletionTimestamp == nil && sandboxtest.PodReady(p) {
			healthy++
		}
	}
	return healthy
}

// countOn counts the pods on node that are not terminating.
func (w *healthWatch) countOn(node string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, p := range w.pods {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// result is the fewest healthy pods seen and how many pods departed.
func (w *healthWatch) result() (least, departed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.least, len(w.departed)
}
