package agent

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// A spot preemption gives 30 s to 2 min of notice. The controller cordons a
// node in the write that records its event, but under a mass preemption the
// agent's report can take a second or more to reach the controller's watch
// on a busy API server, and every pod scheduled onto the node meanwhile is
// one more to move. So, like aws-node-termination-handler in IMDS mode, the
// agent cordons its own node in the same write that first reports an event
// that takes the machine away (maintenance.Type.NodeGoesAway).
//
// The cordon is the controller's from the start: it names the event as its
// owner (sluice.dev/cordoned-by=maintenance/<event id>), so the controller
// adopts it when it records the event, takes it back when the event ends,
// and lifts it at once when the node's pool says the event's action is None.
// The write is conditional on the node the agent last saw being schedulable
// (its resourceVersion), and the chart's admission policy only lets the agent
// cordon a schedulable node with such an owner: a cordon placed by a person
// or by `sluice drain` is never claimed. If the conditional write fails for
// any reason the report goes out alone and the controller cordons as before.

// cordonFor returns the event to cordon the node for: a new event in r (one
// the node's current report lacks) that takes the machine away, the one with
// the earliest deadline when there are several. ok is false when the agent
// does not cordon (turned off, the node already cordoned, nothing new).
func (a *Agent) cordonFor(node *corev1.Node, r maintenance.Report) (maintenance.Event, bool) {
	if !a.cfg.CordonInvoluntary || node.Spec.Unschedulable {
		return maintenance.Event{}, false
	}
	// An unreadable report on the node counts as empty: the events in r are
	// then all new, which at worst cordons for one the node already had.
	previous, _, _ := maintenance.ReportOf(node)
	var best *maintenance.Event
	for i := range r.Events {
		e := &r.Events[i]
		if !e.Active() || e.ID == "" || !e.Type.NodeGoesAway() {
			continue
		}
		// Known: on the node already, or cordoned for once (the watch may
		// not show that write yet; after it, the cordon is the controller's).
		if _, known := previous.Find(e.ID); known || a.cordonedFor[e.ID] {
			continue
		}
		if best == nil || !e.Deadline.IsZero() && (best.Deadline.IsZero() || e.Deadline.Before(best.Deadline)) {
			best = e
		}
	}
	if best == nil {
		return maintenance.Event{}, false
	}
	return *best, true
}

// reportAndCordon writes the report and cordons the node for e in one patch,
// conditional on the node still being the one the agent saw. When another
// write came first it reads the node afresh and tries once more, if the
// node still calls for it; when that fails too, or the admission policy
// refuses it, the report is written alone.
func (a *Agent) reportAndCordon(ctx context.Context, node *corev1.Node, r maintenance.Report, report string, e maintenance.Event) error {
	err := a.cordonPatch(ctx, node.ResourceVersion, report, e)
	if apierrors.IsConflict(err) {
		// The watch lags behind the node (a busy API server): look live.
		live, getErr := a.client.CoreV1().Nodes().Get(ctx, a.cfg.Node, metav1.GetOptions{})
		if getErr != nil {
			err = getErr
		} else if again, ok := a.cordonFor(live, r); ok && again.ID == e.ID {
			err = a.cordonPatch(ctx, live.ResourceVersion, report, e)
		} else {
			return a.annotate(ctx, map[string]any{contract.AnnotationMaintenanceEvents: report}) // cordoned meanwhile, by someone
		}
	}
	if m := a.cfg.Metrics; m != nil {
		m.Cordons.WithLabelValues(outcome(err)).Inc()
	}
	if err == nil {
		a.cordonedFor[e.ID] = true
		a.log.Info("cordoned the node: the machine is going away", "id", e.ID, "type", e.Type, "deadline", e.Deadline, "owner", ownership.MaintenanceOwner(e.ID))
		return nil
	}
	a.log.Warn("could not cordon the node with the report; writing the report alone, the controller cordons it", "id", e.ID, "err", err)
	return a.annotate(ctx, map[string]any{contract.AnnotationMaintenanceEvents: report})
}

// cordonPatch is the conditional patch: the report, the cordon and its owner.
func (a *Agent) cordonPatch(ctx context.Context, resourceVersion, report string, e maintenance.Event) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": resourceVersion,
			"annotations":     map[string]any{contract.AnnotationMaintenanceEvents: report, contract.AnnotationCordonedBy: ownership.MaintenanceOwner(e.ID)},
		},
		"spec": map[string]any{"unschedulable": true},
	})
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	if _, err := a.client.CoreV1().Nodes().Patch(ctx, a.cfg.Node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordoning node %s: %w", a.cfg.Node, err)
	}
	return nil
}
