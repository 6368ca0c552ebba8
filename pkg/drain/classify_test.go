package drain

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/contract"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// podWith is a running pod of a ReplicaSet, changed by opts.
func podWith(opts ...func(*corev1.Pod)) *corev1.Pod {
	p := replicaOf("web")
	p.Status.Phase = corev1.PodRunning
	for _, o := range opts {
		o(p)
	}
	return p
}

func controlledBy(apiVersion, kind, name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr.To(true)}}
	}
}

func noController(p *corev1.Pod) { p.OwnerReferences = nil }

func annotated(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func emptyDirs(names ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, n := range names {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}})
	}
}

func inPhase(ph corev1.PodPhase) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}

func deleted(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }

func TestClassify(t *testing.T) {
	agent := controlledBy("apps/v1", "DaemonSet", "agent")
	orphan := controlledBy("apps/v1", "DaemonSet", "gone")
	exists := func(namespace, name string) bool { return namespace == "shop" && name == "agent" }
	const (
		dsLeft   = "managed by DaemonSet agent; left on the node"
		dsRefuse = "managed by DaemonSet agent, which would recreate it here; use --ignore-daemonsets to leave it"
		orphaned = "its DaemonSet gone is gone, so nothing manages it; use --force to delete it"
		dndHint  = "; remove the annotation, or drain with a --deadline to have it deleted when time runs out"
	)
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		opts    Options
		verdict Verdict
		reason  Reason
		message string
	}{
		{"replicated", podWith(), Options{}, VerdictLeave, "", ""},
		{"terminating comes first", podWith(deleted, noController, annotated(contract.AnnotationDoNotDisrupt, "true")), Options{},
			VerdictWait, ReasonTerminating, "was already terminating"},
		{"mirror", podWith(noController, annotated(corev1.MirrorPodAnnotationKey, "abc")), Options{},
			VerdictSkip, ReasonMirrorPod, "static pod: only the node's kubelet can remove it"},
		{"succeeded goes whatever else", podWith(inPhase(corev1.PodSucceeded), noController, emptyDirs("x"), annotated(contract.AnnotationDoNotDisrupt, "true")), Options{},
			VerdictLeave, "", ""},
		{"failed goes too", podWith(inPhase(corev1.PodFailed), orphan), Options{}, VerdictLeave, "", ""},

		{"daemonset, no flag", podWith(agent), Options{}, VerdictRefuse, ReasonDaemonSetPod, dsRefuse},
		{"daemonset, --ignore-daemonsets", podWith(agent), Options{IgnoreDaemonSets: true}, VerdictSkip, ReasonDaemonSetPod, dsLeft},
		{"daemonset, --evict-daemonsets", podWith(agent), Options{EvictDaemonSets: true}, VerdictLeave, ReasonDaemonSetPod, "managed by DaemonSet agent; evicted last"},
		{"daemonset, --force alone", podWith(agent), Options{Force: true}, VerdictRefuse, ReasonDaemonSetPod, dsRefuse},
		{"daemonset gone, no flag", podWith(orphan), Options{}, VerdictRefuse, ReasonDaemonSetPod, orphaned},
		{"daemonset gone, --ignore-daemonsets", podWith(orphan), Options{IgnoreDaemonSets: true}, VerdictRefuse, ReasonDaemonSetPod, orphaned},
		{"daemonset gone, --evict-daemonsets", podWith(orphan), Options{EvictDaemonSets: true}, VerdictRefuse, ReasonDaemonSetPod, orphaned},
		{"daemonset gone, --force", podWith(orphan), Options{Force: true}, VerdictLeave, "",
			"its DaemonSet gone is gone; deleting the orphan (--force)"},
		{"daemonset gone, --force, do-not-disrupt", podWith(orphan, annotated(contract.AnnotationDoNotDisrupt, "true")), Options{Force: true},
			VerdictHold, ReasonDoNotDisrupt, "annotated sluice.dev/do-not-disrupt=true" + dndHint},
		{"another group's DaemonSet is a plain controller", podWith(controlledBy("apps.kruise.io/v1alpha1", "DaemonSet", "gone")), Options{},
			VerdictLeave, "", ""},
		{"owner that is not the controller", podWith(func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }), Options{},
			VerdictRefuse, ReasonUnreplicated, "has no controller, so nothing would recreate it; use --force to evict it anyway"},

		{"sluice do-not-disrupt", podWith(annotated(contract.AnnotationDoNotDisrupt, "true")), Options{},
			VerdictHold, ReasonDoNotDisrupt, "annotated sluice.dev/do-not-disrupt=true" + dndHint},
		{"karpenter do-not-disrupt", podWith(annotated("karpenter.sh/do-not-disrupt", "true")), Options{},
			VerdictHold, ReasonDoNotDisrupt, "annotated karpenter.sh/do-not-disrupt=true" + dndHint},
		{"cluster-autoscaler safe-to-evict=false", podWith(annotated("cluster-autoscaler.kubernetes.io/safe-to-evict", "false")), Options{},
			VerdictHold, ReasonDoNotDisrupt, "annotated cluster-autoscaler.kubernetes.io/safe-to-evict=false" + dndHint},
		{"do-not-disrupt=false asks nothing", podWith(annotated(contract.AnnotationDoNotDisrupt, "false"), annotated("karpenter.sh/do-not-disrupt", "")), Options{},
			VerdictLeave, "", ""},
		{"safe-to-evict=true asks nothing", podWith(annotated("cluster-autoscaler.kubernetes.io/safe-to-evict", "true")), Options{},
			VerdictLeave, "", ""},
		{"a DaemonSet pod is decided before do-not-disrupt", podWith(agent, annotated(contract.AnnotationDoNotDisrupt, "true")), Options{IgnoreDaemonSets: true},
			VerdictSkip, ReasonDaemonSetPod, dsLeft},
		{"do-not-disrupt before local storage", podWith(emptyDirs("x"), annotated("karpenter.sh/do-not-disrupt", "true")), Options{},
			VerdictHold, ReasonDoNotDisrupt, "annotated karpenter.sh/do-not-disrupt=true" + dndHint},

		{"emptyDir, no flag", podWith(emptyDirs("cache", "tmp")), Options{},
			VerdictRefuse, ReasonLocalStorage, "uses emptyDir cache, tmp, whose data would be lost; use --delete-emptydir-data to evict it anyway"},
		{"emptyDir, --delete-emptydir-data", podWith(emptyDirs("cache")), Options{DeleteEmptyDirData: true},
			VerdictLeave, "", "emptyDir data (cache) is deleted"},
		{"other volumes are not local storage", podWith(emptyDirs()), Options{}, VerdictLeave, "", ""},

		{"no controller, no flag", podWith(noController), Options{},
			VerdictRefuse, ReasonUnreplicated, "has no controller, so nothing would recreate it; use --force to evict it anyway"},
		{"no controller, --force", podWith(noController), Options{Force: true},
			VerdictLeave, "", "no controller: it is not recreated (--force)"},
		{"local storage refuses before unreplicated", podWith(noController, emptyDirs("x")), Options{Force: true},
			VerdictRefuse, ReasonLocalStorage, "uses emptyDir x, whose data would be lost; use --delete-emptydir-data to evict it anyway"},
		{"warnings joined, in filter order", podWith(noController, emptyDirs("x")), Options{Force: true, DeleteEmptyDirData: true},
			VerdictLeave, "", "emptyDir data (x) is deleted; no controller: it is not recreated (--force)"},
		{"orphan's warning joined", podWith(orphan, emptyDirs("x")), Options{Force: true, DeleteEmptyDirData: true},
			VerdictLeave, "", "its DaemonSet gone is gone; deleting the orphan (--force); emptyDir data (x) is deleted"},
		{"a warning then a refusal keeps only the refusal", podWith(orphan, emptyDirs("x")), Options{Force: true},
			VerdictRefuse, ReasonLocalStorage, "uses emptyDir x, whose data would be lost; use --delete-emptydir-data to evict it anyway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.pod, tc.opts, classifyAt, exists)
			want := Classification{Verdict: tc.verdict, Reason: tc.reason, Message: tc.message}
			if got != want {
				t.Errorf("got  %s %q %q\nwant %s %q %q", got.Verdict, got.Reason, got.Message, want.Verdict, want.Reason, want.Message)
			}
		})
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{VerdictLeave: "Leave", VerdictWait: "Wait", VerdictSkip: "Skip", VerdictRefuse: "Refuse", VerdictHold: "Hold", 9: "Verdict(9)"} {
		if got := v.String(); got != want {
			t.Errorf("%d: %q, want %q", int(v), got, want)
		}
	}
}

