package drain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// step is what one attempt to move a pod decided.
type step struct {
	asked bool            // the pod was asked to leave: wait for it to go
	wake  <-chan struct{} // try again as soon as this closes
	after time.Duration   // or after this long
}

// leave moves one pod off the node: it retries until the pod has been asked to
// leave, then waits for it to go. It returns when the pod is gone, the drain
// stops, or the deadline forces a delete.
func (nd *nodeDrain) leave(ctx context.Context, st *podState) {
	defer st.settle()
	defer func() {
		// Gone: the budget's status counts it from now on, not the ledger.
		if st.pdb != nil && st.isGone() {
			nd.ledger.release(st.pdb.UID, st.pod.Name)
		}
	}()
	if st.class.verdict == waitGone {
		st.outcome, st.reason, st.message = PodDeleted, ReasonTerminating, st.class.message
		nd.awaitGone(ctx, st)
		return
	}
	backoff := time.Second
	for {
		if st.isGone() {
			if st.outcome == "" || st.outcome == PodBlocked {
				st.outcome, st.reason, st.message = PodDeleted, "", "deleted by someone else during the drain"
			}
			return
		}
		now := nd.clock.Now()
		if !nd.stopAt.IsZero() && !now.Before(nd.stopAt) {
			return
		}
		if nd.mayForce(st, now) {
			nd.force(ctx, st)
			return
		}
		s := nd.attempt(ctx, st, &backoff)
		if s.asked {
			// Like the kubelet's graceful shutdown, the next priority wave waits
			// until this one has gone; against a deadline it starts at once, so
			// every pod gets as much of its grace period as the time allows.
			if !nd.opts.Deadline.IsZero() {
				st.settle()
			}
			nd.awaitGone(ctx, st)
			return
		}
		if !nd.pause(ctx, st, s) {
			return
		}
	}
}

// attempt makes one try at moving the pod.
func (nd *nodeDrain) attempt(ctx context.Context, st *podState, backoff *time.Duration) step {
	if st.class.verdict == hold && !st.class.until.IsZero() && !nd.clock.Now().Before(st.class.until) {
		// A do-not-disrupt duration ran out: the pod is looked at again, as
		// at the start, and leaves unless something else holds it.
		st.class = nd.classify.classify(ctx, st.pod)
		nd.matchBudget(st, nd.budgets())
		if st.class.verdict != hold {
			st.blockedSince = nil // held no more: a budget's wait counts from now
		}
	}
	if budgetHold(st.class) {
		// The budget's message says how to fix it, and someone may: look
		// at the pod again as the budgets stand now (from the watch's
		// cache: no request), as kubectl drain would find on its next try.
		st.class, st.pdb, st.pdbName = st.leaving, nil, ""
		nd.matchBudget(st, nd.budgets())
		if st.class.verdict != hold {
			st.blockedSince = nil // held no more: a budget's wait counts from now
		}
	}
	if st.class.verdict == hold {
		if until := st.class.until; !until.IsZero() {
			nd.block(st, st.class.reason, st.class.message, false)
			return step{after: min(until.Sub(nd.clock.Now()), time.Hour)}
		}
		nd.block(st, st.class.reason, st.class.message, nd.opts.Deadline.IsZero())
		if !budgetHold(st.class) {
			return step{after: time.Hour} // nothing changes until the deadline forces it
		}
		var changed <-chan struct{}
		if st.pdb != nil {
			changed = nd.ledger.changes(st.pdb.UID)
		}
		return step{wake: changed, after: budgetRecheck}
	}
	grace := nd.graceFor(st, nd.clock.Now())
	if nd.opts.DisableEviction {
		err := nd.deletePod(ctx, st, grace)
		if err == nil || apierrors.IsNotFound(err) {
			nd.asked(st, PodDeleted, grace)
			return step{asked: true}
		}
		return nd.failed(st, err, backoff)
	}
	took, version := false, ""
	if st.pdb != nil {
		var ok bool
		var changed <-chan struct{}
		ok, version, changed = nd.ledger.take(st.pdb.UID, st.pod.Name, nd.clock.Now())
		if !ok {
			reason, msg := nd.whyHeld(ctx, st)
			nd.block(st, reason, msg, reason == ReasonPDBDeadlock)
			return step{wake: changed, after: 5 * time.Second}
		}
		took = true
	}
	err := nd.evictPod(ctx, st, grace)
	if err != nil && took && !apierrors.IsTooManyRequests(err) {
		nd.ledger.release(st.pdb.UID, st.pod.Name)
	}
	if err == nil {
		nd.asked(st, PodEvicted, grace)
		return step{asked: true}
	}
	return nd.refused(ctx, st, err, version, backoff)
}

