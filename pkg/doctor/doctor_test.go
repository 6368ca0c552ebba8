package doctor

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
)

var now = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// owned makes a pod look created by a ReplicaSet, on node.
func owned(name, node string, opts ...fixture.PodOption) corev1.Pod {
	p := fixture.Pod("shop", name, opts...)
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "ReplicaSet", Name: name + "-rs", UID: "u", Controller: ptr.To(true)}}
	return *p
}

func find(r Report, code string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Code == code {
			out = append(out, f)
		}
	}
	return out
}

func TestStuckTerminatingPodWithFinalizers(t *testing.T) {
	node := fixture.AKSPool("p", 1).Nodes()[0]
	stuck := owned("stuck", node.Name)
	stuck.DeletionTimestamp = &metav1.Time{Time: now.Add(-10 * time.Minute)}
	stuck.DeletionGracePeriodSeconds = ptr.To[int64](30)
	stuck.Finalizers = []string{"example.com/cleanup"}
	fresh := owned("fresh", node.Name)
	fresh.DeletionTimestamp = &metav1.Time{Time: now.Add(-10 * time.Second)}
	fresh.Finalizers = []string{"example.com/cleanup"}
	r := Diagnose(Input{Nodes: []corev1.Node{*node}, Pods: []corev1.Pod{stuck, fresh}, Now: now})
	got := find(r, CodeStuckTerminating)
	if len(got) != 1 || got[0].Object != "pod shop/stuck" || !strings.Contains(got[0].Message, "example.com/cleanup") || got[0].Severity != SeverityError {
		t.Errorf("stuck-terminating findings %+v: want one error for shop/stuck naming its finalizer", got)
	}
}

func TestBudgetsThatSelectNothingOrOverlap(t *testing.T) {
	two := fixture.AKSPool("p", 2).Nodes()
	node := two[0]
	web := owned("web-1", node.Name, fixture.Label("tier", "front"))
	web.Labels["app"] = "web"
	pdb := func(name string, sel map[string]string) policyv1.PodDisruptionBudget {
		p := fixture.PDB("shop", name, "x", fixture.SelectLabels(sel), fixture.MaxUnavailable("1"))
		p.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, ExpectedPods: 1, DesiredHealthy: 0, CurrentHealthy: 1}
		return *p
	}
	r := Diagnose(Input{
		Nodes: []corev1.Node{*two[0], *two[1]},
		Pods:  []corev1.Pod{web},
		PDBs:  []policyv1.PodDisruptionBudget{pdb("by-app", map[string]string{"app": "web"}), pdb("by-tier", map[string]string{"tier": "front"}), pdb("typo", map[string]string{"app": "wbe"})},
		Now:   now,
	})
	if got := find(r, CodePDBSelectsNothing); len(got) != 1 || got[0].Object != "poddisruptionbudget shop/typo" {
		t.Errorf("selects-nothing findings %+v", got)
	}
	if got := find(r, "MultiplePDBs"); len(got) != 1 || !strings.Contains(got[0].Object, "by-app, by-tier") || got[0].Severity != SeverityError {
		t.Errorf("overlap findings %+v", got)
	}
	if r.Errors != 1 {
		t.Errorf("errors %d, want 1 (the overlap): %+v", r.Errors, r.Findings)
	}
}

func TestHealthyNodeHasNoErrors(t *testing.T) {
	pool := fixture.AKSPool("p", 2)
	nodes := pool.Nodes()
	r := Diagnose(Input{Nodes: []corev1.Node{*nodes[0], *nodes[1]}, Pods: []corev1.Pod{owned("web-1", nodes[0].Name), owned("web-2", nodes[1].Name)}, Targets: []string{nodes[0].Name}, Now: now})
	if r.Errors != 0 || r.Warnings != 0 {
		t.Errorf("healthy: %+v", r.Findings)
	}
}

func TestNodeHeldForAMaintenanceEventThatEnded(t *testing.T) {
	pool := fixture.AKSPool("p", 1)
	state := `{"event":"E1","type":"Redeploy","source":"azure","action":"Drain","phase":"Drained","seen":"2026-11-21T08:50:00Z"}`
	for _, tc := range []struct {
		name, report string
		want         int
	}{
		{"event still announced", `{"source":"azure","events":[{"id":"E1","source":"azure","type":"Redeploy","status":"Scheduled"}]}`, 0},
		{"event gone", `{"source":"azure","events":[]}`, 1},
		{"event canceled", `{"source":"aws","events":[{"id":"E1","source":"aws","type":"Redeploy","status":"Canceled"}]}`, 1},
	} {
		n := *pool.Nodes()[0]
		n.Spec.Unschedulable = true
		n.Annotations = map[string]string{"sluice.dev/cordoned-by": "sluice", "sluice.dev/maintenance": state, "maintenance.sluice.dev/events": tc.report}
		r := Diagnose(Input{Nodes: []corev1.Node{n}, Targets: []string{n.Name}, Now: now})
		got := find(r, CodeMaintenanceOver)
		if len(got) != tc.want {
			t.Errorf("%s: %d MaintenanceOver findings %+v; want %d", tc.name, len(got), got, tc.want)
			continue
		}
		if tc.want == 1 && !strings.Contains(got[0].Message, "is still cordoned by sluice for Redeploy event E1") {
			t.Errorf("%s: message %q", tc.name, got[0].Message)
		}
	}
}
