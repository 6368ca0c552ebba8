package nodepool

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/consolidation"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// ledger is what one pass has spent of a pool's budgets. The methods run in
// the order of disruption.Methods, and each chooses within what the earlier
// ones left.
type ledger struct {
	// disrupting counts the pool's nodes out of service, those chosen in
	// this pass included.
	disrupting int
	// pending counts the machines asked for that are not nodes yet.
	pending int
	// halted is set by a method that stopped the pass for the whole pool:
	// the provider refused, the pool's limits leave no room, or a write's
	// answer was lost. The later methods choose nothing more.
	halted bool
}

// disrupt is the pool's pass: the replacements under way move along, then
// every method runs, in the list's order, spending one ledger. It returns how
// long until it wants to look again.
func (c *Controller) disrupt(ctx context.Context, pool *v1alpha1.NodePool, v *view, now time.Time) (time.Duration, error) {
	if !pool.Spec.Provider.Manages() || !c.machines.Serves(pool.Spec.Provider.Name) {
		c.report(pool, v)
		c.stopConsolidating(ctx, pool, v, "no provider sluice runs", false)
		return 0, nil
	}
	wait, pending, errs := c.advanceAll(ctx, pool, v, now)
	w, err := c.observeHealth(ctx, pool, v, now)
	wait, errs = sooner(wait, w), appendErr(errs, err)
	if why := pausedBy(pool); why != "" {
		c.stopConsolidating(ctx, pool, v, "paused by "+why, false)
		return wait, errors.Join(errs...)
	}
	if w, refused := c.backingOff(pool.Name, now); refused {
		c.stopConsolidating(ctx, pool, v, "the provider refused a machine; backing off", true)
		return sooner(wait, w), errors.Join(errs...)
	}
	l := &ledger{disrupting: v.Disrupting, pending: pending}
	consolidated := false
	for _, m := range disruption.Methods {
		if l.halted {
			break
		}
		var w time.Duration
		var err error
		switch m.Mode {
		case disruption.ModeRepair:
			w, err = c.repair(ctx, pool, v, l, now)
		case disruption.ModeReboot:
			w, err = c.rebootRequired(ctx, pool, v, l, now)
		case disruption.ModeSurge:
			w, err = c.upgrade(ctx, pool, v, l, now)
		case disruption.ModeReplaceFirst:
			w, err = c.replaceFirst(ctx, pool, v, m.Reason, l, now)
		case disruption.ModeRemove:
			// One consolidation pass decides for every remove method
			// (Empty and Underutilized): it weighs them together.
			if consolidated {
				continue
			}
			consolidated = true
			if c.planned != nil {
				c.planConsolidation(pool, v, l)
				continue
			}
			w, err = c.consolidate(ctx, pool, v, l, now)
		}
		wait, errs = sooner(wait, w), appendErr(errs, err)
		if _, refused := c.backingOff(pool.Name, c.clock.Now()); refused {
			l.halted = true
		}
	}
	// A refusal in this pass: look again when its backoff ends, whatever
	// else happens (a cloud that asked for a Retry-After is not asked
	// sooner, nor left waiting for an unrelated change).
	if w, refused := c.backingOff(pool.Name, c.clock.Now()); refused {
		wait = sooner(wait, w)
	}
	return wait, errors.Join(errs...)
}

// upgrade is the Upgrade method's pass (startUpgrades), spending l.
func (c *Controller) upgrade(ctx context.Context, pool *v1alpha1.NodePool, v *view, l *ledger, now time.Time) (time.Duration, error) {
	chosen, launched, wait, err := c.startUpgrades(ctx, pool, v, l.disrupting, l.pending, now)
	l.disrupting += chosen
	l.pending += launched
	return wait, err
}

// EventWouldAct is the Event a method makes under --dry-run instead of
// acting: its message names the method and the command it would carry out.
const EventWouldAct = "WouldAct"

