package nodepool

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// upgradeRecheck is when a node of an upgrade should be looked at again
// without an event to wake the pool: a drain's timeout, a soak's end.
func (c *Controller) upgradeRecheck(pool *v1alpha1.NodePool, rec *disruption.Record, now time.Time) time.Duration {
	switch rec.Phase {
	case disruption.PhaseDraining:
		if rec.DrainStarted != nil {
			return min(launchingRecheck*2, max(rec.DrainStarted.Add(pool.Spec.Upgrade.DrainTimeoutOrDefault()).Sub(now), time.Second))
		}
	case disruption.PhaseSoaking:
		if rec.Drained != nil {
			return max(rec.Drained.Add(pool.Spec.Upgrade.SoakOrDefault()).Sub(now), 100*time.Millisecond)
		}
	}
	return launchingRecheck
}

// upgradeFailed says why the pool's upgrade has failed for good, "" when it
// has not: more nodes than maxBlockedNodes whose surge nodes failed the
// health gate (the image is what is wrong), or, with Cordon, more nodes
// quarantined than that.
func upgradeFailed(pool *v1alpha1.NodePool, v *view) string {
	if !upgrading(pool) {
		return ""
	}
	image := pool.Spec.Template.Image
	var quarantined, gated []string
	for _, n := range v.Nodes {
		switch {
		case !BlockedFor(n, image):
		case n.Labels[contract.LabelUpgradeStatus] == v1alpha1.UpgradeStatusQuarantined:
			quarantined = append(quarantined, n.Name)
		case n.Annotations[contract.AnnotationUpgradeBlockedBy] == v1alpha1.BlockedByHealthGate:
			gated = append(gated, n.Name)
		}
	}
	surge, _, _ := v.UpgradeWidth()
	limit := pool.Spec.Upgrade.MaxBlocked(surge)
	if len(gated) > limit {
		return fmt.Sprintf("the surge nodes of %d nodes (%s) did not pass the health gate on %s, more than maxBlockedNodes %d: no more nodes are upgraded; the image's node agents do not come up (the pool's UpgradeRolledBack Events name them); fix the image or the DaemonSets, then run `sluice upgrade pool %s --image %s` again",
			len(gated), strings.Join(gated, ", "), image, limit, pool.Name, image)
	}
	if pool.Spec.Upgrade.Behavior() == v1alpha1.UndrainableCordon && len(quarantined) > limit {
		return fmt.Sprintf("%d nodes are quarantined (%s), more than maxBlockedNodes %d: no more nodes are upgraded; fix what holds their pods (`sluice doctor`), then run `sluice upgrade pool %s --image %s` again",
			len(quarantined), strings.Join(quarantined, ", "), limit, pool.Name, image)
	}
	return ""
}

// upgradeStatus derives the pool's upgrade from its nodes: nil when the
// pool does not upgrade, or every node is on the template's image and no
// upgrade was ever seen.
func upgradeStatus(pool *v1alpha1.NodePool, v *view, now time.Time) *v1alpha1.UpgradeStatus {
	if !upgrading(pool) {
		return nil
	}
	image := pool.Spec.Template.Image
	prev := pool.Status.Upgrade
	st, t := tally(pool, v)
	if t.remaining == 0 && len(st.Blocked) == 0 && len(st.Quarantined) == 0 && (prev == nil || prev.Image != image) {
		return nil // nothing to upgrade, and no upgrade to this image seen
	}
	batch := batchSize(v)
	st.Batches = clamp32(ceilDiv(int(st.Nodes), batch))
	st.Batch = clamp32(min(int(st.Upgraded)/batch+1, int(st.Batches)))
	st.StartedAt = &metav1.Time{Time: now}
	if prev != nil && prev.Image == image && prev.StartedAt != nil {
		st.StartedAt = prev.StartedAt
	}
	st.Phase, st.Message = upgradePhase(pool, v, st, t.remaining)
	if st.Phase == v1alpha1.UpgradeSucceeded || st.Phase == v1alpha1.UpgradeFailed {
		st.CompletedAt = &metav1.Time{Time: now}
		if prev != nil && prev.Image == image && prev.CompletedAt != nil && prev.Phase == st.Phase {
			st.CompletedAt = prev.CompletedAt
		}
	}
	st.Step = step(t.launching, t.draining, t.soaking, pool)
	st.ETA = eta(st, t.remaining, batch, now)
	if prev != nil && prev.ETA != nil && st.ETA != nil && st.ETA.Sub(prev.ETA.Time).Abs() < 5*time.Second {
		st.ETA = prev.ETA // no status write for a few seconds' wobble
	}
	return st
}

// counts are the nodes of an upgrade by where they are.
type counts struct {
	remaining                    int
	launching, draining, soaking []string
}

