package maintenance

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// FuzzState reads arbitrary values of the controller's own record
// (sluice.dev/maintenance), which anyone who may patch the node can change,
// and of the agent's report it is made from. A record that reads re-encodes
// to one that reads back the same; and the event the controller picks from
// a report is one it can record: the record adopt writes for it reads back,
// with the same drain deadline, so the next pass resumes it instead of
// adopting it again.
func FuzzState(f *testing.F) {
	seen := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	deadline := seen.Add(15 * time.Minute)
	for _, seed := range [][2]string{
		{state{Event: "C7061BAC", Type: maintenance.TypeRedeploy, Source: maintenance.SourceAzure, Pool: "gpu", Action: ActionDrain,
			Deadline: &deadline, Phase: PhaseDraining, Tainted: true, Seen: seen}.encode(),
			maintenance.NewReport(maintenance.SourceAzure, true, []maintenance.Event{{ID: "C7061BAC", Source: maintenance.SourceAzure,
				Type: maintenance.TypeRedeploy, Status: maintenance.StatusScheduled, NotBefore: deadline, Deadline: deadline}}).Encode()},
		{state{Event: "spot-itn", Type: maintenance.TypePreempt, Source: maintenance.SourceAWS, Action: ActionDrain, Phase: PhaseBlocked,
			Blocked: &seen, Approved: true, Seen: seen}.encode(),
			maintenance.NewReport(maintenance.SourceAWS, false, []maintenance.Event{
				{ID: "spot-itn", Source: maintenance.SourceAWS, Type: maintenance.TypePreempt, Status: maintenance.StatusScheduled, Deadline: deadline},
				{ID: "rebalance", Source: maintenance.SourceAWS, Type: maintenance.TypeRebalance, Status: maintenance.StatusScheduled},
				{ID: "user", Source: maintenance.SourceAzure, Type: maintenance.TypeReboot, Status: maintenance.StatusStarted, Initiator: maintenance.InitiatorUser},
			}).Encode()},
		{`{"event": "", "phase": "Drained"}`, `{"events": [{"id": "a", "status": "Scheduled", "type": "Terminate", "deadline": "0000-01-01T00:00:03Z"}]}`},
		{`{"event": "x", "deadline": "9999-12-31T23:59:59-23:59"}`, `{"events": [{"id": "", "status": "Started", "type": "Preempt"}]}`},
		{`{"event": "x", "seen": "0000-01-01T00:00:00Z", "blocked": null}`, `{"events": [{"id": "b", "status": "Completed"}]}`},
		{`{"event": "y"}`, `{"events": [{"id": "c", "status": "Scheduled", "type": "Preempt", "deadline": "0000-01-01T00:00:10-23:59"}]}`},
		{`null`, `{}`}, {`[]`, `null`}, {``, ``},
	} {
		f.Add(seed[0], seed[1])
	}
	pools := []*v1alpha1.NodePool{nil, {ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: v1alpha1.NodePoolSpec{Maintenance: &v1alpha1.MaintenanceSpec{
		Actions:        v1alpha1.MaintenanceActions{Freeze: v1alpha1.ActionDrain, Rebalance: v1alpha1.ActionCordon},
		DeadlineMargin: &metav1.Duration{Duration: 10 * time.Minute}, UserInitiated: v1alpha1.UserInitiatedApprove,
	}}}}
	f.Fuzz(func(t *testing.T, rawState, rawReport string) {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{
			contract.AnnotationMaintenanceState: rawState, contract.AnnotationMaintenanceEvents: rawReport}}}
		if st, ok := stateOf(node); ok {
			event, phase, _ := PhaseOf(node)
			if st.Event == "" || event != st.Event || phase != st.Phase {
				t.Fatalf("record %q reads as %+v; PhaseOf = %q, %q", rawState, st, event, phase)
			}
			recordRoundTrip(t, st)
		}
		report, _, err := maintenance.ReportOf(node)
		if err != nil {
			return
		}
		for _, pool := range pools {
			policy := PolicyOf(pool)
			next := strongest(report.Events, policy)
			if next == nil {
				continue
			}
			if !next.Active() || next.ID == "" {
				t.Fatalf("report %q: strongest picked %+v", rawReport, *next)
			}
			for _, e := range report.Events {
				if e.Active() && e.ID != "" && rank(policy.ActionOf(e)) > rank(policy.ActionOf(*next)) {
					t.Fatalf("report %q: strongest picked %+v over %+v", rawReport, *next, e)
				}
			}
			// The record adopt writes.
			st := state{Event: next.ID, Type: next.Type, Source: next.Source, Pool: policy.Pool, Action: policy.ActionOf(*next),
				Phase: PhaseObserved, Seen: seen, Deadline: deadlineOf(*next, policy), ApproveAtOnce: policy.ApproveAtOnce(*next)}
			back := recordRoundTrip(t, st)
			if !sameTime(back.Deadline, st.Deadline) {
				t.Fatalf("report %q: recorded deadline %v reads back as %v", rawReport, st.Deadline, back.Deadline)
			}
			_ = describe(*next, st, policy)
		}
	})
}

// recordRoundTrip writes st as the controller does, reads it back, and
// requires the same record.
func recordRoundTrip(t *testing.T, st state) state {
	t.Helper()
	enc := st.encode()
	back, ok := stateOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{contract.AnnotationMaintenanceState: enc}}})
	if !ok || back.encode() != enc {
		t.Fatalf("record %+v encodes as %q, which reads back as %+v (%t)", st, enc, back, ok)
	}
	return back
}
