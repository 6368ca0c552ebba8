package disruption

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// Protection is why a node may not be disrupted voluntarily now. It never
// stops maintenance: the cloud takes the node anyway.
type Protection struct {
	// Reason is a stable code, one of the Reason constants.
	Reason string `json:"reason"`
	// Message names the object and the annotation or setting that protects
	// the node, and says how to lift it.
	Message string `json:"message"`
	// Until is when the protection lapses by itself; zero when it holds
	// until someone changes the object.
	Until time.Time `json:"until,omitzero"`
}

// Protection reasons.
const (
	// ReasonPaused: the pool's spec.disruption.paused is true.
	ReasonPaused = "Paused"
	// ReasonPoolDoNotDisrupt: the NodePool is annotated do-not-disrupt.
	ReasonPoolDoNotDisrupt = "PoolDoNotDisrupt"
	// ReasonNodeDoNotDisrupt: the node is annotated do-not-disrupt.
	ReasonNodeDoNotDisrupt = "NodeDoNotDisrupt"
	// ReasonPodDoNotDisrupt: a pod on the node is annotated do-not-disrupt,
	// or not safe to evict.
	ReasonPodDoNotDisrupt = "PodDoNotDisrupt"
)

// Protected says why node may not be disrupted voluntarily at now, nil when
// nothing protects it. pods are the pods on the node; finished and
// terminating ones are passed over.
//
// A paused pool, or one annotated sluice.dev/do-not-disrupt=true, protects
// every node of it. Otherwise the node and each pod may protect it: with
// sluice.dev/do-not-disrupt "true", or a duration counted from the node's
// creation or the pod's start (a pod that has not started is protected); with
// karpenter.sh/do-not-disrupt=true; and, on a pod, with
// cluster-autoscaler.kubernetes.io/safe-to-evict=false. A value sluice cannot
// read protects indefinitely, and the message says so. Of several
// protections, the one that lasts longest is returned, and its message
// counts the other pods that protect the node too.
func Protected(pool *v1alpha1.NodePool, node *corev1.Node, pods []*corev1.Pod, now time.Time) *Protection {
	if p := PoolProtection(pool); p != nil {
		return p
	}
	best := nodeProtection(node, now)
	protecting := 0
	for _, pod := range sortedPods(pods) {
		if p := podProtection(pod, now); p != nil {
			protecting++
			best = longest(best, p)
		}
	}
	if best == nil {
		return nil
	}
	if best.Reason == ReasonPodDoNotDisrupt {
		protecting--
	}
	switch {
	case protecting == 1:
		best.Message += "; 1 other pod protects the node too"
	case protecting > 1:
		best.Message += fmt.Sprintf("; %d other pods protect the node too", protecting)
	}
	return best
}

// PoolProtection says why the pool's voluntary disruption is stopped as a
// whole, nil when it is not: spec.disruption.paused, or the do-not-disrupt
// annotation on the pool, which "true" sets, "" and "false" clear, and any
// other value sets too (an unreadable opt-out protects). The one meaning of
// "paused", for the controller and every command.
func PoolProtection(pool *v1alpha1.NodePool) *Protection {
	if pool == nil {
		return nil
	}
	if pool.DisruptionSpec().IsPaused() {
		return &Protection{Reason: ReasonPaused,
			Message: fmt.Sprintf("NodePool %s has spec.disruption.paused: true, which stops the voluntary disruption of its nodes; set it to false to resume", pool.Name)}
	}
	switch v := pool.Annotations[contract.AnnotationDoNotDisrupt]; v {
	case "", "false":
		return nil
	case "true":
		return &Protection{Reason: ReasonPoolDoNotDisrupt,
			Message: fmt.Sprintf("NodePool %s is annotated %s=true, which stops the voluntary disruption of its nodes; remove the annotation to resume", pool.Name, contract.AnnotationDoNotDisrupt)}
	default:
		return &Protection{Reason: ReasonPoolDoNotDisrupt,
			Message: fmt.Sprintf("NodePool %s is annotated %s=%q, which sluice cannot read (on a NodePool it takes true), so the voluntary disruption of its nodes stops until the value is corrected; set it to true, or remove it to resume", pool.Name, contract.AnnotationDoNotDisrupt, v)}
	}
}

