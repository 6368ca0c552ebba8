package maintenance_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/aws"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
)

// load puts a realistic mix on the scene's node: a replicated web tier under
// a budget, a naked pod, a pod with emptyDir data, and a single replica whose
// budget forbids any eviction (only the deadline can move it). Pods take a
// second to stop.
func (s *scene) load(t *testing.T) { s.loadMix(t, true) }

// loadReplicated is load without the pods a maintenance drain leaves by
// default when the machine survives the event (no controller, emptyDir data).
func (s *scene) loadReplicated(t *testing.T) { s.loadMix(t, false) }

func (s *scene) loadMix(t *testing.T, unmanaged bool) {
	t.Helper()
	ns := s.env.Namespace
	quick := []fixture.PodOption{s.onPool, fixture.GracePeriod(10), fixture.ExitsAfter(1)}
	objs := []runtime.Object{
		fixture.Deployment(ns, "web", 4, quick...),
		fixture.PDB(ns, "web", "web", fixture.MaxUnavailable("1")),
		fixture.Deployment(ns, "checkout", 1, quick...),
		fixture.PDB(ns, "checkout", "checkout", fixture.MinAvailable("1")),
	}
	pods := 5
	if unmanaged {
		objs = append(objs, fixture.Pod(ns, "naked", quick...), fixture.Deployment(ns, "cache", 1, append(quick, fixture.EmptyDir())...))
		pods += 2
	}
	s.env.Create(t, objs...)
	s.env.WaitForPods(t, "", pods)
}

// drainedBefore waits until no pod of the test is left on the node and
// fails if that happened after the limit.
func (s *scene) drainedBefore(t *testing.T, limit time.Time) {
	t.Helper()
	s.env.WaitFor(t, time.Until(limit)+5*time.Second, "the node to be empty", func(ctx context.Context) (bool, error) {
		pods, err := s.podsOnNode(ctx)
		return err == nil && len(pods) == 0, err
	})
	if now := time.Now(); now.After(limit) {
		t.Fatalf("the node emptied at %s, after the event's NotBefore %s", now.Format(time.RFC3339), limit.Format(time.RFC3339))
	}
}

func TestAzurePreemptWithThirtySecondsNoticeDrainsInTimeAndApproves(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.load(t)
	s.addSpare(t)
	startController(t, s.env)

	notBefore := time.Now().Add(30 * time.Second).Truncate(time.Second)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "preempt-1", EventType: "Preempt", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(notBefore), EventSource: "Platform", DurationInSeconds: -1})

	s.drainedBefore(t, notBefore)
	n := s.getNode(t)
	if !n.Spec.Unschedulable || !hasTaint(n) {
		t.Errorf("node unschedulable=%v taint=%v; want cordoned and tainted", n.Spec.Unschedulable, hasTaint(n))
	}
	s.waitForReason(t, 15*time.Second, "EventApproved")
	if got := s.azure.Approved(); !slices.Equal(got, []string{"preempt-1"}) {
		t.Errorf("approved %v; want [preempt-1]", got)
	}
	reasons := s.reasons(t)
	for _, want := range []string{"MaintenanceScheduled", "CordonStarted", "DrainStarted", "DrainCompleted", "EventApproved"} {
		if !slices.Contains(reasons, want) {
			t.Errorf("node events %v lack %s", reasons, want)
		}
	}
	if n := count(reasons, "DrainStarted"); n != 1 {
		t.Errorf("%d drains started; want 1 (a finished drain must not be mistaken for a dead one)", n)
	}
	// checkout's budget allows no eviction: only the deadline moved it.
	if !s.podEventHas(t, "checkout", "DeadlineForced") {
		t.Errorf("checkout left without a DeadlineForced event")
	}
}

