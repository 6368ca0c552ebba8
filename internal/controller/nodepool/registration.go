package nodepool

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Reading a pool's launch template or model again: a new launch template
// version, or a changed model, changes no pool, so an unchanged pool is read
// again every registrationRecheck; a failed reading after a minute.
const (
	registrationRecheck = 30 * time.Minute
	registrationRetry   = time.Minute
)

// registrationCheck is a pool's last reading.
type registrationCheck struct {
	generation int64
	until      time.Time
	cond       metav1.Condition
}

// registrationCondition is the pool's Registration condition: whether its
// provider reads from the cloud that new machines join with
// contract.TaintUnregistered (docs/design/registration.md). false when the
// pool has none (no provider, or one this controller does not run).
func (c *Controller) registrationCondition(ctx context.Context, pool *v1alpha1.NodePool, now time.Time) (metav1.Condition, bool) {
	if !pool.Spec.Provider.Manages() || !c.machines.Serves(pool.Spec.Provider.Name) {
		return metav1.Condition{}, false
	}
	c.mu.Lock()
	last, ok := c.registration[pool.Name]
	c.mu.Unlock()
	if ok && last.generation == pool.Generation && now.Before(last.until) {
		return last.cond, true
	}
	cond := metav1.Condition{Type: pools.ConditionRegistration, ObservedGeneration: pool.Generation}
	until := now.Add(registrationRecheck)
	why, err := c.machines.CheckRegistration(ctx, pool)
	switch {
	case errors.Is(err, provider.ErrCannotTell):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, pools.ReasonCannotTell, err.Error()
	case err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, pools.ReasonCheckFailed, "reading how the pool's machines register: "+err.Error()
		until = now.Add(registrationRetry)
	case why != "":
		cond.Status, cond.Reason = metav1.ConditionFalse, pools.ReasonTaintMissing
		cond.Message = why + "; they are registered late, so pods may land before the pool's labels and taints: " + pools.RegistrationFix(pool.Spec.Provider.Name)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, pools.ReasonTainted
		cond.Message = "new machines join with the " + contract.TaintUnregistered + " taint and take pods once they have the pool's template"
	}
	if cond.Status != metav1.ConditionUnknown {
		// A failed reading of the cloud's labels keeps what is known of the
		// taint, and is tried again sooner.
		if diff, err := c.machines.CheckTemplate(ctx, pool); err != nil {
			cond.Message += "; the labels and taints the cloud gives new machines could not be read: " + err.Error()
			until = now.Add(registrationRetry)
		} else if diff != "" {
			templateDiffers(&cond, diff)
		}
	}
	c.mu.Lock()
	c.registration[pool.Name] = registrationCheck{generation: pool.Generation, until: until, cond: cond}
	c.mu.Unlock()
	return cond, true
}

// templateDiffers reports that the cloud gives the pool's machines labels or
// taints of its own that the template does not have (an AKS agent pool's):
// sluice registers the template on top, and does not remove what the cloud
// put there, so the template is what should change.
func templateDiffers(cond *metav1.Condition, diff string) {
	msg := "the cloud gives new machines labels and taints of its own that differ from the pool's template: " + diff +
		"; sluice adds the template's at registration and removes none of the cloud's: make the two agree"
	if cond.Status == metav1.ConditionFalse {
		cond.Message += "; " + msg
		return
	}
	cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, pools.ReasonTemplateDiffers, msg
}
