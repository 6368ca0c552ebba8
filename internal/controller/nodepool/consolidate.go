package nodepool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/consolidation"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Defaults of the consolidation options.
const (
	DefaultValidationDelay = 15 * time.Second
	DefaultPassInterval    = 10 * time.Second
)

// decision is a command waiting for its revalidation.
type decision struct {
	cmd *consolidation.Command
	key string
	at  time.Time
}

// consolidate is the remove methods' pass (Empty, Underutilized): it runs a
// consolidation pass over the pool when one is due, and carries out a
// command that a second pass, validationDelay later, made again. It returns
// how long until it wants to look again.
func (c *Controller) consolidate(ctx context.Context, pool *v1alpha1.NodePool, v *view, l *ledger, now time.Time) (time.Duration, error) {
	if why, passing := consolidationOff(pool, v, l); why != "" {
		c.stopConsolidating(ctx, pool, v, why, passing)
		return 0, nil
	}
	c.mu.Lock()
	pending, last := c.pending[pool.Name], c.lastPass[pool.Name]
	c.mu.Unlock()
	due := last.Add(c.opts.PassInterval)
	if pending != nil {
		due = pending.at.Add(c.opts.ValidationDelay)
	}
	if now.Before(due) {
		return due.Sub(now), nil
	}
	allowed, err := consolidation.Allowed(pool, v.Size, v.Disrupting, now)
	if err != nil {
		return c.opts.PassInterval, err
	}
	seen := c.seen(pool, allowed, now)
	c.mu.Lock()
	quiet, wasQuiet := c.quiet[pool.Name]
	c.mu.Unlock()
	if pending == nil && wasQuiet && quiet.holds(seen) {
		return c.opts.PassInterval, nil
	}
	in, err := c.consolidationInput(ctx, pool, v, allowed, now)
	if err != nil {
		return c.opts.PassInterval, err
	}
	plan, confirmed, moved := c.look(in, pending)
	if !c.opts.DryRun {
		c.steer(ctx, v.Nodes, plan.Next)
	}
	cmd := plan.Command
	c.mu.Lock()
	c.lastPass[pool.Name] = now
	if cmd == nil && seen.seq != 0 {
		c.quiet[pool.Name] = seen.quietUntil(plan, c.opts.ValidationDelay)
	} else {
		delete(c.quiet, pool.Name)
	}
	c.mu.Unlock()
	if moved != "" {
		c.drop(pool.Name, moved)
	}
	switch {
	case confirmed:
	case cmd == nil:
		return c.opts.PassInterval, nil
	default:
		c.mu.Lock()
		c.pending[pool.Name] = &decision{cmd: cmd, key: cmd.Key(), at: now}
		c.mu.Unlock()
		c.opts.Metrics.consolidation(pool.Name, string(cmd.Kind), "decided")
		c.opts.Log.Info("consolidation decided; acting once it still holds", "nodepool", pool.Name, "after", c.opts.ValidationDelay, "command", cmd.String())
		return c.opts.ValidationDelay, nil
	}
	c.mu.Lock()
	delete(c.pending, pool.Name)
	c.mu.Unlock()
	if c.opts.DryRun {
		c.wouldAct(pool, cmd.Reason, "carry out "+cmd.String())
		return c.opts.PassInterval, nil
	}
	if err := c.act(ctx, pool, v, cmd, now); err != nil {
		c.opts.Metrics.consolidation(pool.Name, string(cmd.Kind), "failed")
		return c.opts.PassInterval, err
	}
	c.opts.Metrics.consolidation(pool.Name, string(cmd.Kind), "acted")
	// The next round's first look comes as soon as this round is over
	// (consolidationOff stops passes until then), not a pass interval
	// after this one.
	c.mu.Lock()
	delete(c.lastPass, pool.Name)
	c.mu.Unlock()
	return launchingRecheck, nil
}

// look decides the pool's pass. A second look (a decision pending) decides
// at the time it runs, and confirms the decision when it makes it again.
// Otherwise the pass is a first look: a command it makes is carried out
// only if the second look, validationDelay later, makes it again, so it
// counts as candidates the nodes whose consolidateAfter will have run out
// by then, and a round need not wait out consolidateAfter and then the
// validation delay one after the other. A second look that does not
// confirm says why (moved) and looks again as a first look.
func (c *Controller) look(in consolidation.Input, pending *decision) (plan *consolidation.Plan, confirmed bool, moved string) {
	if pending != nil {
		plan = c.decide(in)
		if cmd := plan.Command; cmd == nil {
			moved = "a second look found nothing to consolidate"
		} else if cmd.Key() != pending.key {
			moved = "the cluster moved: a second look decided " + cmd.String()
		} else {
			return plan, true, ""
		}
	}
	in.QualifyBy = in.Now.Add(c.opts.ValidationDelay)
	return c.decide(in), false, moved
}

