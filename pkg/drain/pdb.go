package drain

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// budgetsFor returns the PodDisruptionBudgets in the pod's namespace whose
// selector matches it. In policy/v1 an empty selector matches every pod of the
// namespace and a nil one matches none.
func budgetsFor(pod *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, pdb := range pdbs {
		if pdb.Namespace != pod.Namespace || pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// multipleBudgets is the blocker for a pod two or more budgets select: the API
// server answers its eviction with a 500.
func multipleBudgets(pdbs []*policyv1.PodDisruptionBudget) classification {
	names := make([]string, len(pdbs))
	for i, p := range pdbs {
		names[i] = p.Name
	}
	return classification{verdict: hold, reason: ReasonMultiplePDBs, message: fmt.Sprintf(
		"selected by %d PodDisruptionBudgets (%s); the eviction API refuses such pods. Make the budgets' selectors disjoint, or delete one",
		len(pdbs), strings.Join(names, ", "))}
}

// staticDeadlock reports a budget that can never allow an eviction as it
// stands: its desired healthy count is at or above the pods it expects, so
// only a change to the workload or the budget will free the pod.
func staticDeadlock(pdb *policyv1.PodDisruptionBudget, pod *corev1.Pod) (classification, bool) {
	st := pdb.Status
	if st.ObservedGeneration < pdb.Generation || st.ExpectedPods == 0 {
		return classification{}, false // the disruption controller has not judged it yet
	}
	if st.DisruptionsAllowed > 0 || st.DesiredHealthy < st.ExpectedPods {
		return classification{}, false
	}
	rule, fix := remedy(pdb.Spec, st.ExpectedPods, pdb.Name, workloadOf(pod))
	return classification{verdict: hold, reason: ReasonPDBDeadlock, message: fmt.Sprintf(
		"PodDisruptionBudget %s (%s) needs %d healthy of %d pods, so it never allows an eviction: %s",
		pdb.Name, rule, st.DesiredHealthy, st.ExpectedPods, fix)}, true
}

// diagnoseBlocked explains a budget at zero from the pods it selects. It is a
// deadlock only when waiting cannot help: a replacement the scheduler cannot
// place, or, while the budget lets unhealthy pods go only when it is healthy,
// pods that run but have stayed not Ready for longer than their probes allow
// a start to take (or crash-loop). Pods still starting (Pending, or Running
// and not yet Ready within that window) are a rollout in progress: the budget
// recovers when they are Ready, as kubectl drain would wait for.
func diagnoseBlocked(pdb *policyv1.PodDisruptionBudget, selected []corev1.Pod, now time.Time) (Reason, string) {
	st := pdb.Status
	need := fmt.Sprintf("PodDisruptionBudget %s needs %d healthy pods and has %d", pdb.Name, st.DesiredHealthy, st.CurrentHealthy)
	g := groupPods(selected, now)
	unschedulable, notReady, starting, failing, schedulerSays := g.unschedulable, g.notReady, g.starting, g.failing, g.schedulerSays
	policy := policyv1.IfHealthyBudget
	if pdb.Spec.UnhealthyPodEvictionPolicy != nil {
		policy = *pdb.Spec.UnhealthyPodEvictionPolicy
	}
	// Starting pods are a wait only if, once Ready, they are enough.
	gap := int(st.DesiredHealthy - st.CurrentHealthy)
	switch {
	case len(unschedulable) > 0:
		return ReasonPDBDeadlock, fmt.Sprintf("%s; replacement %s cannot be scheduled (%s): add capacity or relax its constraints",
			need, strings.Join(unschedulable, ", "), schedulerSays)
	case len(failing) > 0 && len(starting) < gap:
		return ReasonPDBDeadlock, fmt.Sprintf("%s; %s cannot start: fix the image or the configuration it needs",
			need, strings.Join(failing, ", "))
	case len(starting) > 0 && (len(starting) >= gap || policy != policyv1.IfHealthyBudget || len(notReady) == 0):
		return ReasonPDBWaitingForPods, fmt.Sprintf("%s; waiting for %s to become Ready", need, strings.Join(starting, ", "))
	case len(notReady) > 0 && policy == policyv1.IfHealthyBudget:
		return ReasonPDBDeadlock, fmt.Sprintf("%s; %s %s Running but not Ready and the budget's unhealthyPodEvictionPolicy is IfHealthyBudget: "+
			"fix their readiness, or set unhealthyPodEvictionPolicy: AlwaysAllow", need, strings.Join(notReady, ", "), isAre(len(notReady)))
	}
	return ReasonPDBBlocked, need + "; waiting for the budget to recover"
}

// podGroups sorts a budget's pods by why they are not (yet) healthy.
type podGroups struct {
	unschedulable, notReady, starting, failing []string
	schedulerSays                              string
}

func groupPods(selected []corev1.Pod, now time.Time) podGroups {
	var g podGroups
	for i := range selected {
		p := &selected[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		switch {
		case p.Spec.NodeName == "":
			if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				g.unschedulable = append(g.unschedulable, p.Name)
				g.schedulerSays = c.Message
			} else {
				g.starting = append(g.starting, p.Name)
			}
		case p.Status.Phase == corev1.PodRunning && !podReady(p):
			if left, ok := startingFor(p, now); ok {
				g.starting = append(g.starting, fmt.Sprintf("%s (Running, not Ready yet; its probes allow %s more)", p.Name, left.Round(time.Second)))
			} else {
				g.notReady = append(g.notReady, p.Name)
			}
		case p.Status.Phase == corev1.PodPending:
			if why := cannotStart(p); why != "" {
				g.failing = append(g.failing, fmt.Sprintf("%s (%s)", p.Name, why))
			} else {
				g.starting = append(g.starting, p.Name)
			}
		}
	}
	return g
}

// cannotStart says why a Pending pod will not start by itself (an image it
// cannot pull, a configuration it lacks, an init container that crash-loops),
// or "" when it may still be starting.
func cannotStart(p *corev1.Pod) string {
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if w := cs.State.Waiting; w != nil {
				switch w.Reason {
				case "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff":
					return w.Reason
				}
			}
		}
	}
	return ""
}