// The engine's classifier is Classify with a live lookup: same verdicts, and
// a lookup that fails refuses the pod instead of guessing.
func TestEngineClassifierWrapsClassify(t *testing.T) {
	pods := []*corev1.Pod{podWith(), podWith(deleted), podWith(controlledBy("apps/v1", "DaemonSet", "agent")),
		podWith(controlledBy("apps/v1", "DaemonSet", "gone"), emptyDirs("x")), podWith(noController), podWith(annotated(contract.AnnotationDoNotDisrupt, "true"))}
	exists := func(_, name string) bool { return name == "agent" }
	for _, opts := range []Options{{}, {IgnoreDaemonSets: true}, {Force: true, DeleteEmptyDirData: true}} {
		c := &classifier{opts: &opts, now: func() time.Time { return classifyAt }, daemonSetExists: func(_ context.Context, ns, name string) (bool, error) { return exists(ns, name), nil }}
		for _, p := range pods {
			got := c.classify(context.Background(), p)
			want := Classify(p, opts, classifyAt, exists)
			if got.verdict != want.Verdict || got.reason != want.Reason || got.message != want.Message {
				t.Errorf("%+v, %s: engine %v %s %q, Classify %v %s %q", opts, p.Name, got.verdict, got.reason, got.message, want.Verdict, want.Reason, want.Message)
			}
		}
	}

	failing := &classifier{opts: &Options{Force: true}, daemonSetExists: func(context.Context, string, string) (bool, error) {
		return false, errors.New("connection refused")
	}}
	got := failing.classify(context.Background(), podWith(controlledBy("apps/v1", "DaemonSet", "agent")))
	if got.verdict != refuse || got.reason != ReasonError || got.message != "checking DaemonSet agent: connection refused" {
		t.Errorf("failed lookup: %v %s %q", got.verdict, got.reason, got.message)
	}
	// A pod the lookup is never asked about is unaffected by a failing one.
	if got := failing.classify(context.Background(), podWith()); got.verdict != mustLeave {
		t.Errorf("plain pod with a failing lookup: %v %s", got.verdict, got.reason)
	}
}