// wouldAct reports, under --dry-run, what the method would do to obj.
func (c *Controller) wouldAct(obj client.Object, method v1alpha1.DisruptionReason, command string) {
	if c.planned != nil {
		*c.planned = append(*c.planned, Would{Method: method, Object: obj.GetName(), Command: command})
		return
	}
	c.event(obj, corev1.EventTypeNormal, EventWouldAct, fmt.Sprintf("sluice (dry run): %s would %s", method, command))
	c.opts.Log.Info("dry run: would act", "method", method, "object", obj.GetName(), "command", command)
}

// Would is one command a method would carry out now.
type Would struct {
	// Method is the method's reason.
	Method v1alpha1.DisruptionReason `json:"method"`
	// Object is the node it acts on (the pool, for consolidation).
	Object string `json:"object"`
	// Command says what it would do, and why.
	Command string `json:"command"`
}

// Plan is the pass the controller would make over the pool now, as if it
// ran the pool's provider, under --dry-run: each method's commands, in the
// order of the list, each within the budgets the earlier ones left. It
// changes nothing and reads only what it is given (all: every pool; nodes:
// every node; podsOn: a node's pods; consolidate: the command a
// consolidation pass decides now, consolidation.Decide's, nil for none).
func Plan(pool *v1alpha1.NodePool, all []v1alpha1.NodePool, nodes []corev1.Node, podsOn func(string) ([]*corev1.Pod, error),
	consolidate func() *consolidation.Command, now time.Time) ([]Would, error) {
	if !pool.Spec.Provider.Manages() {
		return nil, nil
	}
	var planned []Would
	c := NewController(nil, nil, clock.RealClock{}, planMachines{}, Options{DryRun: true, PodsOn: podsOn})
	c.planned, c.planConsolidate = &planned, consolidate
	v := observe(pool, Members(pool, nodes, all), podsOn, now)
	v.cluster = pointers(nodes)
	if _, err := c.disrupt(context.Background(), pool, v, now); err != nil {
		return planned, err
	}
	return planned, nil
}

// planConsolidation adds, to a plan, the consolidation command the pass
// would decide, when consolidation would run: the controller carries it out
// once a second look, the validation delay later, decides the same.
func (c *Controller) planConsolidation(pool *v1alpha1.NodePool, v *view, l *ledger) {
	if why, _ := consolidationOff(pool, v, l); why != "" || c.planConsolidate == nil {
		return
	}
	if cmd := c.planConsolidate(); cmd != nil {
		c.wouldAct(pool, cmd.Reason, "carry out "+cmd.String()+", once a second look, the validation delay later, decides the same")
	}
}

// planMachines is a plan's provider: it serves every pool and is never asked
// for a machine (a dry run asks for none).
type planMachines struct{}

func (planMachines) Serves(v1alpha1.ProviderName) bool { return true }

func (planMachines) CreateMachine(context.Context, *v1alpha1.NodePool, string) (*provider.Machine, error) {
	return nil, errPlanOnly
}

func (planMachines) GetMachine(context.Context, *v1alpha1.NodePool, string) (*provider.Machine, error) {
	return nil, errPlanOnly
}

func (planMachines) DeleteMachine(context.Context, *v1alpha1.NodePool, string) error {
	return errPlanOnly
}

func (planMachines) ListMachines(context.Context, *v1alpha1.NodePool) ([]*provider.Machine, error) {
	return nil, errPlanOnly
}

func (planMachines) MachineOf(pool *v1alpha1.NodePool, n *corev1.Node) string {
	return provider.NewMachines(nil, nil).MachineOf(pool, n)
}

func (planMachines) NamesOf(n *corev1.Node) []string {
	return provider.NewMachines(nil, nil).NamesOf(n)
}

func (planMachines) CanReboot(*v1alpha1.NodePool) bool { return true }

func (planMachines) RebootMachine(context.Context, *v1alpha1.NodePool, string) error {
	return errPlanOnly
}

func (planMachines) CheckRegistration(context.Context, *v1alpha1.NodePool) (string, error) {
	return "", errPlanOnly
}

func (planMachines) CheckTemplate(context.Context, *v1alpha1.NodePool) (string, error) {
	return "", errPlanOnly
}

var errPlanOnly = errors.New("a plan asks no provider for anything")