// minStartAllowance is the least time a Running pod is given to become Ready
// before a drain calls it stuck, for pods whose probes say less (or have none).
const minStartAllowance = time.Minute

// startingFor reports whether a Running pod that is not Ready may still become
// Ready by itself, and how long its probes still allow: its readiness has not
// been false for longer than its startup and readiness probes take to give up,
// and no container is crash-looping.
func startingFor(p *corev1.Pod, now time.Time) (time.Duration, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
			return 0, false
		}
	}
	var since time.Time
	if p.Status.StartTime != nil {
		since = p.Status.StartTime.Time
	}
	if c := podCondition(p, corev1.PodReady); c != nil && !c.LastTransitionTime.IsZero() {
		since = c.LastTransitionTime.Time
	}
	if since.IsZero() {
		return minStartAllowance, true // no status to judge by yet: it has only just started
	}
	left := startAllowance(p) - now.Sub(since)
	return left, left > 0
}

// startAllowance is how long the kubelet itself would take to give up on the
// pod starting: the longest container's startup probe window plus its
// readiness probe window, with the kubelet's probe defaults.
func startAllowance(p *corev1.Pod) time.Duration {
	allowance := minStartAllowance
	for _, c := range p.Spec.Containers {
		allowance = max(allowance, probeWindow(c.StartupProbe)+probeWindow(c.ReadinessProbe))
	}
	return allowance
}

func probeWindow(pr *corev1.Probe) time.Duration {
	if pr == nil {
		return 0
	}
	period, failures := pr.PeriodSeconds, pr.FailureThreshold
	if period <= 0 {
		period = 10
	}
	if failures <= 0 {
		failures = 3
	}
	return time.Duration(pr.InitialDelaySeconds+period*failures) * time.Second
}

// workloadOf names the pod's owning workload the way a person scales it.
func workloadOf(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return "pod " + pod.Name
	}
	if ref.Kind == "ReplicaSet" {
		if hash := pod.Labels["pod-template-hash"]; hash != "" && strings.HasSuffix(ref.Name, "-"+hash) {
			return "deployment " + strings.TrimSuffix(ref.Name, "-"+hash)
		}
	}
	return strings.ToLower(ref.Kind) + " " + ref.Name
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	c := podCondition(p, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
