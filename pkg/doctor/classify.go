package doctor

import (
	"time"

	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/drain"
)

// assumed are the drain flags doctor predicts for: kubectl's defaults plus
// --ignore-daemonsets, with which nearly every drain is run.
var assumed = drain.Options{IgnoreDaemonSets: true}

// classifyAll asks the drain's own classifier about every scheduled pod, with
// the DaemonSets as listed, so doctor never disagrees with the drain it
// predicts.
func classifyAll(in Input) [][]drain.Classification {
	daemonSets := make(map[string]bool, len(in.DaemonSets))
	for _, ds := range in.DaemonSets {
		daemonSets[ds.Namespace+"/"+ds.Name] = true
	}
	exists := func(namespace, name string) bool { return daemonSets[namespace+"/"+name] }
	out := make([][]drain.Classification, len(in.Pods))
	for i := range in.Pods {
		if in.Pods[i].Spec.NodeName != "" {
			out[i] = classify(&in.Pods[i], in.Now, exists)
		}
	}
	return out
}

// classify walks the drain's verdicts on pod the way an operator meets them:
// a refusal that a flag overrides is kept, the flag is set, and the pod is
// classified again. The result lists, in the drain's order, each refusal and
// then the verdict once no flag helps, so one pod can show several problems
// (no controller and emptyDir data) without doctor judging pods itself.
func classify(pod *corev1.Pod, now time.Time, daemonSetExists func(namespace, name string) bool) []drain.Classification {
	opts := assumed
	var steps []drain.Classification
	for {
		c := drain.Classify(pod, opts, now, daemonSetExists)
		steps = append(steps, c)
		if c.Verdict != drain.VerdictRefuse {
			return steps
		}
		switch {
		case c.Reason == drain.ReasonLocalStorage && !opts.DeleteEmptyDirData:
			opts.DeleteEmptyDirData = true
		case (c.Reason == drain.ReasonUnreplicated || c.Reason == drain.ReasonDaemonSetPod) && !opts.Force:
			opts.Force = true
		default:
			return steps
		}
	}
}

// movable: the drain moves the pod and its controller recreates it
// elsewhere, so the room check must place it. Pods only --force moves are
// not recreated; DaemonSet, mirror and terminating pods stay where they are.
// A held pod (do-not-disrupt) counts if a controller will recreate it: a
// deadline deletes it in the end.
func movable(p *corev1.Pod, steps []drain.Classification) bool {
	for _, c := range steps {
		if c.Verdict == drain.VerdictRefuse && c.Reason != drain.ReasonLocalStorage {
			return false
		}
	}
	last := steps[len(steps)-1]
	return (last.Verdict == drain.VerdictLeave || last.Verdict == drain.VerdictHold) && last.Reason != drain.ReasonDaemonSetPod &&
		metav1.GetControllerOf(p) != nil
}

// classFinding words one of the drain's verdicts as a finding (without its
// object and node); verdicts that need no attention give none.
func classFinding(p *corev1.Pod, c drain.Classification) (Finding, bool) {
	code := string(c.Reason)
	switch {
	case c.Verdict == drain.VerdictRefuse && c.Reason == drain.ReasonUnreplicated:
		return Finding{Severity: SeverityError, Code: code,
			Message: "has no controller: a drain refuses it, and with --force it is deleted and never recreated",
			Fix:     "run it under a Deployment or StatefulSet"}, true
	case c.Verdict == drain.VerdictRefuse && c.Reason == drain.ReasonLocalStorage:
		var names []string
		for _, v := range p.Spec.Volumes {
			if v.EmptyDir != nil {
				names = append(names, v.Name)
			}
		}
		what := "volume " + names[0] + " is"
		if len(names) > 1 {
			what = "volumes " + strings.Join(names, ", ") + " are"
		}
		return Finding{Severity: SeverityWarning, Code: code,
			Message: fmt.Sprintf("its emptyDir %s lost when it is evicted; drains refuse it without --delete-emptydir-data", what),
			Fix:     "keep data that must survive in a PersistentVolume"}, true
	case c.Verdict == drain.VerdictRefuse && c.Reason == drain.ReasonDaemonSetPod:
		name := metav1.GetControllerOf(p).Name
		return Finding{Severity: SeverityError, Code: code,
			Message: fmt.Sprintf("its DaemonSet %s is gone, so nothing manages it: a drain refuses it, and with --force it is deleted and never recreated", name),
			Fix:     fmt.Sprintf("delete the pod, or recreate DaemonSet %s if it should still run here", name)}, true
	case c.Verdict == drain.VerdictSkip && c.Reason == drain.ReasonDaemonSetPod:
		return Finding{Severity: SeverityInfo, Code: code,
			Message: "managed by DaemonSet " + metav1.GetControllerOf(p).Name + "; drains leave it (--ignore-daemonsets)"}, true
	case c.Verdict == drain.VerdictHold, c.Verdict == drain.VerdictRefuse:
		// The drain's sentence names the annotation (or cause) and the way out.
		return Finding{Severity: SeverityError, Code: code, Message: c.Message}, true
	}
	return Finding{}, false
}
