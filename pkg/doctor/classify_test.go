package doctor

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/drain"
)

// Doctor's word on a pod is the drain's: for every class of pod, the drain's
// verdict (with --ignore-daemonsets, as doctor assumes) and doctor's findings
// agree, the DaemonSet whose DaemonSet is gone included.
func TestDoctorAgreesWithTheDrainOnEveryPodClass(t *testing.T) {
	node := fixture.AKSPool("p", 1).Nodes()[0]
	agent := appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "agent"}}
	ownedBy := func(apiVersion, kind, name string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: "u", Controller: ptr.To(true)}}
		}
	}
	naked := func(p *corev1.Pod) { p.OwnerReferences = nil }
	annotate := func(k, v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{k: v} }
	}
	phase := func(ph corev1.PodPhase) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Status.Phase = ph } }
	scratch := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }

	type finding struct {
		sev  Severity
		code string
	}
	for _, tc := range []struct {
		name    string
		change  []func(*corev1.Pod)
		verdict drain.Verdict
		reason  drain.Reason
		doctor  []finding
		moves   bool // the room check replays it elsewhere
	}{
		{"replicated", nil, drain.VerdictLeave, "", nil, true},
		{"terminating", []func(*corev1.Pod){terminating}, drain.VerdictWait, drain.ReasonTerminating, nil, false},
		{"mirror", []func(*corev1.Pod){naked, annotate(corev1.MirrorPodAnnotationKey, "h")}, drain.VerdictSkip, drain.ReasonMirrorPod, nil, false},
		{"finished without controller", []func(*corev1.Pod){naked, phase(corev1.PodSucceeded)}, drain.VerdictLeave, "", nil, false},
		{"daemonset", []func(*corev1.Pod){ownedBy("apps/v1", "DaemonSet", "agent")}, drain.VerdictSkip, drain.ReasonDaemonSetPod,
			[]finding{{SeverityInfo, "DaemonSetPod"}}, false},
		{"daemonset gone", []func(*corev1.Pod){ownedBy("apps/v1", "DaemonSet", "gone")}, drain.VerdictRefuse, drain.ReasonDaemonSetPod,
			[]finding{{SeverityError, "DaemonSetPod"}}, false},
		{"finished, daemonset gone", []func(*corev1.Pod){ownedBy("apps/v1", "DaemonSet", "gone"), phase(corev1.PodFailed)}, drain.VerdictLeave, "", nil, false},
		{"another group's DaemonSet", []func(*corev1.Pod){ownedBy("apps.kruise.io/v1alpha1", "DaemonSet", "agent")}, drain.VerdictLeave, "", nil, true},
		{"sluice do-not-disrupt", []func(*corev1.Pod){annotate(contract.AnnotationDoNotDisrupt, "true")}, drain.VerdictHold, drain.ReasonDoNotDisrupt,
			[]finding{{SeverityError, "DoNotDisrupt"}}, true},
		{"karpenter do-not-disrupt", []func(*corev1.Pod){annotate("karpenter.sh/do-not-disrupt", "true")}, drain.VerdictHold, drain.ReasonDoNotDisrupt,
			[]finding{{SeverityError, "DoNotDisrupt"}}, true},
		{"safe-to-evict false", []func(*corev1.Pod){annotate("cluster-autoscaler.kubernetes.io/safe-to-evict", "false")}, drain.VerdictHold, drain.ReasonDoNotDisrupt,
			[]finding{{SeverityError, "DoNotDisrupt"}}, true},
		{"safe-to-evict true", []func(*corev1.Pod){annotate("cluster-autoscaler.kubernetes.io/safe-to-evict", "true")}, drain.VerdictLeave, "", nil, true},
		{"emptyDir", []func(*corev1.Pod){scratch}, drain.VerdictRefuse, drain.ReasonLocalStorage,
			[]finding{{SeverityWarning, "LocalStorage"}}, true},
		{"no controller", []func(*corev1.Pod){naked}, drain.VerdictRefuse, drain.ReasonUnreplicated,
			[]finding{{SeverityError, "Unreplicated"}}, false},
		{"no controller, emptyDir", []func(*corev1.Pod){naked, scratch}, drain.VerdictRefuse, drain.ReasonLocalStorage,
			[]finding{{SeverityError, "Unreplicated"}, {SeverityWarning, "LocalStorage"}}, false},
		{"do-not-disrupt stops the drain first", []func(*corev1.Pod){naked, scratch, annotate(contract.AnnotationDoNotDisrupt, "true")}, drain.VerdictHold, drain.ReasonDoNotDisrupt,
			[]finding{{SeverityError, "DoNotDisrupt"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := owned("pod", node.Name)
			for _, c := range tc.change {
				c(&pod)
			}
			exists := func(ns, name string) bool { return ns == agent.Namespace && name == agent.Name }
			if c := drain.Classify(&pod, drain.Options{IgnoreDaemonSets: true}, now, exists); c.Verdict != tc.verdict || c.Reason != tc.reason {
				t.Errorf("drain: %s %q (%s), want %s %q", c.Verdict, c.Reason, c.Message, tc.verdict, tc.reason)
			}
			r := Diagnose(Input{Nodes: []corev1.Node{*node}, Pods: []corev1.Pod{pod}, DaemonSets: []appsv1.DaemonSet{agent}, Now: now})
			var got []finding
			for _, f := range r.Findings {
				if f.Object == "pod shop/pod" && f.Code != CodeNoRoom {
					got = append(got, finding{f.Severity, f.Code})
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.doctor) {
				t.Errorf("doctor: %v, want %v\n%+v", got, tc.doctor, r.Findings)
			}
			// Whatever doctor reports, it reports what the drain stops at.
			if len(got) > 0 && !strings.Contains(fmt.Sprint(got), " "+string(tc.reason)+"}") {
				t.Errorf("doctor's findings %v miss the drain's reason %s", got, tc.reason)
			}
			// One node: a pod the drain moves has nowhere to go.
			if moved := len(find(r, CodeNoRoom)) == 1; moved != tc.moves {
				t.Errorf("room check replays it: %v, want %v", moved, tc.moves)
			}
		})
	}
}
