package maintenance_test

import (
	"context"
	"slices"
	"testing"
	"time"

	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// The agent cordons a preempted node in the very write that reports the
// event, before any controller has looked; the controller then owns that
// cordon: it drains the node and, when the event goes away, uncordons it.
func TestTheAgentCordonsAPreemptedNodeAndTheControllerOwnsTheCordon(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", 2, s.onPool, fixture.GracePeriod(5), fixture.ExitsAfter(1)))
	s.env.WaitForPods(t, "", 2)
	s.addSpare(t)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "preempt-a", EventType: "Preempt", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(2 * time.Minute)), EventSource: "Platform", DurationInSeconds: -1})

	// No controller yet: the cordon can only be the agent's.
	s.env.WaitFor(t, 15*time.Second, "the agent's report of preempt-a", func(context.Context) (bool, error) {
		r, _, err := maintenance.ReportOf(s.getNode(t))
		_, ok := r.Find("preempt-a")
		return ok, err
	})
	n := s.getNode(t)
	if !n.Spec.Unschedulable || ownership.CordonedBy(n) != ownership.MaintenanceOwner("preempt-a") {
		t.Fatalf("after the agent's first report: unschedulable=%v cordoned-by=%q; want the report's own write to cordon it for maintenance/preempt-a",
			n.Spec.Unschedulable, n.Annotations[contract.AnnotationCordonedBy])
	}

	startController(t, s.env)
	s.env.WaitFor(t, 30*time.Second, "the node to be empty", func(ctx context.Context) (bool, error) {
		pods, err := s.podsOnNode(ctx)
		return err == nil && len(pods) == 0, err
	})
	s.azure.Finish("preempt-a") // the platform took the event back
	s.waitForReason(t, 15*time.Second, "Uncordoned")
	if n := s.getNode(t); n.Spec.Unschedulable || hasTaint(n) || n.Annotations[contract.AnnotationCordonedBy] != "" {
		t.Errorf("after the event: unschedulable=%v taint=%v cordoned-by=%q; want the controller to take its cordon back",
			n.Spec.Unschedulable, hasTaint(n), n.Annotations[contract.AnnotationCordonedBy])
	}
}

// A pool whose Preempt action is None: the agent cannot know that and
// cordons anyway, and the controller lifts the cordon in the write that
// records the event, moving nobody.
func TestTheControllerLiftsTheAgentsCordonWhenThePoolSaysNone(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", 2, s.onPool, fixture.GracePeriod(5), fixture.ExitsAfter(1)))
	before := s.env.WaitForPods(t, "", 2)
	dyn := installPools(t, s.env)
	createPool(t, dyn, s.id, map[string]any{
		"nodeSelector": map[string]any{"matchLabels": map[string]any{labelPool: s.id}},
		"maintenance":  map[string]any{"actions": map[string]any{"Preempt": "None"}},
	})
	startController(t, s.env)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "preempt-b", EventType: "Preempt", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(2 * time.Minute)), EventSource: "Platform", DurationInSeconds: -1})

	s.waitForReason(t, 20*time.Second, "Uncordoned")
	n := s.getNode(t)
	if n.Spec.Unschedulable || hasTaint(n) || n.Annotations[contract.AnnotationCordonedBy] != "" {
		t.Errorf("unschedulable=%v taint=%v cordoned-by=%q; want the agent's cordon lifted for a pool that says None",
			n.Spec.Unschedulable, hasTaint(n), n.Annotations[contract.AnnotationCordonedBy])
	}
	if ev, phase, ok := mcontroller.PhaseOf(n); !ok || ev != "preempt-b" || phase != mcontroller.PhaseObserved {
		t.Errorf("record: event %q phase %q (recorded %v); want preempt-b Observed", ev, phase, ok)
	}
	if slices.Contains(s.reasons(t), "DrainStarted") {
		t.Errorf("a drain started for an event whose action is None")
	}
	s.samePods(t, before, nil)
}

// The controller was not running while a Preempt came and went (the
// platform took it back): the agent's cordon is left with no record to own
// it, and the controller, once it runs, puts the Ready node back in service.
func TestTheControllerLiftsAnAgentsCordonWhoseEventEndedUnseen(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "preempt-c", EventType: "Preempt", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(2 * time.Minute)), EventSource: "Platform", DurationInSeconds: -1})
	s.env.WaitFor(t, 15*time.Second, "the agent's cordon for preempt-c", func(context.Context) (bool, error) {
		return ownership.CordonedBy(s.getNode(t)) == ownership.MaintenanceOwner("preempt-c"), nil
	})
	s.azure.Finish("preempt-c")
	s.env.WaitFor(t, 15*time.Second, "the report without preempt-c", func(context.Context) (bool, error) {
		r, _, err := maintenance.ReportOf(s.getNode(t))
		_, ok := r.Find("preempt-c")
		return !ok, err
	})
	if n := s.getNode(t); !n.Spec.Unschedulable {
		t.Fatalf("the node was uncordoned before any controller ran")
	}

	startController(t, s.env)
	s.waitForReason(t, 20*time.Second, "Uncordoned")
	if n := s.getNode(t); n.Spec.Unschedulable || n.Annotations[contract.AnnotationCordonedBy] != "" {
		t.Errorf("unschedulable=%v cordoned-by=%q; want the orphaned cordon lifted", n.Spec.Unschedulable, n.Annotations[contract.AnnotationCordonedBy])
	}
}
