package drain

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// verdict is what the drain does with a pod.
type verdict int

const (
	// mustLeave: evict (or delete) the pod.
	mustLeave verdict = iota
	// waitGone: the pod is already terminating; wait for it.
	waitGone
	// skip: leave the pod on the node; it does not stop the node from draining.
	skip
	// refuse: the pod stops the drain until a flag or the pod changes.
	refuse
	// hold: the pod cannot leave without a change (it asks not to be
	// disrupted, or its budget can never allow it); only a deadline overrides.
	hold
)

// classification is a verdict with the reason and the sentence a person reads.
// A mustLeave classification may carry a warning in message.
type classification struct {
	verdict verdict
	reason  Reason
	message string
}

// Annotations by which pods opt out of voluntary disruption. sluice honours
// the ecosystem's as well as its own.
const (
	AnnotationDoNotDisrupt          = "sluice.dev/do-not-disrupt"
	annotationKarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	annotationSafeToEvict           = "cluster-autoscaler.kubernetes.io/safe-to-evict"
)

// daemonSetChecker answers whether a DaemonSet exists (a pod whose DaemonSet
// is gone is an orphan that nothing will recreate).
type daemonSetChecker func(ctx context.Context, namespace, name string) (bool, error)

// classifier applies kubectl drain's filters, in kubectl's order, plus
// sluice's do-not-disrupt check. The first filter with an opinion decides.
type classifier struct {
	opts            *Options
	daemonSetExists daemonSetChecker
}

type podFilter func(ctx context.Context, pod *corev1.Pod) (classification, bool)

func (c *classifier) classify(ctx context.Context, pod *corev1.Pod) classification {
	var warnings []string
	for _, f := range []podFilter{c.terminating, c.mirror, c.finished, c.daemonSet, c.doNotDisrupt, c.localStorage, c.unreplicated} {
		v, decided := f(ctx, pod)
		if decided {
			if v.verdict == mustLeave && len(warnings) > 0 {
				v.message = strings.Join(append(warnings, v.message), "; ")
			}
			return v
		}
		if v.message != "" {
			warnings = append(warnings, v.message)
		}
	}
	return classification{verdict: mustLeave, message: strings.Join(warnings, "; ")}
}

func (c *classifier) terminating(_ context.Context, pod *corev1.Pod) (classification, bool) {
	if pod.DeletionTimestamp == nil {
		return classification{}, false
	}
	return classification{verdict: waitGone, reason: ReasonTerminating, message: "was already terminating"}, true
}

func (c *classifier) mirror(_ context.Context, pod *corev1.Pod) (classification, bool) {
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; !ok {
		return classification{}, false
	}
	return classification{verdict: skip, reason: ReasonMirrorPod, message: "static pod: only the node's kubelet can remove it"}, true
}

// finished pods hold no workload: they go whatever else is true of them.
func (c *classifier) finished(_ context.Context, pod *corev1.Pod) (classification, bool) {
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		return classification{}, false
	}
	return classification{verdict: mustLeave}, true
}

func (c *classifier) daemonSet(ctx context.Context, pod *corev1.Pod) (classification, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" || !strings.HasPrefix(ref.APIVersion, "apps/") {
		return classification{}, false
	}
	exists, err := c.daemonSetExists(ctx, pod.Namespace, ref.Name)
	if err != nil {
		return classification{verdict: refuse, reason: ReasonError, message: fmt.Sprintf("checking DaemonSet %s: %v", ref.Name, err)}, true
	}
	if !exists {
		if c.opts.Force {
			return classification{message: fmt.Sprintf("its DaemonSet %s is gone; deleting the orphan (--force)", ref.Name)}, false
		}
		return classification{verdict: refuse, reason: ReasonDaemonSetPod,
			message: fmt.Sprintf("its DaemonSet %s is gone, so nothing manages it; use --force to delete it", ref.Name)}, true
	}
	if c.opts.EvictDaemonSets {
		return classification{verdict: mustLeave, reason: ReasonDaemonSetPod, message: fmt.Sprintf("managed by DaemonSet %s; evicted last", ref.Name)}, true
	}
	if !c.opts.IgnoreDaemonSets {
		return classification{verdict: refuse, reason: ReasonDaemonSetPod,
			message: fmt.Sprintf("managed by DaemonSet %s, which would recreate it here; use --ignore-daemonsets to leave it", ref.Name)}, true
	}
	return classification{verdict: skip, reason: ReasonDaemonSetPod, message: fmt.Sprintf("managed by DaemonSet %s; left on the node", ref.Name)}, true
}

func (c *classifier) doNotDisrupt(_ context.Context, pod *corev1.Pod) (classification, bool) {
	var why string
	switch {
	case pod.Annotations[AnnotationDoNotDisrupt] == "true":
		why = AnnotationDoNotDisrupt + "=true"
	case pod.Annotations[annotationKarpenterDoNotDisrupt] == "true":
		why = annotationKarpenterDoNotDisrupt + "=true"
	case pod.Annotations[annotationSafeToEvict] == "false":
		why = annotationSafeToEvict + "=false"
	default:
		return classification{}, false
	}
	return classification{verdict: hold, reason: ReasonDoNotDisrupt,
		message: fmt.Sprintf("annotated %s; remove the annotation, or drain with a --deadline to have it deleted when time runs out", why)}, true
}

func (c *classifier) localStorage(_ context.Context, pod *corev1.Pod) (classification, bool) {
	var names []string
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			names = append(names, v.Name)
		}
	}
	if len(names) == 0 {
		return classification{}, false
	}
	if c.opts.DeleteEmptyDirData {
		return classification{message: fmt.Sprintf("emptyDir data (%s) is deleted", strings.Join(names, ", "))}, false
	}
	return classification{verdict: refuse, reason: ReasonLocalStorage,
		message: fmt.Sprintf("uses emptyDir %s, whose data would be lost; use --delete-emptydir-data to evict it anyway", strings.Join(names, ", "))}, true
}

func (c *classifier) unreplicated(_ context.Context, pod *corev1.Pod) (classification, bool) {
	if metav1.GetControllerOf(pod) != nil {
		return classification{}, false
	}
	if c.opts.Force {
		return classification{message: "no controller: it is not recreated (--force)"}, false
	}
	return classification{verdict: refuse, reason: ReasonUnreplicated,
		message: "has no controller, so nothing would recreate it; use --force to evict it anyway"}, true
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
