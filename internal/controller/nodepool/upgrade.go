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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/budget"
	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/termination"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
	"github.com/sluice-dev/sluice/pkg/ownership"
)

// Queue is the part of the termination queue an upgrade drains through.
type Queue interface {
	Submit(termination.Request) (termination.Admission, error)
	Holds(node, key string) bool
	Cancel(node string)
}

// OwnerUpgrade is the cordon owner of a node an upgrade drains: only the
// upgrade uncordons it (a rollback, a Schedule'd node that would not drain).
const OwnerUpgrade = "upgrade"

// drainRetry is how long an upgrade drain that ended with pods left waits
// before it is tried again (within drainTimeout).
const drainRetry = 10 * time.Second

// upgrading says whether the pool rolls image changes as upgrades: it sets
// spec.upgrade and a template image.
func upgrading(pool *v1alpha1.NodePool) bool {
	return pool.Spec.Upgrade != nil && pool.Spec.Template != nil && pool.Spec.Template.Image != ""
}

// upgradeStep says whether the record is at one of the upgrade's own steps.
func upgradeStep(rec *disruption.Record) bool {
	return rec != nil && rec.Reason == v1alpha1.ReasonUpgrade &&
		(rec.Phase == disruption.PhaseLaunching || rec.Phase == disruption.PhaseDraining || rec.Phase == disruption.PhaseSoaking)
}

// booting says whether the record's replacement was asked for and is not a
// node yet.
func booting(rec *disruption.Record, nodes map[string]bool) bool {
	return !registered(rec, nodes) && (rec.Phase == disruption.PhaseLaunching || rec.DrainFirst && rec.LaunchedAt != nil)
}

// registered says whether the record's replacement is a Node of the pass,
// given the machine names and providerIDs of its Nodes.
func registered(rec *disruption.Record, nodes map[string]bool) bool {
	return nodes[rec.Replacement] || rec.ReplacementProviderID != "" && nodes[provider.IDKey(rec.ReplacementProviderID)]
}

// appendErr appends err when there is one.
func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

// BlockedFor says whether an upgrade to image already gave up on the node
// (Blocked or Quarantined): the upgrade passes it over until a new upgrade
// to the image (`sluice upgrade pool`) takes the mark off (Unblock).
func BlockedFor(n *corev1.Node, image string) bool {
	return n.Labels[contract.LabelUpgradeStatus] != "" && n.Annotations[contract.AnnotationUpgradeImage] == image
}

// upgradeControl is the pool's pause or abort, "" when the upgrade runs.
func upgradeControl(pool *v1alpha1.NodePool) string {
	switch v := pool.Annotations[contract.AnnotationUpgrade]; v {
	case v1alpha1.UpgradeControlPaused, v1alpha1.UpgradeControlAborted:
		return v
	}
	return ""
}

// upgradeRecord reads the node's record when it is at one of the upgrade's
// own steps (before the deletion controller's).
func upgradeRecord(n *corev1.Node) *disruption.Record {
	rec, err := disruption.RecordOf(n)
	if err != nil || !upgradeStep(rec) {
		return nil
	}
	return rec
}

// slots is what the pool's upgrade may start now.
type slots struct {
	surge, unavailable int
	// inFlight counts the old nodes being upgraded; surging those of them
	// in a surge slot.
	inFlight, surging int
}

func upgradeSlots(pool *v1alpha1.NodePool, v *view) (slots, error) {
	var s slots
	var err error
	if s.surge, s.unavailable, err = v.UpgradeWidth(); err != nil {
		return s, err
	}
	for _, n := range v.Nodes {
		// A node stays in flight until it is gone: its deletion (the
		// deletion controller's Terminating) still takes it out of service.
		if rec, err := disruption.RecordOf(n); err == nil && rec != nil && rec.Reason == v1alpha1.ReasonUpgrade && rec.Phase != disruption.PhaseRemoving {
			s.inFlight++
			if !rec.DrainFirst {
				s.surging++
			}
		}
	}
	return s, nil
}

