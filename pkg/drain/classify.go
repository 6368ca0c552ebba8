package drain

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/pkg/contract"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Verdict is what a drain does with a pod.
type Verdict int

// Verdicts.
const (
	// VerdictLeave: the pod must leave the node (evicted, or deleted with
	// DisableEviction).
	VerdictLeave Verdict = iota
	// VerdictWait: the pod is already terminating; the drain waits for it.
	VerdictWait
	// VerdictSkip: the pod stays on the node; it does not stop the drain.
	VerdictSkip
	// VerdictRefuse: the pod stops the drain until a flag or the pod changes.
	VerdictRefuse
	// VerdictHold: the pod cannot leave without a change (it asks not to be
	// disrupted, or its budget can never allow it); only a deadline overrides.
	VerdictHold
)

func (v Verdict) String() string {
	switch v {
	case VerdictLeave:
		return "Leave"
	case VerdictWait:
		return "Wait"
	case VerdictSkip:
		return "Skip"
	case VerdictRefuse:
		return "Refuse"
	case VerdictHold:
		return "Hold"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Classification is a verdict with its reason code and the sentence a person
// reads. A VerdictLeave classification may carry warnings in Message (what
// Force or DeleteEmptyDirData will cost) and has no Reason.
type Classification struct {
	Verdict Verdict
	Reason  Reason
	Message string
	// Until is when a VerdictHold ends by itself (a do-not-disrupt
	// duration); zero when only a change or a deadline ends it.
	Until time.Time
}

// Annotations by which pods opt out of voluntary disruption. sluice honours
// the ecosystem's as well as its own.
const (
	// AnnotationKarpenterDoNotDisrupt "true" is Karpenter's spelling of the same.
	AnnotationKarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	// AnnotationSafeToEvict "false" is the cluster autoscaler's.
	AnnotationSafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"
)

// Classify decides what a drain run with opts does with pod, before any
// budget is consulted: kubectl drain's filters in kubectl's order (already
// terminating, mirror, finished, DaemonSet, local storage, unreplicated), with
// sluice's do-not-disrupt check before local storage. The first filter with
// an opinion decides; warnings from the filters a flag let through are joined
// into the message.
//
// now is when the drain looks: a do-not-disrupt duration holds until it has
// passed since the pod started.
//
// daemonSetExists says whether the named DaemonSet exists: a pod whose
// DaemonSet is gone is an orphan nothing will recreate. Classify is pure, so
// tools that predict a drain (sluice doctor) reach the drain's own verdicts
// from listed objects; the drain engine calls it with a live lookup.
func Classify(pod *corev1.Pod, opts Options, now time.Time, daemonSetExists func(namespace, name string) bool) Classification {
	f := filters{opts: &opts, now: now, daemonSetExists: daemonSetExists}
	var warnings []string
	for _, filter := range []podFilter{f.terminating, f.mirror, f.finished, f.daemonSet, f.doNotDisrupt, f.localStorage, f.unreplicated} {
		c, decided := filter(pod)
		if decided {
			if c.Verdict == VerdictLeave && len(warnings) > 0 {
				c.Message = strings.Join(append(warnings, c.Message), "; ")
			}
			return c
		}
		if c.Message != "" {
			warnings = append(warnings, c.Message)
		}
	}
	return Classification{Verdict: VerdictLeave, Message: strings.Join(warnings, "; ")}
}

// The engine's own names for the verdicts, and the classification it keeps
// per pod; budget checks replace it with their own verdicts.
type verdict = Verdict

const (
	mustLeave = VerdictLeave
	waitGone  = VerdictWait
	skip      = VerdictSkip
	refuse    = VerdictRefuse
	hold      = VerdictHold
)

type classification struct {
	verdict verdict
	reason  Reason
	message string
	until   time.Time // a hold's end, when it ends by itself
}

// daemonSetChecker answers whether a DaemonSet exists, asking the API server.
type daemonSetChecker func(ctx context.Context, namespace, name string) (bool, error)

// classifier is Classify as the drain engine runs it: DaemonSets are looked
// up live, and a lookup that fails refuses the pod rather than guessing.
type classifier struct {
	opts            *Options
	daemonSetExists daemonSetChecker
	now             func() time.Time // nil: time does not matter (tests of verdicts that do not read it)
}

func (c *classifier) classify(ctx context.Context, pod *corev1.Pod) classification {
	var lookup error
	var daemonSet string
	var now time.Time
	if c.now != nil {
		now = c.now()
	}
	v := Classify(pod, *c.opts, now, func(namespace, name string) bool {
		exists, err := c.daemonSetExists(ctx, namespace, name)
		lookup, daemonSet = err, name
		return exists
	})
	if lookup != nil {
		return classification{verdict: refuse, reason: ReasonError, message: fmt.Sprintf("checking DaemonSet %s: %v", daemonSet, lookup)}
	}
	// kubectl's --skip-wait-for-delete-timeout: a pod still there longer
	// than that after its deletion timestamp (the end of its grace period)
	// is left behind, not waited for.
	if after := c.opts.SkipWaitForDeleteTimeout; v.Verdict == VerdictWait && after > 0 && c.now != nil && pod.DeletionTimestamp != nil {
		if over := c.now().Sub(pod.DeletionTimestamp.Time); over > after {
			return classification{verdict: skip, reason: ReasonTerminating, message: fmt.Sprintf(
				"still terminating %s after its grace period ended, longer than --skip-wait-for-delete-timeout %s: not waited for", over.Round(time.Second), after)}
		}
	}
	return classification{verdict: v.Verdict, reason: v.Reason, message: v.Message, until: v.Until}
}

// filters are Classify's steps. Each returns a decision, or a warning (in
// Message) and false to let the next filter look.
type filters struct {
	opts            *Options
	now             time.Time
	daemonSetExists func(namespace, name string) bool
}

type podFilter func(pod *corev1.Pod) (Classification, bool)

func (f filters) terminating(pod *corev1.Pod) (Classification, bool) {
	if pod.DeletionTimestamp == nil {
		return Classification{}, false
	}
	return Classification{Verdict: VerdictWait, Reason: ReasonTerminating, Message: "was already terminating"}, true
}

func (f filters) mirror(pod *corev1.Pod) (Classification, bool) {
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; !ok {
		return Classification{}, false
	}
	return Classification{Verdict: VerdictSkip, Reason: ReasonMirrorPod, Message: "static pod: only the node's kubelet can remove it"}, true
}

// finished pods hold no workload: they go whatever else is true of them.
func (f filters) finished(pod *corev1.Pod) (Classification, bool) {
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		return Classification{}, false
	}
	return Classification{Verdict: VerdictLeave}, true
}

// DaemonSetOf is the DaemonSet (apps) that controls the pod, nil when none
// does: the one reading of "a DaemonSet's pod" for the drain, consolidation,
// upgrades and the forecast.
func DaemonSetOf(pod *corev1.Pod) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" || !strings.HasPrefix(ref.APIVersion, "apps/") {
		return nil
	}
	return ref
}

