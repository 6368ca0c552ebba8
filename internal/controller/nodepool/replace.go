package nodepool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/kube"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// launchingRecheck is how often a pool with a replacement on its way looks
// again, beside the node events that wake it.
const launchingRecheck = 5 * time.Second

// replaceFirst is the pass of a replace-first method (Drifted, Expired):
// it chooses the method's candidates, oldest first, within the budgets for
// its reason and what the earlier methods left (l), asking the provider for
// each one's replacement. It returns how long until it wants to look again.
func (c *Controller) replaceFirst(ctx context.Context, pool *v1alpha1.NodePool, v *view, reason v1alpha1.DisruptionReason, l *ledger, now time.Time) (time.Duration, error) {
	var (
		wait   time.Duration
		errs   []error
		chosen []disruption.Candidate
	)
	// Choose first, one by one within the budgets; then write, several at
	// once. Each chosen node counts from its choice, so the writes in flight
	// never spend more than the budget allows.
	for _, cand := range v.Candidates {
		if cand.Reason != reason {
			continue // another method's
		}
		ok, until, err := c.eligible(pool, v, cand.Node, now)
		wait = sooner(wait, until)
		if err != nil {
			errs = append(errs, err)
		}
		if !ok {
			continue
		}
		a, err := v.AllowedAfter(cand.Reason, l.disrupting-v.Disrupting, now)
		if err != nil {
			return wait, errors.Join(append(errs, err)...)
		}
		if a.Nodes < 1 {
			break // the budget for this reason is spent; the next method's may not be
		}
		// Replacement first needs room for one more machine.
		if over := overPoolLimits(pool, v, cand.Node, l.pending); over != "" {
			c.event(pool, corev1.EventTypeNormal, "LimitReached", fmt.Sprintf("sluice: %s nodes wait to be replaced: %s", cand.Reason, over))
			l.halted = true
			break
		}
		chosen = append(chosen, cand)
		l.disrupting++
		l.pending++
	}
	done := slowStart(ctx, len(chosen), c.batch(), func(ctx context.Context, i int) error {
		return c.choose(ctx, pool, chosen[i], now)
	}, func(err error) bool {
		stop, _, _ := chosenOutcome(err)
		return stop
	})
	for _, o := range done {
		if !o.started {
			// Left for the next pass: it no longer counts.
			l.disrupting--
			l.pending--
			wait = sooner(wait, passResumes)
			continue
		}
		stop, next, err := chosenOutcome(o.err)
		errs = appendErr(errs, err)
		if stop {
			// Given back, or its outcome unknown (the mark, if written, is
			// counted as unseen from the next pass on): no more this pass.
			l.halted = true
		}
		if stop || next {
			l.disrupting--
			l.pending--
			continue
		}
		wait = sooner(wait, launchingRecheck)
	}
	return wait, errors.Join(errs...)
}

// eligible says whether a candidate may be chosen now, and when a
// protection that holds it lapses.
func (c *Controller) eligible(pool *v1alpha1.NodePool, v *view, n *corev1.Node, now time.Time) (bool, time.Duration, error) {
	// A replacement is never chosen while the node it replaces is still
	// there (the template changed again mid-rollout): it is counted with
	// that node, and its turn comes after.
	if _, recorded := n.Annotations[contract.AnnotationDisruption]; recorded || !n.DeletionTimestamp.IsZero() ||
		slices.Contains(v.Unseen, n.Name) || v.Replacements[n.Name] {
		return false, 0, nil
	}
	pods, err := v.podsOn(n.Name)
	if err != nil {
		return false, 0, err
	}
	if p := disruption.Protected(pool, n, pods, now); p != nil {
		if !p.Until.IsZero() {
			return false, p.Until.Sub(now) + time.Second, nil
		}
		return false, 0, nil
	}
	return true, 0, nil
}