// startUpgrades chooses the pool's next image-drifted nodes, oldest first,
// within maxSurge + maxUnavailable and the budgets for reason Upgrade. It
// returns how many it chose, and for how many of them it asked for a
// machine (a drain-first node's comes after its drain).
func (c *Controller) startUpgrades(ctx context.Context, pool *v1alpha1.NodePool, v *view, disrupting, pending int, now time.Time) (chosen, launched int, wait time.Duration, _ error) {
	if !upgrading(pool) || upgradeControl(pool) != "" || upgradeFailed(pool, v) != "" {
		return 0, 0, 0, nil
	}
	s, err := upgradeSlots(pool, v)
	if err != nil {
		return 0, 0, 0, err
	}
	image := pool.Spec.Template.Image
	var errs []error
	for _, cand := range v.Candidates {
		if cand.Reason != v1alpha1.ReasonUpgrade || BlockedFor(cand.Node, image) {
			continue
		}
		if s.inFlight >= s.surge+s.unavailable {
			break
		}
		ok, until, err := c.eligible(pool, v, cand.Node, now)
		wait = sooner(wait, until)
		if err != nil {
			errs = append(errs, err)
		}
		if !ok {
			continue
		}
		a, err := v.AllowedAfter(v1alpha1.ReasonUpgrade, disrupting-v.Disrupting, now)
		if err != nil {
			return chosen, launched, wait, err
		}
		if a.Nodes < 1 {
			c.event(pool, corev1.EventTypeNormal, "UpgradeWaitsForBudget", fmt.Sprintf(
				"sluice: the upgrade to %s waits: %d node(s) in flight, and the pool's budgets allow no more disruptions for reason Upgrade now (maxSurge %d + maxUnavailable %d would allow %d)",
				image, s.inFlight, s.surge, s.unavailable, s.surge+s.unavailable))
			break
		}
		drainFirst := s.surging >= s.surge
		if !drainFirst {
			if over := overPoolLimits(pool, v, cand.Node, pending); over != "" {
				c.event(pool, corev1.EventTypeNormal, "LimitReached", "sluice: the upgrade waits to surge: "+over)
				break
			}
		}
		stop, next, err := chosenOutcome(c.chooseUpgrade(ctx, pool, cand, drainFirst, now))
		errs = appendErr(errs, err)
		if stop {
			break
		}
		if next {
			continue
		}
		chosen++
		disrupting++
		s.inFlight++
		if !drainFirst {
			s.surging++
			pending++
			launched++
		}
		wait = launchingRecheck
	}
	return chosen, launched, wait, errors.Join(errs...)
}

// chosenOutcome reads a choice's error: stop the pass (the provider
// refused, or a write's answer was lost), go on to the next candidate
// (another writer took this one, or it failed), and the error to report.
func chosenOutcome(err error) (stop, next bool, report error) {
	switch {
	case err == nil:
		return false, false, nil
	case errors.Is(err, errRefused):
		return true, false, nil
	case errors.Is(err, errUnknownOutcome):
		return true, false, err
	case errors.Is(err, errMarked):
		return false, true, nil
	}
	return false, true, err
}

// overPoolLimits says which of the pool's limits one more machine like
// like would pass, counting every node of the pool (replacements included)
// and the machines still booting; "" when none. A replacement is made
// before the node it replaces goes, so it needs that room.
func overPoolLimits(pool *v1alpha1.NodePool, v *view, like *corev1.Node, pending int) string {
	if l := pool.Spec.Limits; l != nil && l.Nodes != nil && len(v.Nodes)+pending >= int(*l.Nodes) {
		return fmt.Sprintf("the pool has %d nodes and %d more on their way, and spec.limits.nodes is %d (a replacement is made before the node it replaces goes)", len(v.Nodes), pending, *l.Nodes)
	}
	return overLimits(pool.Spec.Limits, v.Resources, like.Status.Capacity, pending+1)
}