// budgetRecheck is how often a pod its budgets hold for good (one that can
// never allow an eviction, or two budgets) is looked at again, beside the
// wake its budget's next status gives.
const budgetRecheck = 5 * time.Second

// budgetHold says whether the budgets, as they stood when the pod was
// classified, hold it: only a change to a budget or its workload frees it.
func budgetHold(c classification) bool {
	return c.verdict == hold && c.until.IsZero() && (c.reason == ReasonPDBDeadlock || c.reason == ReasonMultiplePDBs)
}

// refused decides what an eviction error means for the pod.
func (nd *nodeDrain) refused(ctx context.Context, st *podState, err error, version string, backoff *time.Duration) step {
	switch {
	case apierrors.IsNotFound(err):
		st.markGone(nd.clock.Now()) // someone else deleted it; the loop records that
		return step{}
	case apierrors.IsConflict(err):
		// The UID precondition failed: a pod of the same name is another pod.
		if nd.replaced(ctx, st) {
			st.markGone(nd.clock.Now())
			return step{}
		}
		return step{after: time.Second}
	case apierrors.IsTooManyRequests(err):
		retry := time.Second
		if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
			retry = time.Duration(s) * time.Second
		}
		if !isBudgetRefusal(err) {
			return step{after: retry} // the API server is throttling, not a budget
		}
		if st.pdb == nil {
			// A budget created after the pod was classified.
			matched := budgetsFor(st.pod, nd.budgets())
			if len(matched) != 1 {
				nd.block(st, ReasonPDBBlocked, "the eviction was refused by a disruption budget: "+err.Error(), false)
				return step{after: max(retry, 5*time.Second)}
			}
			st.pdb, st.pdbName = matched[0], matched[0].Name
		}
		changed := nd.ledger.exhausted(st.pdb.UID, st.pod.Name, version)
		reason, msg := nd.whyHeld(ctx, st)
		nd.block(st, reason, msg, reason == ReasonPDBDeadlock)
		return step{wake: changed, after: max(retry, 5*time.Second)}
	case isMultipleBudgets(err):
		nd.block(st, ReasonMultiplePDBs, "more than one PodDisruptionBudget selects the pod and the eviction API refuses it: make the budgets' selectors disjoint", true)
		return step{after: 30 * time.Second}
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		st.denials++
		// A policy that says no three times running is not going to change its
		// mind by itself: count the pod as stuck, so a drain with no timeout ends.
		nd.block(st, ReasonAdmissionDenied, "the eviction was refused: "+err.Error(), st.denials >= 3)
		*backoff = min(*backoff*2, 30*time.Second)
		return step{after: *backoff}
	}
	return nd.failed(st, err, backoff)
}

// diagnoseAfter is how long a pod is held, and its budget has let none of the
// drain's evictions through, before the drain looks at the budget's pods to
// tell a deadlock from a budget that is still recovering. Most holds last a
// second, until a replacement is Ready, and a budget that keeps letting
// evictions through is pacing the drain, not blocking it: the status says
// enough for those, and the look costs a request.
const diagnoseAfter = 5 * time.Second

// whyHeld explains why the pod's budget holds it.
func (nd *nodeDrain) whyHeld(ctx context.Context, st *podState) (Reason, string) {
	now := nd.clock.Now()
	if st.blockedSince == nil || now.Sub(*st.blockedSince) < diagnoseAfter || nd.ledger.hadRoomSince(st.pdb.UID, now.Add(-diagnoseAfter)) {
		s := st.pdb.Status
		if fresh, err := nd.pdbs.PodDisruptionBudgets(st.pdb.Namespace).Get(st.pdb.Name); err == nil {
			s = fresh.Status
		}
		if s.DisruptionsAllowed > 0 {
			return ReasonPDBBlocked, fmt.Sprintf("PodDisruptionBudget %s allows %d disruption(s) and this drain's evictions are using them; waiting for replacements",
				st.pdb.Name, s.DisruptionsAllowed)
		}
		return ReasonPDBBlocked, fmt.Sprintf("PodDisruptionBudget %s needs %d healthy pods and has %d", st.pdb.Name, s.DesiredHealthy, s.CurrentHealthy)
	}
	return nd.diagnose(ctx, st.pdb)
}