func nodeProtection(node *corev1.Node, now time.Time) *Protection {
	if node == nil {
		return nil
	}
	s := subject{
		reason: ReasonNodeDoNotDisrupt, name: "node " + node.Name,
		since: node.CreationTimestamp.Time, counted: "after it was created",
		unknown: "has no creation time to count from: it protects the node until it has one",
		lift:    "remove the annotation from the node",
	}
	return longest(
		s.doNotDisrupt(node.Annotations[contract.AnnotationDoNotDisrupt], now),
		s.flag(node.Annotations, drain.AnnotationKarpenterDoNotDisrupt, "true"))
}

func podProtection(pod *corev1.Pod, now time.Time) *Protection {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil // It is leaving by itself.
	}
	s := subject{
		reason: ReasonPodDoNotDisrupt, name: "pod " + pod.Namespace + "/" + pod.Name,
		counted: "after it started", unknown: "has not started yet: it protects the node until it has run that long",
		lift: "remove the annotation from the pod (or from its controller's pod template)",
	}
	if pod.Status.StartTime != nil {
		s.since = pod.Status.StartTime.Time
	}
	return longest(longest(
		s.doNotDisrupt(pod.Annotations[contract.AnnotationDoNotDisrupt], now),
		s.flag(pod.Annotations, drain.AnnotationKarpenterDoNotDisrupt, "true")),
		s.flag(pod.Annotations, drain.AnnotationSafeToEvict, "false"))
}

// subject is a node or pod whose annotations may protect the node.
type subject struct {
	reason string
	name   string    // "node a", "pod ns/b"
	since  time.Time // when a duration starts counting; zero when unknown
	// counted and unknown finish the sentences about a duration: when it
	// counts from, and why it cannot count yet.
	counted, unknown string
	lift             string // how to lift the protection, an imperative
}

// doNotDisrupt reads a sluice.dev/do-not-disrupt value: "true", or a
// duration that protects until it has passed since s.since.
// The value is read by drain.DoNotDisrupt, as the drain reads it.
func (s subject) doNotDisrupt(value string, now time.Time) *Protection {
	key := contract.AnnotationDoNotDisrupt
	hold := drain.DoNotDisrupt(value, s.since, now)
	switch {
	case !hold.Holds:
		return nil
	case hold.Unreadable:
		return &Protection{Reason: s.reason, Message: fmt.Sprintf(
			"%s is annotated %s=%q, which is neither true nor a duration such as 2h, so it protects the node until the value is corrected; %s to lift it",
			s.name, key, value, s.lift)}
	case hold.Unstarted:
		return &Protection{Reason: s.reason, Message: fmt.Sprintf("%s is annotated %s=%s and %s; %s to lift it", s.name, key, value, s.unknown, s.lift)}
	case hold.Until.IsZero():
		return &Protection{Reason: s.reason, Message: fmt.Sprintf("%s is annotated %s=true; %s to lift it", s.name, key, s.lift)}
	}
	return &Protection{Reason: s.reason, Until: hold.Until, Message: fmt.Sprintf("%s is annotated %s=%s: protected until %s, %s %s; %s to lift it sooner",
		s.name, key, value, hold.Until.UTC().Format(time.RFC3339), value, s.counted, s.lift)}
}

// flag protects when annotation key has the value on.
func (s subject) flag(annotations map[string]string, key, on string) *Protection {
	if annotations[key] != on {
		return nil
	}
	return &Protection{Reason: s.reason, Message: fmt.Sprintf("%s is annotated %s=%s; %s to lift it", s.name, key, on, s.lift)}
}

// longest returns whichever of a and b lasts longer, a on a tie; indefinite
// protections outlast every other.
func longest(a, b *Protection) *Protection {
	switch {
	case b == nil:
		return a
	case a == nil:
		return b
	case a.Until.IsZero():
		return a
	case b.Until.IsZero() || b.Until.After(a.Until):
		return b
	}
	return a
}

// sortedPods orders pods by namespace and name, so the pod a message names
// does not change with the order of a cache's list.
func sortedPods(pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if p != nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