// decide runs one consolidation pass, timed.
func (c *Controller) decide(in consolidation.Input) *consolidation.Plan {
	start := c.clock.Now()
	plan := consolidation.Decide(in)
	c.opts.Metrics.pass(c.clock.Since(start))
	return plan
}

// consolidationOff says why the pool is not consolidated now, "" when it
// may be (the pass has checked its provider, pause and back-off): it must
// not be off, and the methods before it in the list go first, as does a
// disruption under way. passing is true when the reason passes by itself (a
// round under way) and the next rounds' nodes stay marked meanwhile.
func consolidationOff(pool *v1alpha1.NodePool, v *view, l *ledger) (why string, passing bool) {
	if _, on := pool.DisruptionSpec().ConsolidateAfterDuration(); !on {
		return "consolidateAfter is Never", false
	}
	if len(v.Candidates) > 0 {
		return string(v.Candidates[0].Reason) + " nodes go first (a method before consolidation in the list)", false
	}
	if l.disrupting > v.Disrupting || len(v.Unseen) > 0 {
		return "a disruption is under way", true
	}
	for _, n := range v.Nodes {
		if _, marked := n.Annotations[contract.AnnotationDisruption]; marked || !n.DeletionTimestamp.IsZero() {
			return "a disruption is under way", true
		}
	}
	return "", false
}

// stopConsolidating drops the pool's pending decision, saying why, and,
// unless the reason passes by itself, takes away the steering of later
// rounds.
func (c *Controller) stopConsolidating(ctx context.Context, pool *v1alpha1.NodePool, v *view, why string, passing bool) {
	c.drop(pool.Name, why)
	if !passing && !c.opts.DryRun {
		c.steer(ctx, v.Nodes, nil) // no later rounds to steer for
	}
}

// drop forgets the pool's pending decision, saying why.
func (c *Controller) drop(pool, why string) {
	c.mu.Lock()
	d := c.pending[pool]
	delete(c.pending, pool)
	c.mu.Unlock()
	if d == nil {
		return
	}
	c.opts.Metrics.consolidation(pool, string(d.cmd.Kind), "dropped")
	c.opts.Log.Info("consolidation decision dropped", "nodepool", pool, "command", d.cmd.String(), "why", why)
}