func (nd *nodeDrain) failed(st *podState, err error, backoff *time.Duration) step {
	nd.block(st, ReasonError, err.Error(), false)
	*backoff = min(*backoff*2, 30*time.Second)
	return step{after: *backoff}
}

// pause waits before the next attempt; false means the drain is over for this pod.
func (nd *nodeDrain) pause(ctx context.Context, st *podState, s step) bool {
	wait := s.after
	now := nd.clock.Now()
	if at, ok := nd.forcePoint(st); ok {
		wait = min(wait, at.Sub(now))
	}
	if !nd.stopAt.IsZero() {
		wait = min(wait, nd.stopAt.Sub(now))
	}
	timer := nd.clock.NewTimer(max(wait, 0))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-st.gone:
	case <-s.wake:
	case <-timer.C():
	}
	return true
}

// awaitGone waits until the pod is gone, the drain stops, ctx ends, or (with
// SkipWaitForDeleteTimeout) the pod is still there that long after its
// deletion timestamp, as kubectl measures it.
func (nd *nodeDrain) awaitGone(ctx context.Context, st *podState) {
	var stop, unwait <-chan time.Time
	if !nd.stopAt.IsZero() {
		timer := nd.clock.NewTimer(nd.stopAt.Sub(nd.clock.Now()))
		defer timer.Stop()
		stop = timer.C()
	}
	if after := nd.opts.SkipWaitForDeleteTimeout; after > 0 {
		timer := nd.clock.NewTimer(max(0, nd.terminatingSince(st).Add(after).Sub(nd.clock.Now())))
		defer timer.Stop()
		unwait = timer.C()
	}
	select {
	case <-st.gone:
	case <-stop:
	case <-unwait:
		st.unwaited.Store(true)
	case <-ctx.Done():
	}
}

// terminatingSince is the pod's deletion timestamp (when its grace period
// ends) as the watch shows it; for a pod just asked to leave whose deletion
// the watch has not shown yet, now plus the grace it was given.
func (nd *nodeDrain) terminatingSince(st *podState) time.Time {
	if p, err := nd.pods.get(st.pod.Namespace, st.pod.Name); err == nil && p.UID == st.pod.UID && p.DeletionTimestamp != nil {
		return p.DeletionTimestamp.Time
	}
	if st.pod.DeletionTimestamp != nil {
		return st.pod.DeletionTimestamp.Time
	}
	return nd.clock.Now().Add(time.Duration(ptr.Deref(st.grace, 0)) * time.Second)
}

func (nd *nodeDrain) evictPod(ctx context.Context, st *podState, grace int64) error {
	if err := nd.acquire(ctx); err != nil {
		return err
	}
	defer func() { <-nd.inFlight }()
	return EvictWithUID(ctx, nd.client, st.pod, grace)
}