func TestAzureFreezeAndRebootChangeNothingButOptInPods(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	ns := s.env.Namespace
	quick := []fixture.PodOption{s.onPool, fixture.GracePeriod(5), fixture.ExitsAfter(1)}
	s.env.Create(t,
		fixture.Deployment(ns, "steady", 2, quick...),
		fixture.Deployment(ns, "latency", 1, append(quick, fixture.Label(contract.LabelEvictOnFreeze, "true"))...),
		fixture.Deployment(ns, "aks-latency", 1, append(quick, fixture.Label("remediator.kubernetes.azure.com/onFreeze", "true"))...),
	)
	before := s.env.WaitForPods(t, "", 4)
	s.addSpare(t)
	startController(t, s.env)
	vm := vmName(t, s)

	// Reboot: recorded, announced, nothing moves.
	s.azure.Schedule(azure.RawEvent{EventID: "reboot-1", EventType: "Reboot", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(5 * time.Minute)), EventSource: "Platform", DurationInSeconds: 300})
	s.waitForReason(t, 10*time.Second, "MaintenanceScheduled")
	// The write that records an event also cordons for it, if its action
	// says so: once the record is there, a Reboot's decision has been made.
	s.waitForPhase(t, 10*time.Second, mcontroller.PhaseObserved)
	if n := s.getNode(t); n.Spec.Unschedulable || hasTaint(n) {
		t.Fatalf("a Reboot cordoned or tainted the node")
	}
	s.samePods(t, before, nil)
	s.azure.Finish("reboot-1")
	s.env.WaitFor(t, 10*time.Second, "the Reboot record to clear", func(context.Context) (bool, error) {
		_, _, ok := mcontroller.PhaseOf(s.getNode(t))
		return !ok, nil
	})

	// Freeze: only the two opted-in pods leave.
	s.azure.Schedule(azure.RawEvent{EventID: "freeze-1", EventType: "Freeze", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(2 * time.Minute)), EventSource: "Platform", DurationInSeconds: 5})
	s.waitForPhase(t, 30*time.Second, mcontroller.PhaseDrained)
	s.samePods(t, before, []string{"latency", "aks-latency"})
	s.azure.Finish("freeze-1")
	s.waitForReason(t, 10*time.Second, "Uncordoned")
	if n := s.getNode(t); n.Spec.Unschedulable || hasTaint(n) {
		t.Errorf("the node is still cordoned or tainted after the Freeze")
	}
}

func TestAzureRedeployDrainsApprovesAndUncordonsAfterwards(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.loadReplicated(t)
	s.addSpare(t)
	startController(t, s.env)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "redeploy-1", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(40 * time.Second)), EventSource: "Platform", DurationInSeconds: -1})
	s.waitForReason(t, 45*time.Second, "EventApproved")
	if got := s.azure.Approved(); !slices.Equal(got, []string{"redeploy-1"}) {
		t.Fatalf("approved %v; want [redeploy-1]", got)
	}
	// The platform redeploys the VM: the node goes NotReady, the event
	// disappears, and the node comes back. Only then does sluice uncordon.
	setNotReady(t, s, true)
	s.env.WaitForNodeReady(t, s.node, false)
	s.azure.Finish("redeploy-1")
	// The event is gone but the node is down: it must stay cordoned. The
	// agent's report without the event is what would make the controller
	// act; once it is on the node, the controller has it in hand.
	s.env.WaitFor(t, 10*time.Second, "the agent's report without redeploy-1", func(context.Context) (bool, error) {
		return !strings.Contains(s.getNode(t).Annotations[contract.AnnotationMaintenanceEvents], "redeploy-1"), nil
	})
	s.holds(t, 2*time.Second, "the node stays cordoned while NotReady", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	setNotReady(t, s, false)
	s.waitForReason(t, 30*time.Second, "Uncordoned")
	n := s.getNode(t)
	if n.Spec.Unschedulable || hasTaint(n) || n.Annotations[contract.AnnotationMaintenanceState] != "" {
		t.Errorf("after the Redeploy: unschedulable=%v taint=%v state=%q; want all cleared", n.Spec.Unschedulable, hasTaint(n), n.Annotations[contract.AnnotationMaintenanceState])
	}
}