func TestCachedDaemonSetsAsksOncePerDaemonSet(t *testing.T) {
	calls := map[string]int{}
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "gone")
	check := cachedDaemonSets(func(_ context.Context, ns, name string) error {
		calls[ns+"/"+name]++
		switch name {
		case "gone":
			return notFound
		case "flaky":
			return errors.New("timeout")
		}
		return nil
	})
	ctx := context.Background()
	for range 3 {
		if ok, err := check(ctx, "shop", "agent"); !ok || err != nil {
			t.Errorf("agent: %v %v, want it to exist", ok, err)
		}
		if ok, err := check(ctx, "shop", "gone"); ok || err != nil {
			t.Errorf("gone: %v %v, want absent without error", ok, err)
		}
		if _, err := check(ctx, "shop", "flaky"); err == nil {
			t.Errorf("flaky: want its error")
		}
	}
	if calls["shop/agent"] != 1 || calls["shop/gone"] != 1 || calls["shop/flaky"] != 3 {
		t.Errorf("lookups %v: want answers cached, errors not", calls)
	}
}

// classifyAt is when the tests' drains look.
var classifyAt = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// A do-not-disrupt duration holds a pod until it has run that long, as the
// NodePool controller reads it; an unreadable value holds, and says so; the
// ecosystem's opt-outs hold for good whatever the duration says.
func TestDoNotDisruptDurations(t *testing.T) {
	started := func(ago time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) { st := metav1.NewTime(classifyAt.Add(-ago)); p.Status.StartTime = &st }
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		verdict Verdict
		until   time.Time
		says    string
	}{
		{"within its duration", podWith(started(time.Hour), annotated(contract.AnnotationDoNotDisrupt, "2h")), VerdictHold, classifyAt.Add(time.Hour), "held until 2026-11-27T13:00:00Z"},
		{"past its duration", podWith(started(3*time.Hour), annotated(contract.AnnotationDoNotDisrupt, "2h")), VerdictLeave, time.Time{}, ""},
		{"not started yet", podWith(annotated(contract.AnnotationDoNotDisrupt, "2h")), VerdictHold, time.Time{}, "has not started yet"},
		{"unreadable", podWith(started(time.Hour), annotated(contract.AnnotationDoNotDisrupt, "yes please")), VerdictHold, time.Time{}, `which is neither true nor a duration`},
		{"negative", podWith(started(time.Hour), annotated(contract.AnnotationDoNotDisrupt, "-1h")), VerdictHold, time.Time{}, `which is neither true nor a duration`},
		{"karpenter's holds for good", podWith(started(time.Hour), annotated(contract.AnnotationDoNotDisrupt, "2h"), annotated(AnnotationKarpenterDoNotDisrupt, "true")), VerdictHold, time.Time{}, "karpenter.sh/do-not-disrupt=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.pod, Options{}, classifyAt, func(string, string) bool { return true })
			if got.Verdict != tc.verdict || !got.Until.Equal(tc.until) || !strings.Contains(got.Message, tc.says) {
				t.Errorf("got %s until %s %q; want %s until %s, saying %q", got.Verdict, got.Until, got.Message, tc.verdict, tc.until, tc.says)
			}
		})
	}
}