// chooseUpgrade marks the node (it counts against the Upgrade budget from
// now on) and, in a surge slot, asks for its replacement; in an unavailable
// slot the node is drained first and its replacement asked for once it is
// empty.
func (c *Controller) chooseUpgrade(ctx context.Context, pool *v1alpha1.NodePool, cand disruption.Candidate, drainFirst bool, now time.Time) error {
	n := cand.Node
	why := fmt.Sprintf("upgrading to image %s (%s)", pool.Spec.Template.Image, describe(cand))
	if c.opts.DryRun {
		mode := "replacement first (a surge slot)"
		if drainFirst {
			mode = "drain first (an unavailable slot)"
		}
		c.wouldAct(n, v1alpha1.ReasonUpgrade, "upgrade the node, "+mode+": "+why)
		return nil
	}
	at := now
	rec := disruption.Record{Reason: v1alpha1.ReasonUpgrade, Phase: disruption.PhaseLaunching, Since: now, Message: why,
		Replacement: provider.NewName(pool.Name), LaunchedAt: &at}
	if drainFirst {
		rec.Phase, rec.DrainFirst, rec.LaunchedAt, rec.DrainStarted = disruption.PhaseDraining, true, nil, &at
	}
	if err := c.markChosen(ctx, pool, n, rec, now); err != nil {
		return err
	}
	if drainFirst {
		c.event(n, corev1.EventTypeNormal, "Upgrading", "sluice: "+why+"; draining the node first (maxUnavailable), its replacement "+rec.Replacement+" follows")
		c.opts.Log.Info("upgrading node, drain first", "node", n.Name, "nodepool", pool.Name, "replacement", rec.Replacement)
		return nil
	}
	c.event(n, corev1.EventTypeNormal, "Upgrading", "sluice: "+why+"; surge node "+rec.Replacement+" first")
	c.opts.Log.Info("upgrading node, surge first", "node", n.Name, "nodepool", pool.Name, "replacement", rec.Replacement)
	return c.launch(ctx, pool, n, rec, now)
}

// advanceUpgrade moves one node of an upgrade along its record's phases
// (docs/design/upgrades.md).
func (c *Controller) advanceUpgrade(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) error {
	if c.opts.DryRun || !n.DeletionTimestamp.IsZero() {
		return nil
	}
	aborted := upgradeControl(pool) == v1alpha1.UpgradeControlAborted
	switch rec.Phase {
	case disruption.PhaseLaunching:
		if aborted {
			return c.rollBack(ctx, pool, n, rec, "the upgrade was aborted (sluice upgrade abort)")
		}
		return c.launchingStep(ctx, pool, n, rec, now)
	case disruption.PhaseDraining:
		if aborted {
			return c.rollBack(ctx, pool, n, rec, "the upgrade was aborted (sluice upgrade abort)")
		}
		return c.drainStep(ctx, pool, n, rec, now)
	case disruption.PhaseSoaking:
		return c.soakStep(ctx, pool, n, rec, now)
	}
	return nil
}

// launchingStep waits for a surge node to serve, then starts the old
// node's drain.
func (c *Controller) launchingStep(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) error {
	repl, err := c.replacementNode(ctx, pool, rec)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err == nil && initialized(repl, pool.Spec.Template) {
		if why := c.unhealthy(pool, n, repl); why != "" {
			return c.gateHolds(ctx, pool, n, rec, now, why)
		}
		c.served(ctx, repl, rec, now)
		next := *rec
		at := now
		next.Phase, next.DrainStarted = disruption.PhaseDraining, &at
		c.event(n, corev1.EventTypeNormal, "UpgradeDraining", fmt.Sprintf("sluice: surge node %s is Ready; draining this node (drainTimeout %s)", rec.Replacement, pool.Spec.Upgrade.DrainTimeoutOrDefault()))
		return c.setRecord(ctx, n, &next)
	}
	if err == nil && budget.NodeReady(repl) {
		return nil
	}
	return c.checkMachine(ctx, pool, n, rec, now)
}

// soakStep deletes a drained node once its soak is over (and, drained
// first, once its replacement serves).
func (c *Controller) soakStep(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) error {
	if rec.Drained != nil && now.Before(rec.Drained.Add(pool.Spec.Upgrade.SoakOrDefault())) {
		return nil
	}
	if rec.DrainFirst {
		// The drained node stays, cordoned and empty, until its
		// replacement serves: the pool's count (and a rollback) never
		// loses it.
		if ready, err := c.replacementServes(ctx, pool, n, rec, now); !ready || err != nil {
			return err
		}
	}
	c.forgetDrain(n.Name)
	c.event(n, corev1.EventTypeNormal, "Upgraded", fmt.Sprintf("sluice: drained%s; deleting the node (its replacement is %s)", soaked(pool), rec.Replacement))
	uid := n.UID
	if err := c.kube.Delete(ctx, n, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting upgraded node %s: %w", n.Name, err)
	}
	return nil
}