// advanceAll moves every replacement on its way, even in a pool that has
// since become invalid or paused (a replacement already asked for is seen
// through, or given up). It returns how long until it wants to look again
// and how many machines are on their way and not yet nodes.
func (c *Controller) advanceAll(ctx context.Context, pool *v1alpha1.NodePool, v *view, now time.Time) (time.Duration, int, []error) {
	var (
		wait    time.Duration
		pending int
		errs    []error
	)
	names, asked := map[string]bool{}, map[string]bool{}
	var steps []func(context.Context) error
	for _, n := range v.Nodes {
		names[n.Name] = true
		names[c.machines.MachineOf(pool, n)] = true
		if n.Spec.ProviderID != "" {
			names[provider.IDKey(n.Spec.ProviderID)] = true
		}
	}
	for _, n := range v.Nodes {
		rec, err := c.recordOf(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if rec != nil && c.givenBack(rec.Replacement, now) {
			continue // the cache still shows a record this controller took away
		}
		if w, booted, ok, err := c.advanceStep(ctx, pool, n, rec, names, now); ok {
			wait, errs = sooner(wait, w), appendErr(errs, err)
			pending += booted
			continue
		}
		if rec != nil && rec.Phase == disruption.PhaseRemoving && !c.opts.DryRun {
			steps = append(steps, func(ctx context.Context) error { return c.remove(ctx, n) })
			continue
		}
		if rec == nil || rec.Phase != disruption.PhaseLaunching {
			continue
		}
		if rec.Replacement == "" || !registered(rec, names) {
			if !asked[rec.Replacement] || rec.Replacement == "" {
				pending++
			}
			asked[rec.Replacement] = true // one consolidation may name one replacement on several nodes
		}
		steps = append(steps, func(ctx context.Context) error { return c.advance(ctx, pool, n, rec, now) })
	}
	// Each node's step stands alone (a delete, a check of its machine):
	// they run side by side.
	for _, o := range inParallel(ctx, len(steps), c.batch(), func(ctx context.Context, i int) error { return steps[i](ctx) }) {
		if !o.started {
			wait = sooner(wait, passResumes)
			continue
		}
		errs = appendErr(errs, o.err)
		wait = sooner(wait, launchingRecheck)
	}
	return wait, pending, errs
}

// advanceStep moves a node at one of a method's own steps (an upgrade's, a
// reboot's); ok is false for any other record. booted is 1 when the node's
// replacement was asked for and is not a node yet.
func (c *Controller) advanceStep(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, names map[string]bool, now time.Time) (wait time.Duration, booted int, ok bool, err error) {
	switch {
	case rebootStep(rec):
		wait, err = c.advanceReboot(ctx, pool, n, rec, now)
		return wait, 0, true, err
	case upgradeStep(rec):
		if booting(rec, names) {
			booted = 1
		}
		err = c.advanceUpgrade(ctx, pool, n, rec, now)
		return c.upgradeRecheck(pool, rec, now), booted, true, err
	}
	return 0, 0, false, nil
}

// markChosen writes a chosen node's first record (it counts against the
// budget from now on) and remembers the mark until the cache shows it.
func (c *Controller) markChosen(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec disruption.Record, now time.Time) error {
	if err := c.markNode(ctx, n, rec); err != nil {
		if !errors.Is(err, errMarked) && kube.MayHaveApplied(err) {
			// The API server may have written the mark and lost its
			// answer: count the node as marked until the cache shows
			// which, and choose nothing more this pass.
			c.mark(n.Name, now)
			return fmt.Errorf("%w: %w", errUnknownOutcome, err)
		}
		return err
	}
	c.mark(n.Name, now)
	c.opts.Metrics.decided(pool.Name, rec.Reason)
	return nil
}

// choose marks the candidate as disrupted (it counts against the budget from
// now on) and asks the provider for its replacement.
func (c *Controller) choose(ctx context.Context, pool *v1alpha1.NodePool, cand disruption.Candidate, now time.Time) error {
	n := cand.Node
	why := describe(cand)
	if c.opts.DryRun {
		c.wouldAct(n, cand.Reason, "replace the node, replacement first: "+why)
		return nil
	}
	// The replacement's name is on the record before the provider is
	// asked: a controller killed in between finds the name and asks for
	// (or finds) that machine, and never makes a second one.
	at := now
	rec := disruption.Record{Reason: cand.Reason, Phase: disruption.PhaseLaunching, Since: now, Message: why,
		Replacement: provider.NewName(pool.Name), LaunchedAt: &at}
	if err := c.markChosen(ctx, pool, n, rec, now); err != nil {
		return err
	}
	c.event(n, corev1.EventTypeNormal, "Replacing", "sluice: replacing the node, replacement first: "+why)
	c.opts.Log.Info("replacing node", "node", n.Name, "nodepool", pool.Name, "reason", cand.Reason, "replacement", rec.Replacement, "why", why)
	return c.launch(ctx, pool, n, rec, now)
}

// launch asks the provider for the replacement the node's record names. A
// refusal gives the node back to service at once.
func (c *Controller) launch(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec disruption.Record, now time.Time) error {
	if rec.InstanceType != "" && pool.Spec.Template != nil {
		// Consolidation chose a cheaper type of the template's: the
		// provider is asked for that one alone.
		pool = pool.DeepCopy()
		pool.Spec.Template.InstanceTypes = []string{rec.InstanceType}
	}
	m, err := c.machines.CreateMachine(ctx, pool, rec.Replacement)
	if err != nil {
		c.refused(pool.Name, err, now)
		if aerr := c.abandon(ctx, pool, n, "the provider refused its replacement: "+err.Error()); aerr != nil {
			// The record may still be on the node (the write failed, or
			// its answer was lost): it still counts against the budget,
			// so the pass stops here rather than choose another node in
			// its place; the next pass reads which it is.
			return fmt.Errorf("%w: %w", errUnknownOutcome, aerr)
		}
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	c.recovered(pool.Name)
	c.opts.Log.Info("replacement launched", "node", n.Name, "replacement", m.Name, "nodepool", pool.Name, "instanceType", m.InstanceType)
	c.noteProviderID(ctx, n, rec, m)
	return nil
}

// advance moves a node whose replacement is on its way: once the replacement
// is a Ready node, the old node is deleted (and drained by the termination
// finalizer); a replacement that failed or never joined is given up.
func (c *Controller) advance(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) error {
	if c.opts.DryRun {
		return nil
	}
	deleting := !n.DeletionTimestamp.IsZero()
	if rec.Replacement == "" {
		// Every record names its replacement from its first write: this one
		// was written by hand, or by an older sluice. Give the node back.
		if deleting {
			return nil
		}
		return c.abandon(ctx, pool, n, "its record names no replacement")
	}
	repl, err := c.replacementNode(ctx, pool, rec)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err == nil && initialized(repl, pool.Spec.Template) && !deleting {
		if !slices.Contains(n.Finalizers, contract.FinalizerTermination) {
			// Without the finalizer a delete would not drain the node: wait
			// until the deletion controller has set it.
			return nil
		}
		c.served(ctx, repl, rec, now)
		c.event(n, corev1.EventTypeNormal, "Replaced", fmt.Sprintf("sluice: replacement %s is Ready; deleting this node (drained first)", rec.Replacement))
		uid := n.UID
		if err := c.kube.Delete(ctx, n, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting replaced node %s: %w", n.Name, err)
		}
		return nil
	}
	if err == nil && budget.NodeReady(repl) {
		return nil // not initialized yet, or the node was deleted meanwhile and its replacement serves
	}
	return c.checkMachine(ctx, pool, n, rec, now)
}

// served notes a replacement's boot time, from the provider's request to
// its Node serving: in the replacement metric, and on the Node
// (sluice.dev/boot-time) for the upgrade forecast. Best effort: a failed
// write costs the forecast one observation, never the replacement.
func (c *Controller) served(ctx context.Context, repl *corev1.Node, rec *disruption.Record, now time.Time) {
	if rec.LaunchedAt == nil {
		return
	}
	d := now.Sub(*rec.LaunchedAt)
	c.opts.Metrics.replaced(d)
	if _, noted := repl.Annotations[contract.AnnotationBootTime]; noted || c.opts.DryRun {
		return
	}
	if err := c.patchNode(ctx, repl, func(m *corev1.Node) {
		setAnnotation(m, contract.AnnotationBootTime, d.Round(100*time.Millisecond).String())
	}); err != nil {
		c.opts.Log.Info("could not note a replacement's boot time", "node", repl.Name, "err", err)
	}
}

// checkMachine gives up a replacement that failed, is gone, or has not
// become a Ready node within the registration timeout. It asks the
// provider about one replacement at most once a machineRecheck, unless the
// registration timeout has run out.
func (c *Controller) checkMachine(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) error {
	timedOut := rec.LaunchedAt != nil && now.Sub(*rec.LaunchedAt) > c.opts.RegistrationTimeout
	if !timedOut && !c.checks.due(n.Name, rec.Replacement, now) {
		return nil
	}
	m, gerr := c.machines.GetMachine(ctx, pool, rec.Replacement)
	switch {
	case provider.IsNotFound(gerr) && n.DeletionTimestamp.IsZero() && now.Sub(rec.Since) < c.opts.RegistrationTimeout:
		// Never made (a controller killed between the record and the
		// request, or an answer lost) or lost by the provider: ask again
		// by the same name, which makes at most one machine.
		c.opts.Log.Info("asking again for a replacement the provider does not have", "node", n.Name, "replacement", rec.Replacement, "nodepool", pool.Name)
		return c.launch(ctx, pool, n, *rec, now)
	case provider.IsNotFound(gerr):
		return c.abandon(ctx, pool, n, fmt.Sprintf("its replacement %s is gone from the provider", rec.Replacement))
	case gerr != nil:
		return gerr
	case m.State == provider.StateFailed:
		c.refused(pool.Name, errors.New(m.Message), now)
		if err := c.machines.DeleteMachine(ctx, pool, rec.Replacement); err != nil {
			return fmt.Errorf("deleting failed replacement %s: %w", rec.Replacement, err)
		}
		return c.abandon(ctx, pool, n, fmt.Sprintf("its replacement %s failed: %s", rec.Replacement, m.Message))
	case rec.LaunchedAt != nil && now.Sub(*rec.LaunchedAt) > c.opts.RegistrationTimeout:
		msg := fmt.Sprintf("its replacement %s did not become a Ready node within %s", rec.Replacement, c.opts.RegistrationTimeout)
		c.refused(pool.Name, &provider.Error{Code: "NodeNeverJoined", Message: msg, Retryable: true}, now)
		if err := c.machines.DeleteMachine(ctx, pool, rec.Replacement); err != nil {
			return fmt.Errorf("deleting replacement %s that never joined: %w", rec.Replacement, err)
		}
		return c.abandon(ctx, pool, n, msg)
	}
	return nil
}

// initialized says whether a replacement is ready for work: Ready,
// registered (given its pool's template: docs/design/registration.md), and
// rid of the template's startup taints (their owner, a CNI or a node agent,
// lifts them once the node can run pods). Draining the old node before that
// would leave its pods nowhere to go.
func initialized(n *corev1.Node, t *v1alpha1.NodeTemplate) bool {
	if !budget.NodeReady(n) {
		return false
	}
	if _, registered := n.Annotations[contract.AnnotationRegistered]; !registered {
		return false
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady || taint.Key == contract.TaintUnregistered {
			return false
		}
		if t != nil && slices.ContainsFunc(t.StartupTaints, func(s corev1.Taint) bool { return s.Key == taint.Key && s.Effect == taint.Effect }) {
			return false
		}
	}
	return true
}

// abandon gives the node back to service: its record goes, and it no longer
// counts against the budget. It was never cordoned, so nothing else changes.
func (c *Controller) abandon(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, why string) error {
	c.event(n, corev1.EventTypeWarning, "ReplacementFailed", "sluice: the node stays in service: "+why)
	c.event(pool, corev1.EventTypeWarning, "ReplacementFailed", fmt.Sprintf("sluice: node %s stays in service: %s", n.Name, why))
	c.opts.Log.Error("replacement given up; the node stays in service", "node", n.Name, "nodepool", pool.Name, "why", why)
	if ownership.CordonedBy(n) == OwnerReboot {
		// A reboot that did not mend the node drained it first: its
		// cordon goes with the record.
		if err := c.patchNode(ctx, n, liftRebootCordon); err != nil {
			return err
		}
	}
	if err := c.setRecord(ctx, n, nil); err != nil {
		return err
	}
	c.mu.Lock()
	// The mark is gone, taken away here: the node may be chosen again once
	// the pool's backoff ends, not only after the mark's wait.
	delete(c.marked, n.Name)
	c.mu.Unlock()
	if rec, err := disruption.RecordOf(n); err == nil && rec != nil && rec.Replacement != "" {
		c.mu.Lock()
		c.given[rec.Replacement] = c.clock.Now()
		c.mu.Unlock()
	}
	return nil
}

// givenBack says whether a record naming this replacement was taken away by
// this controller lately (the cache may not show it yet). Remembered for a
// minute: far longer than a watch event's way, and a record written anew
// names a new replacement.
func (c *Controller) givenBack(replacement string, now time.Time) bool {
	if replacement == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, at := range c.given {
		if now.Sub(at) > time.Minute {
			delete(c.given, name)
		}
	}
	_, ok := c.given[replacement]
	return ok
}

// setRecord writes (or, with nil, removes) the node's record. Only the
// controller that marked a node writes its record, so a plain merge patch of
// the one annotation is safe and cannot fail on the node's other changes
// (status heartbeats, finalizers); the first mark is written by mark.
func (c *Controller) setRecord(ctx context.Context, cached *corev1.Node, rec *disruption.Record) error {
	value := "null" // removes the annotation, whatever the cache last showed
	if rec != nil {
		v, err := json.Marshal(rec.String())
		if err != nil {
			return err
		}
		value = string(v)
	}
	key, err := json.Marshal(contract.AnnotationDisruption)
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%s:%s}}}`, key, value)
	n := cached.DeepCopy() // the cache's object is shared: never written
	if err := c.kube.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("sluice")); err != nil {
		return fmt.Errorf("recording the disruption of node %s: %w", n.Name, err)
	}
	return nil
}

// errRefused: the provider refused a machine; the pass stops asking.
var errRefused = errors.New("the provider refused the replacement")

// errUnknownOutcome: a write's answer was lost; it may have been applied.
var errUnknownOutcome = errors.New("the API server may have applied the write")

// errMarked: another writer marked the node first.
var errMarked = errors.New("the node is already marked")

// markNode writes the first record on a node with an optimistic lock, so two
// writers never both choose it; when the cached copy was stale it reads the
// node from the API server and tries again, as long as the node is still
// unmarked and in service.
func (c *Controller) markNode(ctx context.Context, cached *corev1.Node, rec disruption.Record) error {
	n := cached.DeepCopy() // the cache's object is shared: never written
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		orig := n.DeepCopy()
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[contract.AnnotationDisruption] = rec.String()
		err := c.kube.Patch(ctx, n, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner("sluice"))
		if !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("marking node %s: %w", n.Name, err)
			}
			return nil
		}
		// The cache lagged the node: read it live (the one read the cache
		// cannot answer) and decide again.
		fresh := &corev1.Node{}
		if gerr := c.live.Get(ctx, client.ObjectKeyFromObject(n), fresh); gerr != nil {
			return fmt.Errorf("reading node %s: %w", n.Name, gerr)
		}
		if _, marked := fresh.Annotations[contract.AnnotationDisruption]; marked || !fresh.DeletionTimestamp.IsZero() {
			return errMarked
		}
		*n = *fresh
		return err
	})
}

// report tells, for a pool whose machines sluice does not manage, which
// nodes it would replace; the Event recorder's correlator keeps that to a
// handful of Events per node.
func (c *Controller) report(pool *v1alpha1.NodePool, v *view) {
	for _, cand := range v.Candidates {
		c.event(cand.Node, corev1.EventTypeNormal, "Would"+string(cand.Reason),
			fmt.Sprintf("sluice: node pool %s has no provider sluice runs, so the node is not replaced: %s", pool.Name, describe(cand)))
	}
}

// pausedBy says why the pool's voluntary disruption is off, "" when it is on.
func pausedBy(pool *v1alpha1.NodePool) string {
	switch p := disruption.PoolProtection(pool); {
	case p == nil:
		return ""
	case p.Reason == disruption.ReasonPaused:
		return "spec.disruption.paused"
	default:
		return contract.AnnotationDoNotDisrupt + "=" + pool.Annotations[contract.AnnotationDoNotDisrupt]
	}
}

// describe says why a candidate is one.
func describe(cand disruption.Candidate) string {
	if cand.Why != "" {
		return cand.Why
	}
	if cand.Reason == v1alpha1.ReasonExpired {
		return "expired at " + cand.ExpiredAt.UTC().Format(time.RFC3339) + " (spec.disruption.expireAfter)"
	}
	parts := make([]string, len(cand.Differences))
	for i, d := range cand.Differences {
		parts[i] = d.String()
	}
	return "drifted from the pool's template: " + strings.Join(parts, "; ")
}

// refused remembers a provider refusal; the pool asks again after a backoff
// that doubles from 10 s to 5 m.
func (c *Controller) refused(pool string, err error, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// From the answer, not the pass's start: a throttled request may have
	// spent minutes in the SDK's own retries.
	now = later(now, c.clock.Now())
	f := c.failing[pool]
	f.backoff = min(max(2*f.backoff, 10*time.Second), 5*time.Minute)
	f.reason, f.message = "CreateFailed", err.Error()
	if pe, ok := provider.AsError(err); ok {
		f.reason = pe.Code
		// A throttled cloud's Retry-After is honoured, never cut short.
		f.backoff = max(f.backoff, pe.RetryAfter)
	}
	f.retryAt = now.Add(f.backoff)
	c.failing[pool] = f
	c.opts.Metrics.providerError(pool, f.reason)
}

func (c *Controller) recovered(pool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.failing, pool)
}

// backingOff says whether the pool waits before asking its provider again.
func (c *Controller) backingOff(pool string, now time.Time) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.failing[pool]
	if !ok || !now.Before(f.retryAt) {
		return 0, false
	}
	return f.retryAt.Sub(now), true
}

// overLimits says which of the pool's cpu and memory limits more machines
// like the candidate would pass, counting what the pool's nodes have now;
// "" when none.
func overLimits(l *v1alpha1.Limits, have, each corev1.ResourceList, more int) string {
	if l == nil {
		return ""
	}
	for _, r := range []struct {
		name  corev1.ResourceName
		limit *resource.Quantity
	}{{corev1.ResourceCPU, l.CPU}, {corev1.ResourceMemory, l.Memory}} {
		if r.limit == nil {
			continue
		}
		total := have[r.name].DeepCopy()
		one := each[r.name]
		for range more {
			total.Add(one)
		}
		if total.Cmp(*r.limit) > 0 {
			return fmt.Sprintf("the pool would have %s %s with %d more like it, and spec.limits.%s is %s", total.String(), r.name, more, r.name, r.limit.String())
		}
	}
	return ""
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// recordOf reads the node's record; when it cannot act on it (unreadable,
// or a newer sluice's, after a rollback) it says so on the node: the node
// still counts against its pool's budget and is left alone.
func (c *Controller) recordOf(n *corev1.Node) (*disruption.Record, error) {
	rec, err := disruption.RecordOf(n)
	switch {
	case disruption.IsNewerRecord(err):
		c.event(n, corev1.EventTypeWarning, disruption.EventRecordFromNewerVersion, "sluice: the node counts against its pool's budget and is left alone: "+err.Error())
	case err != nil:
		c.event(n, corev1.EventTypeWarning, "DisruptionRecordUnreadable", fmt.Sprintf(
			"sluice: the node counts against its pool's budget, but its %s annotation cannot be read (%v); remove it to give the node back", contract.AnnotationDisruption, err))
	}
	return rec, err
}