// consolidationInput gathers what a pass reads, from the cache: the part
// of the cluster the pool's pods could move to (consolidation.Scope), and
// the budgets of their namespaces.
func (c *Controller) consolidationInput(ctx context.Context, pool *v1alpha1.NodePool, v *view, allowed map[v1alpha1.DisruptionReason]int, now time.Time) (consolidation.Input, error) {
	// v.cluster is the pass's reading of every node (the informer's own
	// objects): Reconcile and Plan both set it.
	in := consolidation.Input{Pool: pool, Members: v.Nodes, Now: now, LastChurn: c.opts.LastChurn, Allowed: allowed}
	var err error
	if c.opts.HoldsPodTerms != nil {
		in.Nodes, in.Pods, err = consolidation.ScopeWith(v.Nodes, v.cluster, c.opts.PodsOn, c.opts.HoldsPodTerms)
	} else {
		in.Nodes, in.Pods, err = consolidation.Scope(v.Nodes, v.cluster, c.opts.PodsOn)
	}
	if err != nil {
		return consolidation.Input{}, fmt.Errorf("listing pods: %w", err)
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.kube.List(ctx, &pdbs, client.UnsafeDisableDeepCopy); err != nil {
		return consolidation.Input{}, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	budgets := make([]*policyv1.PodDisruptionBudget, len(pdbs.Items))
	for i := range pdbs.Items {
		budgets[i] = &pdbs.Items[i]
	}
	in.PDBs = consolidation.BudgetsIn(budgets, in.Pods)
	return in, nil
}

// act carries out a command through the nodes' records: each node is marked
// (it counts against the budget from then on), then deleted at once when
// nothing replaces it, or once the replacement, asked for by name, is Ready.
func (c *Controller) act(ctx context.Context, pool *v1alpha1.NodePool, v *view, cmd *consolidation.Command, now time.Time) error {
	byName := map[string]*corev1.Node{}
	for _, n := range v.Nodes {
		byName[n.Name] = n
	}
	rec := disruption.Record{Reason: cmd.Reason, Phase: disruption.PhaseRemoving, Since: now, Message: cmd.String()}
	if cmd.Replacement != nil {
		at := now
		rec.Phase, rec.Replacement, rec.InstanceType, rec.LaunchedAt = disruption.PhaseLaunching, provider.NewName(pool.Name), cmd.Replacement.InstanceType, &at
	}
	var marked []*corev1.Node
	for _, name := range cmd.Nodes {
		n := byName[name]
		if n == nil {
			break // not in the view the pass decided on: carry out what was marked
		}
		if err := c.markNode(ctx, n, rec); err != nil {
			if !errors.Is(err, errMarked) && kube.MayHaveApplied(err) {
				c.mark(n.Name, now)
			}
			if len(marked) == 0 {
				return err
			}
			c.opts.Log.Error("marking a node for consolidation; carrying out the command without it", "node", name, "nodepool", pool.Name, "err", err)
			break
		}
		c.mark(n.Name, now)
		c.opts.Metrics.decided(pool.Name, cmd.Reason)
		c.event(n, corev1.EventTypeNormal, "Consolidating", "sluice: "+cmd.String())
		marked = append(marked, n)
	}
	if len(marked) == 0 {
		return nil
	}
	c.event(pool, corev1.EventTypeNormal, "Consolidating", "sluice: "+cmd.String())
	c.opts.Log.Info("consolidating", "nodepool", pool.Name, "command", cmd.String())
	if cmd.Replacement != nil {
		return c.launch(ctx, pool, marked[0], rec, now)
	}
	var errs []error
	for _, n := range marked {
		errs = append(errs, c.remove(ctx, n))
	}
	return errors.Join(errs...)
}

// remove deletes a node consolidation took away without a replacement; the
// deletion controller drains it and deletes its machine. Until that
// controller has put its finalizer on the node a delete would not drain it:
// the node waits (advanceAll tries again).
func (c *Controller) remove(ctx context.Context, n *corev1.Node) error {
	if !slices.Contains(n.Finalizers, contract.FinalizerTermination) || !n.DeletionTimestamp.IsZero() {
		return nil
	}
	uid := n.UID
	if err := c.kube.Delete(ctx, n, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting consolidated node %s: %w", n.Name, err)
	}
	return nil
}

// quietRecheck is the longest a pass that found nothing is trusted without
// running again: a guard against a change the count of changes misses.
const quietRecheck = 5 * time.Minute

// passInputs is what a pass depends on besides the cluster's objects, and
// the count of changes to those: a pass with the same inputs decides the
// same.
type passInputs struct {
	seq     uint64 // Changes.Seq; 0 when changes are not counted
	pool    poolRead
	allowed map[v1alpha1.DisruptionReason]int
	now     time.Time
}

// poolRead is what a pass reads of its pool (consolidation.Decide): its
// disruption settings, its template (the replacement's shape) and its
// annotations (do-not-disrupt). An edit of anything else (a limit, a
// maintenance action) does not make the pass decide otherwise.
type poolRead struct {
	disruption  *v1alpha1.DisruptionSpec
	template    *v1alpha1.NodeTemplate
	annotations map[string]string
}

// quietPass is what a pool's last pass that found nothing saw, and until
// when the same inputs mean the same answer.
type quietPass struct {
	passInputs
	until time.Time
}

func (c *Controller) seen(pool *v1alpha1.NodePool, allowed map[v1alpha1.DisruptionReason]int, now time.Time) passInputs {
	in := passInputs{pool: poolRead{pool.Spec.Disruption, pool.Spec.Template, pool.Annotations}, allowed: allowed, now: now}
	if c.opts.Changes != nil {
		in.seq = c.opts.Changes()
	}
	return in
}

// quietUntil is the pass's inputs, trusted until the first of its blockers
// lapses by itself (a node's consolidateAfter, a do-not-disrupt's end) or
// quietRecheck. The passes the quiet pass stands in for are first looks,
// which count a node as a candidate lookAhead before its consolidateAfter
// runs out (Input.QualifyBy): for them that blocker lapses lookAhead
// early. A pass that looked ahead itself is no exception: it judged each
// node's consolidateAfter at its own now+lookAhead, and a later first look
// judges it later.
func (in passInputs) quietUntil(plan *consolidation.Plan, lookAhead time.Duration) quietPass {
	until := in.now.Add(quietRecheck)
	for _, b := range plan.Blocked {
		lapse := b.Until
		if b.Reason == consolidation.BlockedRecent {
			lapse = lapse.Add(-lookAhead)
		}
		if !b.Until.IsZero() && lapse.Before(until) {
			until = lapse
		}
	}
	return quietPass{passInputs: in, until: until}
}

// holds says whether a pass with these inputs would find nothing again.
func (q quietPass) holds(in passInputs) bool {
	return in.seq != 0 && in.seq == q.seq && in.pool.same(q.pool) &&
		maps.Equal(in.allowed, q.allowed) && in.now.Before(q.until)
}

func (r poolRead) same(o poolRead) bool {
	return equality.Semantic.DeepEqual(r.disruption, o.disruption) && equality.Semantic.DeepEqual(r.template, o.template) &&
		maps.Equal(r.annotations, o.annotations)
}