// replacementServes asks for a drain-first node's replacement once, and
// says whether it is a node ready for work; a replacement refused, failed
// or not joined within the registration timeout rolls the node back.
func (c *Controller) replacementServes(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) (bool, error) {
	repl, err := c.replacementNode(ctx, pool, rec)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	if err == nil && initialized(repl, pool.Spec.Template) && c.unhealthy(pool, n, repl) == "" {
		return true, nil
	}
	if rec.LaunchedAt == nil {
		m, err := c.machines.CreateMachine(ctx, pool, rec.Replacement)
		if err != nil {
			c.refused(pool.Name, err, now)
			return false, c.rollBack(ctx, pool, n, rec, "the provider refused its replacement: "+err.Error())
		}
		next := *rec
		at := now
		next.LaunchedAt = &at
		if m.NodeName != rec.Replacement {
			next.ReplacementProviderID = m.ProviderID
		}
		return false, c.setRecord(ctx, n, &next)
	}
	m, gerr := c.machines.GetMachine(ctx, pool, rec.Replacement)
	switch {
	case gerr != nil && !provider.IsNotFound(gerr):
		return false, gerr
	case provider.IsNotFound(gerr):
		// Lost (a controller killed between the record and the request):
		// asked again by the same name.
		_, err := c.machines.CreateMachine(ctx, pool, rec.Replacement)
		return false, err
	case m.State == provider.StateFailed:
		return false, c.rollBack(ctx, pool, n, rec, fmt.Sprintf("its replacement %s failed: %s", rec.Replacement, m.Message))
	case now.Sub(*rec.LaunchedAt) > c.opts.RegistrationTimeout:
		return false, c.rollBack(ctx, pool, n, rec, fmt.Sprintf("its replacement %s did not become a Ready node within %s", rec.Replacement, c.opts.RegistrationTimeout))
	}
	return false, nil
}

func soaked(pool *v1alpha1.NodePool) string {
	if d := pool.Spec.Upgrade.SoakOrDefault(); d > 0 {
		return " and soaked for " + d.String()
	}
	return ""
}

// unhealthy says what keeps a Ready replacement from taking over, "" when
// nothing does. With the health gate on, every DaemonSet with a pod on the
// old node must have a Ready pod on the replacement: a pod not made yet
// holds the gate as a pod not Ready does, so a node agent that never starts
// on the new image is caught before the old node is touched.
func (c *Controller) unhealthy(pool *v1alpha1.NodePool, old, repl *corev1.Node) string {
	if !pool.Spec.Upgrade.WaitsForDaemonSets() {
		return ""
	}
	before, err := c.opts.PodsOn(old.Name)
	if err != nil {
		return err.Error()
	}
	after, err := c.opts.PodsOn(repl.Name)
	if err != nil {
		return err.Error()
	}
	ready := map[types.UID]bool{}
	for _, p := range after {
		if o := drain.DaemonSetOf(p); o != nil {
			ready[o.UID] = ready[o.UID] || podReady(p)
		}
	}
	var missing []string
	for _, p := range before {
		o := drain.DaemonSetOf(p)
		if o == nil || ready[o.UID] || slices.Contains(missing, p.Namespace+"/"+o.Name) {
			continue
		}
		missing = append(missing, p.Namespace+"/"+o.Name)
	}
	if len(missing) == 0 {
		return ""
	}
	slices.Sort(missing)
	return fmt.Sprintf("no Ready pod of DaemonSet %s on %s yet", strings.Join(missing, ", "), repl.Name)
}

