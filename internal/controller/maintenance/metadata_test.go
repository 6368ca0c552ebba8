package maintenance_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcontroller "github.com/sluice-dev/sluice/internal/controller/maintenance"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/maintenance/azure"
	"github.com/sluice-dev/sluice/pkg/maintenance/gcp"
)

// What real metadata services send beyond their documentation (issue 11),
// end to end: emulator, agent, controller, API server.

// A spot VM is preempted while maintenance-event holds a value Google does
// not document: the unknown value is reported on the node and ignored, and
// the preemption is drained within its 30 seconds.
func TestGCPPreemptionWithAnUnknownMaintenanceValueDrainsWithinThirtySeconds(t *testing.T) {
	s := newScene(t, maintenance.SourceGCP)
	s.load(t)
	s.addSpare(t)
	startController(t, s.env)

	s.gcp.SetMaintenanceEvent("SHUTDOWN_ON_HOST_MAINTENANCE")
	s.gcp.Preempt()
	preemptedAt := time.Now()
	s.drainedBefore(t, preemptedAt.Add(gcp.PreemptNotice))

	s.waitForPhase(t, 10*time.Second, mcontroller.PhaseDrained)
	report, ok, err := maintenance.ReportOf(s.getNode(t))
	if err != nil || !ok {
		t.Fatalf("the node's report: %v, %v", ok, err)
	}
	if _, found := report.Find(gcp.IDPreempted); !found {
		t.Errorf("report %+v lacks the preemption", report)
	}
	if len(report.Rejected) != 1 || !strings.Contains(report.Rejected[0], "SHUTDOWN_ON_HOST_MAINTENANCE") {
		t.Errorf("report's rejected parts %q; want the unknown maintenance-event value", report.Rejected)
	}
	s.waitForReason(t, 10*time.Second, "MetadataRejected")
	if n := count(s.reasons(t), "MetadataRejected"); n != 1 {
		t.Errorf("%d MetadataRejected Events for one unknown value; want 1", n)
	}
}

// A Scheduled Events document whose NotBefore is RFC 3339 (as Microsoft's
// mock server sends it) is acted on like the documented RFC 1123 shape, and
// a garbage entry beside it is reported on the node once.
func TestAzureRFC3339NotBeforeDrainsInTimeBesideAGarbageEntry(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.loadReplicated(t)
	s.addSpare(t)
	startController(t, s.env)

	s.azure.SetNotBeforeLayout(time.RFC3339)
	vm := vmName(t, s)
	s.azure.AddRawEntry([]byte(`{"EventId": "garbage-1", "EventType": "Reboot", "Resources": ["` + vm + `"], "DurationInSeconds": "soon"}`))
	notBefore := time.Now().Add(30 * time.Second).Truncate(time.Second)
	s.azure.Schedule(azure.RawEvent{EventID: "redeploy-rfc3339", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(notBefore), EventSource: "Platform", DurationInSeconds: 900})
	s.drainedBefore(t, notBefore)
	s.waitForReason(t, 10*time.Second, "MetadataRejected")
	polled := s.requests.Load()
	s.env.WaitFor(t, 15*time.Second, "three more polls of the same garbage", func(context.Context) (bool, error) {
		return s.requests.Load() >= polled+3, nil
	})
	if n := count(s.reasons(t), "MetadataRejected"); n != 1 {
		t.Errorf("%d MetadataRejected Events for one garbage entry; want 1", n)
	}
}

// A User-initiated event in a pool with userInitiated: Approve is approved
// at once, and the node is left alone.
func TestAzureUserInitiatedEventIsApprovedAtOnceWhenThePoolSaysSo(t *testing.T) {
	s := newScene(t, maintenance.SourceAzure)
	s.env.Create(t, fixture.Deployment(s.env.Namespace, "web", 2, s.onPool, fixture.GracePeriod(5), fixture.ExitsAfter(1)))
	before := s.env.WaitForPods(t, "", 2)
	dyn := installPools(t, s.env)
	createPool(t, dyn, s.id, map[string]any{
		"nodeSelector": map[string]any{"matchLabels": map[string]any{labelPool: s.id}},
		"maintenance":  map[string]any{"userInitiated": "Approve"},
	})
	startController(t, s.env)

	vm := vmName(t, s)
	s.azure.Schedule(azure.RawEvent{EventID: "user-redeploy", EventType: "Redeploy", ResourceType: "VirtualMachine", Resources: []string{vm},
		EventStatus: "Scheduled", NotBefore: rfc1123(time.Now().Add(10 * time.Minute)), EventSource: "User", DurationInSeconds: 0})
	s.waitForReason(t, 20*time.Second, "EventApproved")
	if got := s.azure.Approved(); !slices.Equal(got, []string{"user-redeploy"}) {
		t.Errorf("approved %v; want [user-redeploy]", got)
	}
	if n := s.getNode(t); n.Spec.Unschedulable || hasTaint(n) {
		t.Errorf("the node was cordoned or tainted for an event approved at once")
	}
	s.samePods(t, before, nil)
	list, err := s.env.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == "MaintenanceScheduled" && e.InvolvedObject.Name == s.node &&
			(!strings.Contains(e.Message, "asked for by the VM's owner") || !strings.Contains(e.Message, "impact 0s")) {
			t.Errorf("MaintenanceScheduled says %q; want who asked for it and the impact's length", e.Message)
		}
	}
}