func (nd *nodeDrain) deletePod(ctx context.Context, st *podState, grace int64) error {
	uid := st.pod.UID
	if err := nd.acquire(ctx); err != nil {
		return err
	}
	defer func() { <-nd.inFlight }()
	return nd.client.CoreV1().Pods(st.pod.Namespace).Delete(ctx, st.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
}

// acquire takes a place under the eviction limit (shared with every drain
// given the same Shared), or gives up when the drain stops.
func (nd *nodeDrain) acquire(ctx context.Context) error {
	select {
	case nd.inFlight <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// replaced reports whether the pod's name now belongs to another pod (or none).
func (nd *nodeDrain) replaced(ctx context.Context, st *podState) bool {
	p, err := nd.client.CoreV1().Pods(st.pod.Namespace).Get(ctx, st.pod.Name, metav1.GetOptions{})
	return apierrors.IsNotFound(err) || (err == nil && p.UID != st.pod.UID)
}

func (nd *nodeDrain) asked(st *podState, outcome PodOutcome, grace int64) {
	st.outcome, st.reason, st.grace, st.blockedSince = outcome, "", &grace, nil
	st.message = st.class.message
	st.stuck.Store(false)
	nd.hooks.Observer.Observe(Progress{Time: nd.clock.Now(), Node: nd.name, Kind: ProgressEvicting, Pod: st.key, PDB: st.pdbName,
		Message: fmt.Sprintf("grace %ds", grace)})
}

// block records why the pod cannot leave now; an Event and a progress line go
// out when the reason changes, not on every retry.
func (nd *nodeDrain) block(st *podState, reason Reason, message string, stuck bool) {
	now := nd.clock.Now()
	if st.blockedSince == nil {
		st.blockedSince = &now
	}
	st.outcome, st.reason, st.message = PodBlocked, reason, message
	st.stuck.Store(stuck)
	st.settle()
	if st.announced != reason {
		st.announced = reason
		nd.hooks.Observer.Observe(Progress{Time: now, Node: nd.name, Kind: ProgressBlocked, Pod: st.key, Reason: reason, Message: message, PDB: st.pdbName})
		nd.hooks.Recorder.Eventf(st.pod, corev1.EventTypeWarning, "EvictionBlocked", "sluice drain of %s: %s: %s", nd.name, reason, message)
	}
}

// podGrace is the grace period the pod asks for, or the --grace-period override.
func (nd *nodeDrain) podGrace(st *podState) int64 {
	if nd.opts.GracePeriodSeconds != nil {
		return *nd.opts.GracePeriodSeconds
	}
	if st.pod.Spec.TerminationGracePeriodSeconds != nil {
		return *st.pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// graceFor is the grace to give the pod now: its own, shortened to end a
// second before the deadline.
func (nd *nodeDrain) graceFor(st *podState, now time.Time) int64 {
	g := nd.podGrace(st)
	if nd.opts.Deadline.IsZero() {
		return g
	}
	left := int64(nd.opts.Deadline.Sub(now)/time.Second) - 1
	return max(min(g, left), 1)
}

// forcePoint is when a held pod must be deleted to still get its whole grace
// period, plus graceFor's one-second margin, before the deadline (one more
// second absorbs rounding down to whole seconds); only with --on-deadline=delete.
func (nd *nodeDrain) forcePoint(st *podState) (time.Time, bool) {
	if nd.opts.Deadline.IsZero() || nd.opts.OnDeadline != OnDeadlineDelete || st.blockedSince == nil {
		return time.Time{}, false
	}
	switch st.reason {
	case ReasonPDBBlocked, ReasonPDBWaitingForPods, ReasonPDBDeadlock, ReasonMultiplePDBs, ReasonDoNotDisrupt:
	default:
		// An admission denial or an API error is not ours to override.
		return time.Time{}, false
	}
	return nd.opts.Deadline.Add(-time.Duration(nd.podGrace(st)+2) * time.Second), true
}

func (nd *nodeDrain) mayForce(st *podState, now time.Time) bool {
	at, ok := nd.forcePoint(st)
	return ok && !now.Before(at)
}

// force deletes a pod a budget or an annotation still holds, because the
// deadline leaves no time to wait: the node is going away, and a graceful
// delete now beats a hard kill later.
func (nd *nodeDrain) force(ctx context.Context, st *podState) {
	now := nd.clock.Now()
	grace := nd.graceFor(st, now)
	why := fmt.Sprintf("deleted despite %s (%s) with %ds grace: the deadline is in %s", st.reason, st.message, grace,
		nd.opts.Deadline.Sub(now).Round(time.Second))
	err := nd.deletePod(ctx, st, grace)
	if err != nil && !apierrors.IsNotFound(err) {
		nd.block(st, ReasonError, "forcing before the deadline: "+err.Error(), false)
		nd.awaitGone(ctx, st)
		return
	}
	st.outcome, st.reason, st.message, st.grace, st.blockedSince = PodDeleted, ReasonDeadlineForced, why, &grace, nil
	st.stuck.Store(false)
	nd.hooks.Observer.Observe(Progress{Time: now, Node: nd.name, Kind: ProgressForced, Pod: st.key, Reason: ReasonDeadlineForced, Message: why, PDB: st.pdbName})
	nd.hooks.Recorder.Eventf(st.pod, corev1.EventTypeWarning, string(ReasonDeadlineForced), "sluice drain of %s: %s", nd.name, why)
	nd.awaitGone(ctx, st)
}

// isBudgetRefusal recognises the 429 the eviction API answers for a budget
// (its details carry a DisruptionBudget cause), as opposed to throttling.
func isBudgetRefusal(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == policyv1.DisruptionBudgetCause {
			return true
		}
	}
	return false
}

// isMultipleBudgets recognises the API server's refusal to evict a pod that
// several budgets select (a 500, not a 429).
func isMultipleBudgets(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsInternalError(err) && errors.As(err, &status) &&
		strings.Contains(status.Status().Message, "more than one PodDisruptionBudget")
}
