package audit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// The rules below are the auditor's own reading of the user documentation.
// They deliberately do not call internal/budget, internal/disruption or
// pkg/drain.

// Names from the cluster contract (docs/pools.md, docs/drain.md), spelled out
// here rather than imported so a renamed constant in sluice shows up as a
// breach instead of silently following along.
const (
	annotationRecord     = "sluice.dev/disruption"
	annotationCordonedBy = "sluice.dev/cordoned-by"
	finalizerTermination = "sluice.dev/termination"
	ownerCLI             = "cli"
	reasonForced         = "DeadlineForced"
	reasonDeleted        = "Deleted"
)

// doNotDisrupt are the opt-outs docs/pools.md says sluice honours, with the
// value that means "protected for ever"; a duration protects while the
// object is younger than it.
var doNotDisrupt = map[string]string{
	"sluice.dev/do-not-disrupt":                      "true",
	"karpenter.sh/do-not-disrupt":                    "true",
	"cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
}

// defaultBudget is the budget docs/pools.md gives a pool that names none.
const defaultBudget = "10%"

// voluntary says whether reason r is sluice acting of its own accord (a
// person's deletion is not: they asked for it).
func voluntary(r string) bool {
	switch v1alpha1.DisruptionReason(r) {
	case v1alpha1.ReasonEmpty, v1alpha1.ReasonUnderutilized, v1alpha1.ReasonDrifted, v1alpha1.ReasonExpired, v1alpha1.ReasonUpgrade,
		v1alpha1.ReasonRebootRequired:
		return true
	}
	return false
}

// protected says why the annotations protect an object created at created,
// or "" when they do not.
func protected(annotations map[string]string, created, now time.Time) string {
	for key, forever := range doNotDisrupt {
		v, ok := annotations[key]
		if !ok {
			continue
		}
		if v == forever {
			return key + "=" + v
		}
		if d, err := time.ParseDuration(v); err == nil && now.Before(created.Add(d)) {
			return fmt.Sprintf("%s=%s (age %s)", key, v, now.Sub(created).Round(time.Second))
		}
	}
	return ""
}

// budgetLimit is how many of size nodes the pool's budgets let be out of
// service for reason now: the most restrictive budget in force that applies
// to the reason (one naming no reasons applies to all, a person's deletion
// included). ok is false when a budget cannot be read (the auditor then
// does not judge).
func budgetLimit(budgets []v1alpha1.Budget, size int, reason string, now time.Time) (limit int, why string, ok bool) {
	if len(budgets) == 0 {
		budgets = []v1alpha1.Budget{{Nodes: defaultBudget}}
	}
	limit, why = math.MaxInt, "no budget in force"
	for _, b := range budgets {
		if !appliesTo(b, reason) {
			continue
		}
		active, err := inForce(b, now)
		if err != nil {
			return 0, err.Error(), false
		}
		if !active {
			continue
		}
		n, err := nodesOf(b.Nodes, size)
		if err != nil {
			return 0, err.Error(), false
		}
		if n < limit {
			limit, why = n, fmt.Sprintf("budget nodes=%s of %d", b.Nodes, size)
		}
	}
	return limit, why, true
}

func appliesTo(b v1alpha1.Budget, reason string) bool {
	if len(b.Reasons) == 0 {
		return true
	}
	for _, r := range b.Reasons {
		if string(r) == reason {
			return true
		}
	}
	return false
}

// inForce: a budget without a schedule always is; one with a schedule is
// from each time the schedule fires until its duration has passed.
func inForce(b v1alpha1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil {
		return true, nil
	}
	if b.Duration == nil {
		return false, fmt.Errorf("budget %q has a schedule and no duration", *b.Schedule)
	}
	loc := time.UTC
	if b.TimeZone != nil {
		l, err := time.LoadLocation(*b.TimeZone)
		if err != nil {
			return false, err
		}
		loc = l
	}
	sched, err := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor).Parse(*b.Schedule)
	if err != nil {
		return false, err
	}
	// The window is open now if the schedule fired within the last
	// duration: its first firing after now-duration is not after now.
	// (cron's Next is strictly after its argument, so step back a second.)
	fire := sched.Next(now.Add(-b.Duration.Duration - time.Second).In(loc))
	return !fire.After(now), nil
}

// nodesOf reads a budget's nodes: a count, or a percentage of size rounded
// up.
func nodesOf(nodes string, size int) (int, error) {
	if pct, ok := strings.CutSuffix(nodes, "%"); ok {
		p, err := strconv.Atoi(pct)
		if err != nil || p < 0 || p > 100 {
			return 0, fmt.Errorf("budget nodes %q is not a percentage", nodes)
		}
		return (size*p + 99) / 100, nil
	}
	n, err := strconv.Atoi(nodes)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("budget nodes %q is not a count", nodes)
	}
	return n, nil
}

// pdbFloor is how many of the PDB's pods must stay healthy, computed from its
// spec and the disruption controller's count of the pods it expects, rounding
// as that controller does (up, both for minAvailable and maxUnavailable
// percentages). ok is false until the disruption controller has counted.
func pdbFloor(pdb *policyv1.PodDisruptionBudget) (floor int, ok bool) {
	expected := int(pdb.Status.ExpectedPods)
	if pdb.Status.ObservedGeneration < pdb.Generation || expected == 0 {
		return 0, false
	}
	switch {
	case pdb.Spec.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, expected, true)
		return v, err == nil
	case pdb.Spec.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, expected, true)
		return max(0, expected-v), err == nil
	}
	return 0, false
}

// ready: the kubelet says the pod passes its readiness checks.
func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeReady: the node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// outOfService is docs/pools.md's "what counts as disrupted", less the drain
// claim (always paired with a cordon, and a cordon the auditor sees).
func outOfService(n *corev1.Node) bool { return whyOut(n) != "" }

// fellNotReadyAfter says whether the node is out of service only for being
// NotReady, and has been since after t (its Ready condition's last
// transition, as the node lifecycle controller wrote it).
func fellNotReadyAfter(n *corev1.Node, t time.Time) bool {
	if t.IsZero() || whyOut(n) != "NotReady" {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastTransitionTime.After(t)
		}
	}
	return false
}

// whyOut says, in a word or two, why a node is out of service: the auditor's
// breach names each node with it, so a breach caused by nodes falling
// NotReady (a loaded sandbox's missed leases) is told from one the
// controller's marks made.
func whyOut(n *corev1.Node) string {
	var why []string
	if _, marked := n.Annotations[annotationRecord]; marked {
		why = append(why, "marked")
	}
	if n.DeletionTimestamp != nil {
		why = append(why, "deleting")
	}
	if n.Spec.Unschedulable {
		why = append(why, "cordoned")
	}
	if !nodeReady(n) {
		why = append(why, "NotReady")
	}
	return strings.Join(why, "+")
}

// exempt says whether a pod need not leave before its node goes: a
// DaemonSet's pod, a mirror pod, or one that has finished.
func exempt(p *corev1.Pod) bool {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