// gateHolds waits for a Ready surge node to pass the health gate, and past
// the registration timeout (counted from its launch) blocks the old node
// for this image, rolls it back and backs the pool off. More such nodes
// than maxBlockedNodes fail the upgrade (upgradeFailed): the image, not
// the node, is what is wrong.
func (c *Controller) gateHolds(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time, why string) error {
	since := rec.Since
	if rec.LaunchedAt != nil {
		since = *rec.LaunchedAt
	}
	if now.Sub(since) <= c.opts.RegistrationTimeout {
		return nil // looked at again on the next pass
	}
	msg := fmt.Sprintf("its surge node %s did not pass the health gate within %s: %s; labelled %s=%s, its surge node is removed",
		rec.Replacement, c.opts.RegistrationTimeout, why, contract.LabelUpgradeStatus, v1alpha1.UpgradeStatusBlocked)
	c.refused(pool.Name, &provider.Error{Code: "HealthGateFailed", Message: msg, Retryable: true}, now)
	return c.block(ctx, pool, n, rec, v1alpha1.BlockedByHealthGate, msg)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// drainStep keeps the node's drain running until it ends, then soaks the
// node; past drainTimeout the pool's undrainableNodeBehavior applies.
func (c *Controller) drainStep(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, now time.Time) error {
	timeout := pool.Spec.Upgrade.DrainTimeoutOrDefault()
	started := now
	if rec.DrainStarted != nil {
		started = *rec.DrainStarted
	}
	key := "upgrade/" + string(n.UID)
	end := c.drainOutcome(n.Name)
	if end.drained {
		next := *rec
		at := now
		next.Phase, next.Drained = disruption.PhaseSoaking, &at
		return c.setRecord(ctx, n, &next)
	}
	if !now.Before(started.Add(timeout)) {
		if c.opts.Queue != nil && c.opts.Queue.Holds(n.Name, key) {
			c.opts.Queue.Cancel(n.Name)
		}
		return c.undrainable(ctx, pool, n, rec, fmt.Sprintf("it did not drain within drainTimeout %s%s", timeout, end.why))
	}
	if c.opts.Queue == nil || c.opts.Queue.Holds(n.Name, key) || now.Before(end.retryAt) {
		return nil
	}
	// The callbacks run on the queue's goroutines: they capture copies, never
	// the reconciler's objects, which later reads decode into.
	name, poolName := n.Name, pool.Name
	opts := drain.Options{IgnoreDaemonSets: true, DeleteEmptyDirData: true, Force: true, CordonOwner: OwnerUpgrade,
		Deadline: started.Add(timeout), OnDeadline: drain.OnDeadlineStop}
	_, err := c.opts.Queue.Submit(termination.Request{Node: name, Pool: pool.Name, Reason: termination.Reason(v1alpha1.ReasonUpgrade), Key: key,
		Options: opts, Done: func(r *drain.Report, err error) { c.drainEnded(name, r, err) }, Released: func() { c.wakePool(poolName) }})
	return err
}

// undrainable applies the pool's undrainableNodeBehavior to a node that did
// not drain in time.
func (c *Controller) undrainable(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, why string) error {
	image := pool.Spec.Template.Image
	if pool.Spec.Upgrade.Behavior() == v1alpha1.UndrainableCordon {
		// Quarantined: left cordoned for a person to look at; its surge
		// node stays as its capacity.
		if err := c.patchNode(ctx, n, func(m *corev1.Node) {
			setLabel(m, contract.LabelUpgradeStatus, v1alpha1.UpgradeStatusQuarantined)
			setAnnotation(m, contract.AnnotationUpgradeImage, image)
		}); err != nil {
			return err
		}
		c.forgetDrain(n.Name)
		c.event(n, corev1.EventTypeWarning, "UpgradeQuarantined", fmt.Sprintf(
			"sluice: %s; the node stays cordoned on its old image, labelled %s=%s (undrainableNodeBehavior Cordon), and surge node %s stays in its place; `sluice doctor` names what holds its pods",
			why, contract.LabelUpgradeStatus, v1alpha1.UpgradeStatusQuarantined, rec.Replacement))
		return c.setRecord(ctx, n, nil)
	}
	return c.block(ctx, pool, n, rec, v1alpha1.BlockedByDrainTimeout, why+fmt.Sprintf("; labelled %s=%s (undrainableNodeBehavior Schedule), its surge node %s is removed",
		contract.LabelUpgradeStatus, v1alpha1.UpgradeStatusBlocked, rec.Replacement))
}

// Unblock is the merge patch that takes off the node the mark an upgrade
// left when it gave up on it (block, undrainable), and the upgrade's own
// cordon of a quarantined node (a person's stays), so that the next upgrade
// to the image tries it again. The controller writes those marks; this is
// the one place that knows how to take them off.
func Unblock(n *corev1.Node) ([]byte, error) {
	annotations := map[string]any{contract.AnnotationUpgradeImage: nil, contract.AnnotationUpgradeBlockedBy: nil}
	patch := map[string]any{"metadata": map[string]any{
		"labels": map[string]any{contract.LabelUpgradeStatus: nil}, "annotations": annotations}}
	if ownership.CordonedBy(n) == OwnerUpgrade {
		annotations[contract.AnnotationCordonedBy] = nil
		patch["spec"] = map[string]any{"unschedulable": false}
	}
	return json.Marshal(patch)
}

// block labels the node Blocked for the pool's image (by what, in
// sluice.dev/upgrade-blocked-by) and rolls it back. Labelled first: a
// controller killed before the rollback finishes it on the next pass, and
// never chooses the node again for this image.
func (c *Controller) block(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, by, why string) error {
	if err := c.patchNode(ctx, n, func(m *corev1.Node) {
		setLabel(m, contract.LabelUpgradeStatus, v1alpha1.UpgradeStatusBlocked)
		setAnnotation(m, contract.AnnotationUpgradeImage, pool.Spec.Template.Image)
		setAnnotation(m, contract.AnnotationUpgradeBlockedBy, by)
	}); err != nil {
		return err
	}
	return c.rollBack(ctx, pool, n, rec, why)
}

// rollBack gives the node back to service on its old image: its drain is
// canceled, its upgrade cordon lifted, its replacement removed (drained, as
// any node, if it has pods by now) and its record taken away.
func (c *Controller) rollBack(ctx context.Context, pool *v1alpha1.NodePool, n *corev1.Node, rec *disruption.Record, why string) error {
	if c.opts.Queue != nil {
		c.opts.Queue.Cancel(n.Name)
	}
	if n.Spec.Unschedulable {
		var uerr error
		if err := c.patchNode(ctx, n, func(m *corev1.Node) { _, uerr = ownership.Uncordon(m, OwnerUpgrade, c.clock.Now()) }); err != nil {
			return err
		}
		if uerr != nil {
			return uerr // the canceled drain still holds its claim: the next pass tries again
		}
	}
	if err := c.removeReplacement(ctx, pool, rec); err != nil {
		return err
	}
	c.forgetDrain(n.Name)
	c.event(n, corev1.EventTypeWarning, "UpgradeRolledBack", "sluice: the node stays in service on its old image: "+why)
	c.event(pool, corev1.EventTypeWarning, "UpgradeRolledBack", fmt.Sprintf("sluice: node %s stays on its old image: %s", n.Name, why))
	c.opts.Log.Info("upgrade of node rolled back", "node", n.Name, "nodepool", pool.Name, "why", why)
	return c.setRecord(ctx, n, nil)
}

// removeReplacement takes away the replacement the record names: a Node is
// marked Removing (deleted and drained next); a machine that is not a Node
// yet is deleted.
func (c *Controller) removeReplacement(ctx context.Context, pool *v1alpha1.NodePool, rec *disruption.Record) error {
	if rec.Replacement == "" {
		return nil
	}
	repl, err := c.replacementNode(ctx, pool, rec)
	switch {
	case apierrors.IsNotFound(err):
		if rec.DrainFirst && rec.LaunchedAt == nil {
			return nil // never asked for
		}
		if err := c.machines.DeleteMachine(ctx, pool, rec.Replacement); err != nil && !provider.IsNotFound(err) {
			return fmt.Errorf("deleting replacement machine %s: %w", rec.Replacement, err)
		}
		return nil
	case err != nil:
		return err
	}
	if r, _ := disruption.RecordOf(repl); r != nil || !repl.DeletionTimestamp.IsZero() {
		return nil
	}
	now := c.clock.Now()
	return c.setRecord(ctx, repl, &disruption.Record{Reason: v1alpha1.ReasonUpgrade, Phase: disruption.PhaseRemoving, Since: now,
		Message: "the surge node of an upgrade that was rolled back"})
}

// patchNode applies change to a copy of the node and writes the difference
// as a merge patch.
func (c *Controller) patchNode(ctx context.Context, cached *corev1.Node, change func(*corev1.Node)) error {
	n := cached.DeepCopy()
	orig := n.DeepCopy()
	change(n)
	if err := c.kube.Patch(ctx, n, client.MergeFrom(orig), client.FieldOwner("sluice")); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching node %s: %w", n.Name, err)
	}
	return nil
}

func setLabel(n *corev1.Node, k, v string) {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[k] = v
}

func setAnnotation(n *corev1.Node, k, v string) {
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[k] = v
}

// drainEnd is how a node's last upgrade drain ended.
type drainEnd struct {
	drained bool
	retryAt time.Time
	why     string
}

func (c *Controller) drainEnded(node string, r *drain.Report, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && r != nil && len(r.Nodes) == 1 && r.Nodes[0].Outcome == drain.NodeDrained {
		c.drains[node] = drainEnd{drained: true}
		return
	}
	end := drainEnd{retryAt: c.clock.Now().Add(drainRetry)}
	switch {
	case err != nil:
		end.why = ": " + err.Error()
	case r != nil && len(r.Nodes) == 1:
		end.why = ": " + r.Nodes[0].Message + ": " + drain.Summary(r.Nodes[0].Left(), 5)
	}
	c.drains[node] = end
}

func (c *Controller) drainOutcome(node string) drainEnd {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drains[node]
}

func (c *Controller) forgetDrain(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.drains, node)
}