func (f filters) daemonSet(pod *corev1.Pod) (Classification, bool) {
	ref := DaemonSetOf(pod)
	if ref == nil {
		return Classification{}, false
	}
	if !f.daemonSetExists(pod.Namespace, ref.Name) {
		if f.opts.Force {
			return Classification{Message: fmt.Sprintf("its DaemonSet %s is gone; deleting the orphan (--force)", ref.Name)}, false
		}
		return Classification{Verdict: VerdictRefuse, Reason: ReasonDaemonSetPod,
			Message: fmt.Sprintf("its DaemonSet %s is gone, so nothing manages it; use --force to delete it", ref.Name)}, true
	}
	if f.opts.EvictDaemonSets {
		return Classification{Verdict: VerdictLeave, Reason: ReasonDaemonSetPod, Message: fmt.Sprintf("managed by DaemonSet %s; evicted last", ref.Name)}, true
	}
	if !f.opts.IgnoreDaemonSets {
		return Classification{Verdict: VerdictRefuse, Reason: ReasonDaemonSetPod,
			Message: fmt.Sprintf("managed by DaemonSet %s, which would recreate it here; use --ignore-daemonsets to leave it", ref.Name)}, true
	}
	return Classification{Verdict: VerdictSkip, Reason: ReasonDaemonSetPod, Message: fmt.Sprintf("managed by DaemonSet %s; left on the node", ref.Name)}, true
}

func (f filters) doNotDisrupt(pod *corev1.Pod) (Classification, bool) {
	var since time.Time
	if pod.Status.StartTime != nil {
		since = pod.Status.StartTime.Time
	}
	value := pod.Annotations[contract.AnnotationDoNotDisrupt]
	hold := DoNotDisrupt(value, since, f.now)
	var why string
	switch {
	// The ecosystem's opt-outs hold for good: they go first, so a hold
	// that ends by itself is reported only when nothing else holds.
	case pod.Annotations[AnnotationKarpenterDoNotDisrupt] == "true":
		why, hold.Until = "annotated "+AnnotationKarpenterDoNotDisrupt+"=true", time.Time{}
	case pod.Annotations[AnnotationSafeToEvict] == "false":
		why, hold.Until = "annotated "+AnnotationSafeToEvict+"=false", time.Time{}
	case hold.Holds:
		why = hold.describe(contract.AnnotationDoNotDisrupt, value)
	default:
		return Classification{}, false
	}
	return Classification{Verdict: VerdictHold, Reason: ReasonDoNotDisrupt, Until: hold.Until,
		Message: why + "; remove the annotation, or drain with a --deadline to have it deleted when time runs out"}, true
}

func (f filters) localStorage(pod *corev1.Pod) (Classification, bool) {
	var names []string
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			names = append(names, v.Name)
		}
	}
	if len(names) == 0 {
		return Classification{}, false
	}
	if f.opts.DeleteEmptyDirData {
		return Classification{Message: fmt.Sprintf("emptyDir data (%s) is deleted", strings.Join(names, ", "))}, false
	}
	return Classification{Verdict: VerdictRefuse, Reason: ReasonLocalStorage,
		Message: fmt.Sprintf("uses emptyDir %s, whose data would be lost; use --delete-emptydir-data to evict it anyway", strings.Join(names, ", "))}, true
}

func (f filters) unreplicated(pod *corev1.Pod) (Classification, bool) {
	if metav1.GetControllerOf(pod) != nil {
		return Classification{}, false
	}
	if f.opts.Force {
		return Classification{Message: "no controller: it is not recreated (--force)"}, false
	}
	return Classification{Verdict: VerdictRefuse, Reason: ReasonUnreplicated,
		Message: "has no controller, so nothing would recreate it; use --force to evict it anyway"}, true
}

// cachedDaemonSets answers DaemonSet existence with one GET per DaemonSet.
func cachedDaemonSets(get func(ctx context.Context, namespace, name string) error) daemonSetChecker {
	type key struct{ ns, name string }
	var mu sync.Mutex
	seen := map[key]bool{}
	return func(ctx context.Context, namespace, name string) (bool, error) {
		k := key{namespace, name}
		mu.Lock()
		exists, ok := seen[k]
		mu.Unlock()
		if ok {
			return exists, nil
		}
		err := get(ctx, namespace, name)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			seen[k] = true
		case apierrors.IsNotFound(err):
			seen[k] = false
		default:
			return false, err
		}
		return seen[k], nil
	}
}