func TestNodeCordonedByAPersonStaysCordoned(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", 2, s.onPool, fixture.GracePeriod(5), fixture.ExitsAfter(1)))
	s.env.WaitForPods(t, "", 2)
	s.addSpare(t)
	patchNode(t, s, `{"spec":{"unschedulable":true}}`) // a person: kubectl cordon
	startController(t, s.env)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "redeploy-2", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(time.Minute)), EventSource: "Platform", DurationInSeconds: -1})
	s.waitForReason(t, 30*time.Second, "EventApproved")
	s.azure.Finish("redeploy-2")
	s.waitForReason(t, 15*time.Second, "MaintenanceEnded")
	n := s.getNode(t)
	if !n.Spec.Unschedulable {
		t.Errorf("sluice uncordoned a node a person had cordoned")
	}
	if hasTaint(n) {
		t.Errorf("sluice left its own taint behind")
	}
	if slices.Contains(s.reasons(t), "Uncordoned") {
		t.Errorf("an Uncordoned event was recorded")
	}
}

func TestAWSCanceledEventUncordons(t *testing.T) {
	s := newScene(t, maintenance.SourceAWS)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", 2, s.onPool, fixture.GracePeriod(5), fixture.ExitsAfter(1)))
	s.env.WaitForPods(t, "", 2)
	s.addSpare(t)
	startController(t, s.env)
	s.aws.ScheduleMaintenance(aws.ScheduledEvent{EventID: "instance-event-0a1b2c3d4e5f60718", Code: "instance-retirement",
		Description: "The instance is running on degraded hardware", State: "active",
		NotBefore: time.Now().Add(10 * time.Minute).UTC().Format(aws.EventTimeLayout)})
	s.waitForPhase(t, 30*time.Second, mcontroller.PhaseDrained)
	if n := s.getNode(t); !n.Spec.Unschedulable {
		t.Fatalf("a retirement did not cordon the node")
	}
	if n := s.getNode(t); n.Annotations[contract.AnnotationMaintenanceApprove] != "" {
		t.Errorf("asked to approve an AWS event, which has no approval call")
	}
	s.aws.SetMaintenanceState("instance-event-0a1b2c3d4e5f60718", "canceled")
	s.waitForReason(t, 15*time.Second, "Uncordoned")
	if n := s.getNode(t); n.Spec.Unschedulable || hasTaint(n) {
		t.Errorf("the canceled event left the node cordoned or tainted")
	}
}

func TestAWSSpotInterruptionDrainsBeforeTheActionTime(t *testing.T) {
	s := newScene(t, maintenance.SourceAWS)
	s.load(t)
	s.addSpare(t)
	startController(t, s.env)
	at := time.Now().Add(30 * time.Second).Truncate(time.Second)
	s.aws.Spot("terminate", at)
	s.drainedBefore(t, at)
	s.waitForPhase(t, 10*time.Second, mcontroller.PhaseDrained)
}

func TestAWSRebalanceRecommendationCordonsOnly(t *testing.T) {
	s := newScene(t, maintenance.SourceAWS)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", 2, s.onPool, fixture.GracePeriod(5), fixture.ExitsAfter(1)))
	before := s.env.WaitForPods(t, "", 2)
	startController(t, s.env)
	s.aws.Rebalance(time.Now())
	s.waitForPhase(t, 15*time.Second, mcontroller.PhaseCordoned)
	if n := s.getNode(t); !n.Spec.Unschedulable || !hasTaint(n) {
		t.Errorf("a rebalance recommendation did not cordon and taint the node")
	}
	s.samePods(t, before, nil) // cordon only: nobody is evicted
	s.aws.ClearRebalance()
	s.waitForReason(t, 15*time.Second, "Uncordoned")
}

func TestGCPPreemptionDrainsWithinThirtySeconds(t *testing.T) {
	s := newScene(t, maintenance.SourceGCP)
	s.load(t)
	s.addSpare(t)
	startController(t, s.env)
	s.gcp.Preempt()
	s.drainedBefore(t, time.Now().Add(30*time.Second))
}

