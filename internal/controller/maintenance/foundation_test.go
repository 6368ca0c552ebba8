package maintenance_test

// Tests for the controller foundation: who owns a cordon, a broken NodePool,
// a moved deadline, daemons on a cordoned node, blockers always named, and
// replacements that take time to become Ready.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/internal/sandbox/sandboxtest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// A person drains a node with `sluice drain` for their own work; an unrelated
// event comes and goes on it. The controller did not cordon the node, so it
// must not uncordon it.
func TestAPersonsDrainOutlivesAnUnrelatedEvent(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", 2, s.onPool, fixture.GracePeriod(5), fixture.ExitsAfter(1)))
	s.env.WaitForPods(t, "", 2)
	s.addSpare(t)
	startController(t, s.env)

	d, err := drain.New(s.env.Client, clock.RealClock{}, drain.Options{IgnoreDaemonSets: true, Holder: "a-person"}, drain.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	report, err := d.Drain(context.Background(), []string{s.node})
	if err != nil || !report.Drained() {
		t.Fatalf("the person's drain: %v %+v", err, report)
	}
	if by := ownership.CordonedBy(s.getNode(t)); by != ownership.OwnerCLI {
		t.Fatalf("cordoned by %q after sluice drain; want %q", by, ownership.OwnerCLI)
	}

	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "reboot-9", EventType: "Reboot", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(5 * time.Minute)), EventSource: "Platform", DurationInSeconds: 300})
	s.waitForReason(t, 15*time.Second, "MaintenanceScheduled")
	s.azure.Finish("reboot-9")
	s.waitForReason(t, 15*time.Second, "MaintenanceEnded")
	n := s.getNode(t)
	if !n.Spec.Unschedulable || ownership.CordonedBy(n) != ownership.OwnerCLI {
		t.Fatalf("after the event: unschedulable=%v cordoned-by=%q; want the person's cordon left as it was", n.Spec.Unschedulable, ownership.CordonedBy(n))
	}
	if msgs := s.messages(t, "MaintenanceEnded"); len(msgs) != 1 || !strings.Contains(msgs[0], "cordoned by cli") {
		t.Errorf("MaintenanceEnded said %q; want it to say who holds the cordon", msgs)
	}
}

// A NodePool whose selector does not parse affects only itself: the pool
// reports it, and every other pool and node is handled as before.
func TestABrokenNodePoolAffectsOnlyItself(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", 2, s.onPool, fixture.GracePeriod(5), fixture.ExitsAfter(1)))
	before := s.env.WaitForPods(t, "", 2)
	dyn := installPools(t, s.env)
	broken, good := sandboxtest.UniqueName("broken-"), sandboxtest.UniqueName("good-")
	// The schema cannot check label keys inside a CRD; this one does not parse.
	createPool(t, dyn, broken, map[string]any{"nodeSelector": map[string]any{"matchLabels": map[string]any{"not a label key!": "x"}}})
	createPool(t, dyn, good, map[string]any{
		"nodeSelector": map[string]any{"matchLabels": map[string]any{labelPool: s.id}},
		"maintenance":  map[string]any{"actions": map[string]any{"Preempt": "Cordon"}},
	})
	startController(t, s.env)

	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "preempt-9", EventType: "Preempt", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(time.Minute)), EventSource: "Platform", DurationInSeconds: -1})
	// The good pool's policy (Cordon, not the default Drain) applies.
	s.waitForPhase(t, 20*time.Second, mcontroller.PhaseCordoned)
	s.samePods(t, before, nil)

	poolStatus := func(name string) (v1alpha1.NodePoolStatus, error) {
		u, err := dyn.Resource(v1alpha1.NodePoolResource).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return v1alpha1.NodePoolStatus{}, err
		}
		var p v1alpha1.NodePool
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p)
		return p.Status, err
	}
	s.env.WaitFor(t, 15*time.Second, "the broken pool to say so", func(context.Context) (bool, error) {
		st, err := poolStatus(broken)
		c := meta.FindStatusCondition(st.Conditions, "Ready")
		return err == nil && c != nil && c.Status == metav1.ConditionFalse && c.Reason == "InvalidNodeSelector" &&
			strings.Contains(c.Message, "invalid nodeSelector"), err
	})
	s.env.WaitFor(t, 15*time.Second, "the good pool to be Ready with its node", func(context.Context) (bool, error) {
		st, err := poolStatus(good)
		c := meta.FindStatusCondition(st.Conditions, "Ready")
		return err == nil && c != nil && c.Status == metav1.ConditionTrue && st.Nodes == 1, err
	})
	s.env.WaitFor(t, 15*time.Second, "an Event on the broken pool", func(ctx context.Context) (bool, error) {
		list, err := s.env.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", broken).String()})
		return err == nil && len(list.Items) > 0 && list.Items[0].Reason == "InvalidNodeSelector", err
	})
}

