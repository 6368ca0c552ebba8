package capihook

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/pkg/contract"
)

// condition sets sluice's condition on the Machine's status, where
// `kubectl describe machine` and `clusterctl describe cluster
// --show-conditions Machine` show it. It is applied server-side under
// sluice's own field manager, so it merges with Cluster API's conditions
// (a list keyed by type) instead of replacing them. A failure is logged:
// the report is a courtesy, the drain goes on.
func (c *Controller) condition(ctx context.Context, m *unstructured.Unstructured, status metav1.ConditionStatus, reason, msg string) {
	if c.opts.DryRun {
		return
	}
	now := metav1.NewTime(c.clock.Now())
	transition := now
	conds, _, _ := unstructured.NestedSlice(m.Object, "status", "conditions")
	for _, cond := range conds {
		cm, ok := cond.(map[string]any)
		if !ok || cm["type"] != contract.ConditionMachineDrained {
			continue
		}
		if cm["status"] == string(status) && cm["reason"] == reason && cm["message"] == msg {
			return // already says so
		}
		if cm["status"] == string(status) {
			if s, ok := cm["lastTransitionTime"].(string); ok {
				if t, err := time.Parse(time.RFC3339, s); err == nil {
					transition = metav1.NewTime(t)
				}
			}
		}
	}
	apply := machine()
	apply.SetNamespace(m.GetNamespace())
	apply.SetName(m.GetName())
	apply.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": contract.ConditionMachineDrained, "status": string(status), "reason": reason, "message": msg,
		"observedGeneration": m.GetGeneration(), "lastTransitionTime": transition.UTC().Format("2006-01-02T15:04:05Z"),
	}}}
	if err := c.kube.Status().Patch(ctx, apply, client.Apply, client.FieldOwner("sluice"), client.ForceOwnership); err != nil {
		c.opts.Log.Info("could not set sluice's condition on the Machine", "machine", m.GetNamespace()+"/"+m.GetName(), "err", err)
	}
}
