package disruption_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func TestProtected(t *testing.T) {
	const (
		dnd       = "sluice.dev/do-not-disrupt"
		karpenter = "karpenter.sh/do-not-disrupt"
		safe      = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	)
	type want struct {
		reason  string // "" for nil
		until   time.Time
		message []string // each in the message
	}
	free := want{}
	forever := func(reason string, message ...string) want { return want{reason: reason, message: message} }
	until := func(reason string, at time.Time, message ...string) want {
		return want{reason: reason, until: at, message: message}
	}
	for _, tc := range []struct {
		name string
		pool *v1alpha1.NodePool
		node []nodeOpt
		pods []*corev1.Pod
		now  time.Time
		want want
	}{
		{"nothing protects", nodePool(), nil, []*corev1.Pod{pod("a", "web")}, t0, free},
		{"no pool", nil, nil, nil, t0, free},

		{"pool paused", nodePool(paused), nil, nil, t0,
			forever(disruption.ReasonPaused, "NodePool gpu", "spec.disruption.paused: true", "set it to false")},
		{"pool paused before any annotation", nodePool(paused, poolAnnotated(dnd, "true")), []nodeOpt{annotate(dnd, "true")}, nil, t0,
			forever(disruption.ReasonPaused)},
		{"pool annotated", nodePool(poolAnnotated(dnd, "true")), nil, nil, t0,
			forever(disruption.ReasonPoolDoNotDisrupt, "NodePool gpu", dnd+"=true", "remove the annotation")},
		{"pool annotated false", nodePool(poolAnnotated(dnd, "false")), nil, nil, t0, free},
		{"pool annotated unreadably", nodePool(poolAnnotated(dnd, "2h")), nil, nil, t0,
			forever(disruption.ReasonPoolDoNotDisrupt, `="2h"`, "cannot read", "set it to true, or remove it")},
		{"pool annotated before the node", nodePool(poolAnnotated(dnd, "true")), []nodeOpt{annotate(dnd, "true")}, nil, t0,
			forever(disruption.ReasonPoolDoNotDisrupt)},

		{"node true", nil, []nodeOpt{annotate(dnd, "true")}, nil, t0,
			forever(disruption.ReasonNodeDoNotDisrupt, "node n1", dnd+"=true", "remove the annotation from the node to lift it")},
		{"node false", nil, []nodeOpt{annotate(dnd, "false")}, nil, t0, free},
		{"node empty", nil, []nodeOpt{annotate(dnd, "")}, nil, t0, free},
		{"node duration, before", nil, []nodeOpt{annotate(dnd, "2h")}, nil, t0.Add(time.Hour),
			until(disruption.ReasonNodeDoNotDisrupt, t0.Add(2*time.Hour), "node n1", dnd+"=2h", "until 2026-11-01T14:00:00Z", "2h after it was created", "sooner")},
		{"node duration, at its end", nil, []nodeOpt{annotate(dnd, "2h")}, nil, t0.Add(2 * time.Hour), free},
		{"node duration, after", nil, []nodeOpt{annotate(dnd, "2h")}, nil, t0.Add(3 * time.Hour), free},
		{"node duration, no creation time", nil, []nodeOpt{annotate(dnd, "2h"), created(time.Time{})}, nil, t0,
			forever(disruption.ReasonNodeDoNotDisrupt, "no creation time")},
		{"node unreadable", nil, []nodeOpt{annotate(dnd, "soon")}, nil, t0.Add(1000 * time.Hour),
			forever(disruption.ReasonNodeDoNotDisrupt, "node n1", `="soon"`, "neither true nor a duration")},
		{"node negative duration", nil, []nodeOpt{annotate(dnd, "-1h")}, nil, t0,
			forever(disruption.ReasonNodeDoNotDisrupt, "neither true nor a duration")},
		{"node True is not true", nil, []nodeOpt{annotate(dnd, "True")}, nil, t0,
			forever(disruption.ReasonNodeDoNotDisrupt, "neither true nor a duration")},
		{"node karpenter", nil, []nodeOpt{annotate(karpenter, "true")}, nil, t0,
			forever(disruption.ReasonNodeDoNotDisrupt, "node n1", karpenter+"=true")},
		{"node karpenter false", nil, []nodeOpt{annotate(karpenter, "false")}, nil, t0, free},
		{"node duration past, karpenter still holds", nil, []nodeOpt{annotate(dnd, "1h"), annotate(karpenter, "true")}, nil, t0.Add(2 * time.Hour),
			forever(disruption.ReasonNodeDoNotDisrupt, karpenter)},
		{"node safe-to-evict is a pod's annotation", nil, []nodeOpt{annotate(safe, "false")}, nil, t0, free},

		{"pod true", nil, nil, []*corev1.Pod{pod("a", "web"), pod("a", "db", podAnnotated(dnd, "true"))}, t0,
			forever(disruption.ReasonPodDoNotDisrupt, "pod a/db", dnd+"=true", "remove the annotation from the pod (or from its controller's pod template) to lift it")},
		{"pod false", nil, nil, []*corev1.Pod{pod("a", "db", podAnnotated(dnd, "false"))}, t0, free},
		{"pod duration, before", nil, nil, []*corev1.Pod{pod("a", "job", podAnnotated(dnd, "30m"))}, t0.Add(10 * time.Minute),
			until(disruption.ReasonPodDoNotDisrupt, t0.Add(30*time.Minute), "pod a/job", dnd+"=30m", "30m after it started")},
		{"pod duration, after", nil, nil, []*corev1.Pod{pod("a", "job", podAnnotated(dnd, "30m"))}, t0.Add(30 * time.Minute), free},
		{"pod duration, not started", nil, nil, []*corev1.Pod{pod("a", "job", podAnnotated(dnd, "30m"), notStarted)}, t0.Add(1000 * time.Hour),
			forever(disruption.ReasonPodDoNotDisrupt, "pod a/job", "has not started yet")},
		{"pod unreadable", nil, nil, []*corev1.Pod{pod("a", "job", podAnnotated(dnd, "soon"))}, t0.Add(1000 * time.Hour),
			forever(disruption.ReasonPodDoNotDisrupt, "pod a/job", `="soon"`, "neither true nor a duration")},
		{"pod karpenter", nil, nil, []*corev1.Pod{pod("a", "db", podAnnotated(karpenter, "true"))}, t0,
			forever(disruption.ReasonPodDoNotDisrupt, "pod a/db", karpenter+"=true")},
		{"pod karpenter false", nil, nil, []*corev1.Pod{pod("a", "db", podAnnotated(karpenter, "false"))}, t0, free},
		{"pod not safe to evict", nil, nil, []*corev1.Pod{pod("a", "db", podAnnotated(safe, "false"))}, t0,
			forever(disruption.ReasonPodDoNotDisrupt, "pod a/db", safe+"=false")},
		{"pod safe to evict", nil, nil, []*corev1.Pod{pod("a", "db", podAnnotated(safe, "true"))}, t0, free},
		{"pod succeeded", nil, nil, []*corev1.Pod{pod("a", "job", podAnnotated(dnd, "true"), inPhase(corev1.PodSucceeded))}, t0, free},
		{"pod failed", nil, nil, []*corev1.Pod{pod("a", "job", podAnnotated(karpenter, "true"), inPhase(corev1.PodFailed))}, t0, free},
		{"pod terminating", nil, nil, []*corev1.Pod{pod("a", "job", podAnnotated(safe, "false"), terminating)}, t0, free},
		{"pod pending without annotations", nil, nil, []*corev1.Pod{pod("a", "job", notStarted)}, t0, free},

		{"indefinite outlasts a duration", nil, []nodeOpt{annotate(dnd, "2h")}, []*corev1.Pod{pod("a", "db", podAnnotated(dnd, "true"))}, t0,
			forever(disruption.ReasonPodDoNotDisrupt, "pod a/db")},
		{"the later duration wins", nil, []nodeOpt{annotate(dnd, "2h")},
			[]*corev1.Pod{pod("a", "one", podAnnotated(dnd, "1h")), pod("a", "three", podAnnotated(dnd, "3h"))}, t0,
			until(disruption.ReasonPodDoNotDisrupt, t0.Add(3*time.Hour), "pod a/three", "; 1 other pod protects the node too")},
		{"node before pods when both are indefinite", nil, []nodeOpt{annotate(dnd, "true")},
			[]*corev1.Pod{pod("a", "db", podAnnotated(dnd, "true")), pod("a", "web", podAnnotated(safe, "false"))}, t0,
			forever(disruption.ReasonNodeDoNotDisrupt, "node n1", "; 2 other pods protect the node too")},
		{"pods by namespace and name, whatever the list's order", nil, nil,
			[]*corev1.Pod{pod("b", "a", podAnnotated(dnd, "true")), pod("a", "z", podAnnotated(karpenter, "true")), nil}, t0,
			forever(disruption.ReasonPodDoNotDisrupt, "pod a/z", karpenter, "; 1 other pod protects the node too")},
		{"one pod's longest annotation", nil, nil, []*corev1.Pod{pod("a", "db", podAnnotated(dnd, "1h"), podAnnotated(safe, "false"))}, t0,
			forever(disruption.ReasonPodDoNotDisrupt, "pod a/db", safe)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := disruption.Protected(tc.pool, node("n1", tc.node...), tc.pods, tc.now)
			if tc.want.reason == "" {
				if got != nil {
					t.Fatalf("Protected = %+v, want nil", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("Protected = nil, want %s", tc.want.reason)
			}
			if got.Reason != tc.want.reason || !got.Until.Equal(tc.want.until) {
				t.Errorf("Protected = %s until %v, want %s until %v", got.Reason, got.Until, tc.want.reason, tc.want.until)
			}
			for _, s := range tc.want.message {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q does not say %q", got.Message, s)
				}
			}
			if strings.Contains(got.Message, "other pod") && !strings.Contains(strings.Join(tc.want.message, " "), "other pod") {
				t.Errorf("message %q counts other pods; none were expected to", got.Message)
			}
		})
	}
}