// tally counts the pool's nodes for its upgrade: upgraded, blocked,
// quarantined, in flight (by step), and still to do.
func tally(pool *v1alpha1.NodePool, v *view) (*v1alpha1.UpgradeStatus, counts) {
	image := pool.Spec.Template.Image
	st := &v1alpha1.UpgradeStatus{Image: image}
	var t counts
	drifted := map[string]bool{} // the candidates' image drift, read once a pass
	for _, c := range v.Candidates {
		if c.ImageDrifted() {
			drifted[c.Node.Name] = true
		}
	}
	for _, n := range v.Nodes {
		if v.Replacements[n.Name] || removedSurge(n, image) {
			continue // a surge node counts once the node it replaces is gone, never once it is taken back
		}
		st.Nodes++
		switch {
		case n.Annotations[contract.AnnotationImage] == image && !drifted[n.Name]:
			st.Upgraded++
		case BlockedFor(n, image) && n.Labels[contract.LabelUpgradeStatus] == v1alpha1.UpgradeStatusQuarantined:
			st.Quarantined = append(st.Quarantined, n.Name)
		case BlockedFor(n, image):
			st.Blocked = append(st.Blocked, n.Name)
		default:
			t.remaining++
		}
		rec := upgradeRecord(n)
		if rec == nil {
			continue
		}
		st.InFlight++
		switch rec.Phase {
		case disruption.PhaseLaunching:
			t.launching = append(t.launching, n.Name)
		case disruption.PhaseDraining:
			t.draining = append(t.draining, n.Name)
		case disruption.PhaseSoaking:
			t.soaking = append(t.soaking, n.Name)
		}
	}
	return st, t
}

// removedSurge says whether the node is a surge node on its way out after
// a rollback: marked Removing by the upgrade, or already being deleted on
// the new image.
func removedSurge(n *corev1.Node, image string) bool {
	if rec, err := disruption.RecordOf(n); err == nil && rec != nil && rec.Reason == v1alpha1.ReasonUpgrade && rec.Phase == disruption.PhaseRemoving {
		return true
	}
	return n.DeletionTimestamp != nil && n.Annotations[contract.AnnotationImage] == image
}

// upgradePhase is the upgrade's phase, and why when it needs saying.
func upgradePhase(pool *v1alpha1.NodePool, v *view, st *v1alpha1.UpgradeStatus, remaining int) (v1alpha1.UpgradePhase, string) {
	given := len(st.Blocked) + len(st.Quarantined)
	switch failed := upgradeFailed(pool, v); {
	case failed != "":
		return v1alpha1.UpgradeFailed, failed
	case remaining == 0 && st.InFlight == 0 && given > 0:
		return v1alpha1.UpgradeFailed, fmt.Sprintf("%d node(s) stay on their old image (did not drain within drainTimeout, or their surge node failed the health gate; each node's %s says which): %s",
			given, contract.AnnotationUpgradeBlockedBy, strings.Join(append(slices.Clone(st.Blocked), st.Quarantined...), ", "))
	case remaining == 0 && st.InFlight == 0:
		return v1alpha1.UpgradeSucceeded, ""
	case upgradeControl(pool) == v1alpha1.UpgradeControlPaused:
		return v1alpha1.UpgradePaused, "paused by sluice upgrade pause: nodes in flight finish, no new one starts; sluice upgrade resume goes on"
	case upgradeControl(pool) == v1alpha1.UpgradeControlAborted:
		return v1alpha1.UpgradeAborted, "aborted by sluice upgrade abort: nodes in flight were rolled back; sluice upgrade resume starts again"
	}
	return v1alpha1.UpgradeProgressing, ""
}

// batchSize is how many nodes the upgrade takes at once: surge plus
// unavailable, at least 1.
func batchSize(v *view) int {
	surge, unavailable, _ := v.UpgradeWidth()
	return max(surge+unavailable, 1)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// step says what the upgrade waits on now.
func step(launching, draining, soaking []string, pool *v1alpha1.NodePool) string {
	var parts []string
	if len(launching) > 0 {
		parts = append(parts, fmt.Sprintf("%d surge node(s) booting for %s", len(launching), names(launching)))
	}
	if len(draining) > 0 {
		parts = append(parts, fmt.Sprintf("draining %s (drainTimeout %s)", names(draining), pool.Spec.Upgrade.DrainTimeoutOrDefault()))
	}
	if len(soaking) > 0 {
		parts = append(parts, fmt.Sprintf("soaking %s (%s)", names(soaking), pool.Spec.Upgrade.SoakOrDefault()))
	}
	return strings.Join(parts, "; ")
}

func names(ns []string) string {
	if len(ns) > 3 {
		return strings.Join(ns[:3], ", ") + fmt.Sprintf(" and %d more", len(ns)-3)
	}
	return strings.Join(ns, ", ")
}

// eta extrapolates the batches done so far to the ones left; nil before
// the first node is done, or once the upgrade has ended.
func eta(st *v1alpha1.UpgradeStatus, remaining, batch int, now time.Time) *metav1.Time {
	if st.CompletedAt != nil || st.Upgraded == 0 || st.StartedAt == nil || remaining+int(st.InFlight) == 0 {
		return nil
	}
	elapsed := now.Sub(st.StartedAt.Time)
	perNode := elapsed / time.Duration(st.Upgraded)
	left := ceilDiv(remaining, batch) * batch
	t := metav1.NewTime(now.Add(perNode * time.Duration(left)).Truncate(time.Second))
	return &t
}