func TestAgentRestartedMidEventResumes(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "slow", 2, s.onPool, fixture.GracePeriod(10), fixture.ExitsAfter(4)))
	s.env.WaitForPods(t, "", 2)
	s.addSpare(t)
	startController(t, s.env)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "redeploy-3", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(time.Minute)), EventSource: "Platform", DurationInSeconds: -1})
	s.waitForReason(t, 15*time.Second, "DrainStarted")
	s.stopAgent() // the agent's pod restarts while its node drains
	s.waitForPhase(t, 30*time.Second, mcontroller.PhaseDrained)
	if got := s.azure.Approved(); len(got) != 0 {
		t.Fatalf("approved %v with no agent running", got)
	}
	s.startAgent(t)
	s.waitForReason(t, 15*time.Second, "EventApproved")
	if got := s.azure.Approved(); !slices.Equal(got, []string{"redeploy-3"}) {
		t.Errorf("approved %v; want [redeploy-3] once", got)
	}
	s.azure.Finish("redeploy-3")
	s.waitForReason(t, 15*time.Second, "Uncordoned")
}

func TestControllerRestartedMidDrainResumes(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "slow", 3, s.onPool, fixture.GracePeriod(10), fixture.ExitsAfter(3)),
		fixture.PDB(s.env.Namespace, "slow", "slow", fixture.MaxUnavailable("1")))
	s.env.WaitForPods(t, "", 3)
	s.addSpare(t)
	stop := startController(t, s.env)
	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "redeploy-4", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(time.Minute)), EventSource: "Platform", DurationInSeconds: -1})
	s.waitForReason(t, 15*time.Second, "DrainStarted")
	stop() // the leader goes away mid-drain; its drain releases the node's claim
	if _, phase, _ := mcontroller.PhaseOf(s.getNode(t)); phase != mcontroller.PhaseDraining {
		t.Fatalf("phase %q after the first controller stopped; want Draining (the test lost its race)", phase)
	}
	startController(t, s.env) // the successor reads the record on the node
	// Generous: on a loaded machine the three one-at-a-time evictions, and a
	// retry should the old drain's claim outlive it, take their time.
	s.waitForReason(t, 90*time.Second, "EventApproved")
	if n := count(s.reasons(t), "MaintenanceScheduled"); n != 1 {
		t.Errorf("%d MaintenanceScheduled events; the successor must resume, not start over", n)
	}
	s.azure.Finish("redeploy-4")
	s.waitForReason(t, 15*time.Second, "Uncordoned")
}

// vmName is the name Scheduled Events uses for the scene's node.
func vmName(t *testing.T, s *scene) string {
	t.Helper()
	vm, err := azure.VMName(s.getNode(t).Spec.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// samePods checks that every pod from before is still on the node, except
// those of the apps that had to leave, which must be gone from it.
func (s *scene) samePods(t *testing.T, before []corev1.Pod, left []string) {
	t.Helper()
	now, err := s.podsOnNode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	here := map[types.UID]bool{}
	for _, p := range now {
		if p.DeletionTimestamp == nil {
			here[p.UID] = true
		}
	}
	for _, p := range before {
		gone := slices.Contains(left, p.Labels["app"])
		if here[p.UID] == gone {
			t.Errorf("pod %s (app %s): on the node=%v, want %v", p.Name, p.Labels["app"], here[p.UID], !gone)
		}
	}
}

// podEventHas reports whether a pod of the app got an Event with the reason.
func (s *scene) podEventHas(t *testing.T, app, reason string) bool {
	t.Helper()
	list, err := s.env.Client.CoreV1().Events(s.env.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == reason && strings.HasPrefix(e.InvolvedObject.Name, app+"-") {
			return true
		}
	}
	return false
}

func patchNode(t *testing.T, s *scene, patch string) {
	t.Helper()
	if _, err := s.env.Client.CoreV1().Nodes().Patch(context.Background(), s.node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setNotReady makes kwok report the node NotReady (or Ready again).
func setNotReady(t *testing.T, s *scene, notReady bool) {
	t.Helper()
	value := `null`
	if notReady {
		value = `"true"`
	}
	patchNode(t, s, `{"metadata":{"annotations":{"sandbox.sluice.dev/not-ready":`+value+`}}}`)
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}