// The cloud moves an event earlier (Azure may change NotBefore): the drain's
// deadline follows, so a pod only the deadline can move is moved in time.
func TestTheDrainFollowsAMovedDeadline(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "checkout", 1, s.onPool, fixture.GracePeriod(5), fixture.ExitsAfter(1)),
		fixture.PDB(ns, "checkout", "checkout", fixture.MinAvailable("1")),
	)
	s.env.WaitForPods(t, "", 1)
	s.addSpare(t)
	startController(t, s.env)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "preempt-10", EventType: "Preempt", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(3 * time.Minute)), EventSource: "Platform", DurationInSeconds: -1})
	s.waitForReason(t, 15*time.Second, "DrainStarted")

	moved := time.Now().Add(25 * time.Second).Truncate(time.Second)
	s.azure.Move("preempt-10", rfc1123(moved))
	s.waitForReason(t, 15*time.Second, "DeadlineMoved")
	s.drainedBefore(t, moved) // the old deadline was minutes away
	if !s.podEventHas(t, "checkout", "DeadlineForced") {
		t.Errorf("checkout left without a DeadlineForced event")
	}
}

// The maintenance taint must not keep DaemonSet pods off the node: they
// tolerate the cordon, and a drain leaves them (a CNI or log agent rolled out
// during the event must still land).
func TestDaemonSetPodsStillLandOnACordonedNode(t *testing.T) {
	s := newScene(t, maintenance.SourceAWS)
	startController(t, s.env)
	s.aws.Rebalance(time.Now())
	s.waitForPhase(t, 15*time.Second, mcontroller.PhaseCordoned)
	n := s.getNode(t)
	for _, taint := range n.Spec.Taints {
		if taint.Key == contract.TaintMaintenance && taint.Effect != corev1.TaintEffectPreferNoSchedule {
			t.Errorf("taint %s has effect %s; want PreferNoSchedule", taint.Key, taint.Effect)
		}
	}
	s.env.Create(t, fixture.DaemonSet(s.env.Namespace, "agent", s.onPool))
	s.env.WaitFor(t, 30*time.Second, "the DaemonSet pod Running on the cordoned node", func(ctx context.Context) (bool, error) {
		pods, err := s.podsOnNode(ctx)
		return err == nil && len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning, err
	})
	s.aws.ClearRebalance()
	s.waitForReason(t, 15*time.Second, "Uncordoned")
}

// A drain that does not finish names every pod left and why. By default a
// Redeploy (the machine survives) leaves pods without a controller and pods
// with emptyDir data, and says so.
func TestAnUnfinishedDrainNamesEveryPodLeft(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.load(t)
	s.addSpare(t)
	startController(t, s.env)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "redeploy-9", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(20 * time.Second)), EventSource: "Platform", DurationInSeconds: -1})
	s.waitForReason(t, 45*time.Second, "DrainBlocked")
	msgs := s.messages(t, "DrainBlocked")
	for _, want := range []string{"did not leave", "/naked Unreplicated", "/cache-", "LocalStorage"} {
		if !strings.Contains(msgs[0], want) {
			t.Errorf("DrainBlocked said %q; want it to contain %q", msgs[0], want)
		}
	}
	if started := s.messages(t, "MaintenanceDrain"); len(started) == 0 || !strings.Contains(started[0], "left in place and reported") {
		t.Errorf("MaintenanceDrain said %q; want it to say which pods the policy leaves", started)
	}
	if got := s.azure.Approved(); len(got) != 0 {
		t.Errorf("approved %v while pods were still on the node", got)
	}
}

// Replacements that run a while before they are Ready hold the budget at zero:
// the controller waits for them, as kubectl drain would, and finishes.
func TestSlowStartingReplacementsDrainThroughTheController(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	ns := s.env.Namespace
	s.env.Create(t,
		fixture.Deployment(ns, "web", 3, s.onPool, fixture.StartsAfter(20), fixture.GracePeriod(5), fixture.ExitsAfter(1)),
		fixture.PDB(ns, "web", "web", fixture.MinAvailable("2"), fixture.UnhealthyPodEvictionPolicy(policyv1.IfHealthyBudget)),
	)
	s.env.WaitForPods(t, "", 3)
	s.addSpare(t)
	startController(t, s.env)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "redeploy-10", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(5 * time.Minute)), EventSource: "Platform", DurationInSeconds: -1})
	s.waitForPhase(t, 150*time.Second, mcontroller.PhaseDrained)
	if s.podEventHas(t, "web", "DeadlineForced") {
		t.Errorf("a pod was forced: the wait should have been enough")
	}
	waited := false
	list, err := s.env.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason != "EvictionBlocked" {
			continue
		}
		if strings.Contains(e.Message, string(drain.ReasonPDBDeadlock)) {
			t.Errorf("called a rollout a deadlock: %s", e.Message)
		}
		waited = waited || strings.Contains(e.Message, string(drain.ReasonPDBWaitingForPods)) && strings.Contains(e.Message, "to become Ready")
	}
	if !waited {
		t.Errorf("no Event said the drain was waiting for replacements to become Ready")
	}
}

// messages returns the messages of the node's Events with the reason.
func (s *scene) messages(t *testing.T, reason string) []string {
	t.Helper()
	list, err := s.env.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", s.node).String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// installPools serves the NodePool CRD and returns a client for pools.
func installPools(t *testing.T, env *sandboxtest.Env) dynamic.Interface {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := nodepool.Install(context.Background(), ext); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// createPool creates a NodePool, deleted when the test ends.
func createPool(t *testing.T, dyn dynamic.Interface, name string, spec map[string]any) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "NodePool",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
	if _, err := dyn.Resource(v1alpha1.NodePoolResource).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating NodePool %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(v1alpha1.NodePoolResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// A person's `sluice drain` counts against the controller's caps on nodes
// disrupting at once for as long as it holds its claim on the node: the
// controller sees it, and its voluntary work waits for it (the queue's unit
// tests show the waiting; this shows the controller seeing the drain).
func TestAPersonsDrainCountsAgainstTheControllersCaps(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", 2, s.onPool, fixture.GracePeriod(15), fixture.ExitsAfter(8)))
	s.env.WaitForPods(t, "", 2)
	s.addSpare(t)
	reg := prometheus.NewRegistry()
	startControllerWithRegistry(t, s.env, reg)
	disrupting := func() float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "sluice_termination_disrupting_nodes" && len(f.GetMetric()) == 1 {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}

	d, err := drain.New(s.env.Client, clock.RealClock{}, drain.Options{IgnoreDaemonSets: true, Holder: "alice"}, drain.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		report, err := d.Drain(context.Background(), []string{s.node})
		if err == nil && !report.Drained() {
			err = fmt.Errorf("not drained: %+v", report)
		}
		done <- err
	}()
	s.env.WaitFor(t, 15*time.Second, "the controller to count alice's drain", func(context.Context) (bool, error) {
		return disrupting() == 1, nil
	})
	if err := <-done; err != nil {
		t.Fatalf("alice's drain: %v", err)
	}
	s.env.WaitFor(t, 15*time.Second, "the controller to see alice's drain end", func(context.Context) (bool, error) {
		return disrupting() == 0, nil
	})
}
