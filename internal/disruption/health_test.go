package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

// healthNode is a node whose Ready condition took status at the time given.
func healthNode(ready corev1.ConditionStatus, at time.Time, rec *HealthRecord) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{}}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "KubeletNotReady", LastTransitionTime: metav1.NewTime(at)}}
	if rec != nil {
		n.Annotations[contract.AnnotationUnhealthy] = rec.String()
	}
	return n
}

// carry writes the record HealthOf decided back on the node, as the
// controller does.
func carry(n *corev1.Node, h Health) {
	if h.Record == nil {
		delete(n.Annotations, contract.AnnotationUnhealthy)
		return
	}
	n.Annotations[contract.AnnotationUnhealthy] = h.Record.String()
}

func TestAFlapShorterThanTheGraceDoesNotResetTheClock(t *testing.T) {
	spec := &v1alpha1.RepairSpec{FlapGrace: &metav1.Duration{Duration: time.Minute}} // default conditions: Ready False 10m
	n := healthNode(corev1.ConditionFalse, t0, nil)
	h := HealthOf(spec, n, t0.Add(5*time.Second))
	if !h.Unhealthy() || !h.Changed || !h.Record.Since.Equal(t0) || !h.Due.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("first sight: %+v due %s, want a new record since %s due 10m later", h.Record, h.Due, t0)
	}
	carry(n, h)
	// Every 4 minutes the node is Ready for 30 s, then NotReady again: the
	// condition's own transition time moves each time.
	at := t0
	for i := range 3 {
		at = at.Add(4 * time.Minute)
		n.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}
		h = HealthOf(spec, n, at.Add(time.Second))
		if h.Unhealthy() || h.Record == nil || h.Record.HealthySince == nil || !h.Record.HealthySince.Equal(at) {
			t.Fatalf("flap %d, healthy: record %+v, want kept with healthySince %s", i, h.Record, at)
		}
		carry(n, h)
		back := at.Add(30 * time.Second)
		n.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(back)}
		h = HealthOf(spec, n, back.Add(time.Second))
		if !h.Record.Since.Equal(t0) || h.Record.HealthySince != nil {
			t.Fatalf("flap %d, broken again: record %+v, want since %s kept and healthySince cleared", i, h.Record, t0)
		}
		carry(n, h)
	}
	if !h.DueAt(t0.Add(10 * time.Minute)) {
		t.Fatalf("due %s: the repair must be due 10m after the first breakage, flaps or not", h.Due)
	}
}

func TestHealthyForTheGraceClearsTheRecord(t *testing.T) {
	spec := &v1alpha1.RepairSpec{FlapGrace: &metav1.Duration{Duration: time.Minute}}
	n := healthNode(corev1.ConditionTrue, t0.Add(2*time.Minute), &HealthRecord{Since: t0, Condition: "Ready=False"})
	h := HealthOf(spec, n, t0.Add(2*time.Minute+30*time.Second))
	if h.Record == nil || !h.Record.HealthySince.Equal(t0.Add(2*time.Minute)) || !h.Changed {
		t.Fatalf("30 s healthy: %+v, want the record kept, healthy since the condition's transition", h.Record)
	}
	carry(n, h)
	h = HealthOf(spec, n, t0.Add(3*time.Minute+time.Second))
	if h.Record != nil || !h.Changed {
		t.Fatalf("healthy past the grace: %+v, want the record gone", h.Record)
	}
	// Broken again long after (the controller did not look in between):
	// a new clock.
	n = healthNode(corev1.ConditionFalse, t0.Add(20*time.Minute), &HealthRecord{Since: t0, Condition: "Ready=False", HealthySince: ptr(t0.Add(2 * time.Minute))})
	h = HealthOf(spec, n, t0.Add(20*time.Minute+time.Second))
	if !h.Record.Since.Equal(t0.Add(20 * time.Minute)) {
		t.Fatalf("broken after a healthy stretch longer than the grace: since %s, want %s", h.Record.Since, t0.Add(20*time.Minute))
	}
}

func TestAHealthyNodeWithoutARecordIsLeftAlone(t *testing.T) {
	h := HealthOf(&v1alpha1.RepairSpec{}, healthNode(corev1.ConditionTrue, t0, nil), t0)
	if h.Unhealthy() || h.Record != nil || h.Changed {
		t.Fatalf("%+v: a healthy node gets no record and no write", h)
	}
}

func TestOnlyTheConditionsThePoolNamesCount(t *testing.T) {
	spec := &v1alpha1.RepairSpec{Conditions: []v1alpha1.RepairCondition{
		{Type: "example.com/GPUHealthy", Status: "False", Toleration: metav1.Duration{Duration: 2 * time.Minute}}}}
	n := healthNode(corev1.ConditionFalse, t0, nil)
	if h := HealthOf(spec, n, t0); h.Unhealthy() {
		t.Fatalf("Ready=False is not among the pool's conditions: %+v", h)
	}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "example.com/GPUHealthy", Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)})
	h := HealthOf(spec, n, t0.Add(time.Minute))
	if !h.Unhealthy() || !h.Due.Equal(t0.Add(2*time.Minute)) || h.DueAt(t0.Add(time.Minute)) {
		t.Fatalf("%+v due %s: want broken, due after its own 2m toleration", h.Record, h.Due)
	}
}

func TestTheBreaker(t *testing.T) {
	healths := func(zoneBad map[string][2]int) []Health {
		var out []Health
		for z, counts := range zoneBad {
			for i := range counts[0] {
				n := healthNode(corev1.ConditionTrue, t0, nil)
				n.Labels = map[string]string{LabelZone: z}
				h := Health{Node: n}
				if i < counts[1] {
					h.Bad = &v1alpha1.RepairCondition{Type: "Ready", Status: "False"}
				}
				out = append(out, h)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name            string
		spec            v1alpha1.RepairSpec
		zones           map[string][2]int // zone: {nodes, unhealthy}
		notReady, total int
		scope           string
	}{
		{name: "one broken node of ten", zones: map[string][2]int{"a": {5, 1}, "b": {5, 0}}},
		{name: "30% of one zone", zones: map[string][2]int{"a": {10, 3}, "b": {10, 0}}, scope: "zone"},
		{name: "30% of one zone, the zone limit raised", spec: v1alpha1.RepairSpec{MaxUnhealthyPerZone: "30%"}, zones: map[string][2]int{"a": {10, 3}, "b": {10, 0}}},
		{name: "a third of the pool", spec: v1alpha1.RepairSpec{MaxUnhealthyPerZone: "100%"}, zones: map[string][2]int{"a": {4, 2}, "b": {4, 1}, "c": {4, 1}}, scope: "pool"},
		{name: "a number", spec: v1alpha1.RepairSpec{MaxUnhealthy: "1", MaxUnhealthyPerZone: "100%"}, zones: map[string][2]int{"a": {20, 1}, "b": {20, 1}}, scope: "pool"},
		{name: "the control plane", zones: map[string][2]int{"a": {10, 0}}, notReady: 60, total: 100, scope: "cluster"},
		{name: "two broken nodes of three elsewhere", zones: map[string][2]int{"a": {10, 0}}, notReady: 2, total: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			halt, err := Breaker(&tc.spec, healths(tc.zones), tc.notReady, tc.total)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.scope == "" && halt != nil:
				t.Fatalf("halted: %s", halt)
			case tc.scope != "" && (halt == nil || halt.Scope != tc.scope):
				t.Fatalf("halt %v, want one of scope %s", halt, tc.scope)
			}
		})
	}
}

func TestTheLadder(t *testing.T) {
	spec := &v1alpha1.RepairSpec{}
	fresh := Health{Record: &HealthRecord{Since: t0}}
	rebooted := Health{Record: &HealthRecord{Since: t0}, Rebooted: ptr(t0.Add(time.Minute))}
	if s := NextStep(spec, fresh, true); s != v1alpha1.RepairReboot {
		t.Fatalf("first step with a provider that reboots: %s", s)
	}
	if s := NextStep(spec, fresh, false); s != v1alpha1.RepairReplace {
		t.Fatalf("first step with a provider that cannot reboot: %s", s)
	}
	if s := NextStep(spec, rebooted, true); s != v1alpha1.RepairReplace {
		t.Fatalf("broken again after a reboot: %s, want Replace", s)
	}
	if s := NextStep(&v1alpha1.RepairSpec{Steps: []v1alpha1.RepairStep{v1alpha1.RepairReboot}}, rebooted, true); s != "" {
		t.Fatalf("a reboot-only ladder after its reboot: %s, want nothing more", s)
	}
}

func ptr[T any](v T) *T { return &v }

// A repair's reboot is noted beside the health record, where the record's
// own writes never reach it, and counts only for the breakage it followed.
func TestARepairRebootIsReadBesideTheRecord(t *testing.T) {
	spec := &v1alpha1.RepairSpec{}
	n := healthNode(corev1.ConditionFalse, t0, &HealthRecord{Since: t0, Condition: "Ready=False"})
	n.Annotations[contract.AnnotationRepairRebooted] = t0.Add(time.Minute).Format(time.RFC3339)
	if h := HealthOf(spec, n, t0.Add(20*time.Minute)); h.Rebooted == nil || NextStep(spec, h, true) != v1alpha1.RepairReplace {
		t.Fatalf("rebooted %v: broken again after its repair's reboot, the next step must be Replace", h.Rebooted)
	}
	n.Annotations[contract.AnnotationRepairRebooted] = t0.Add(-time.Hour).Format(time.RFC3339)
	if h := HealthOf(spec, n, t0.Add(20*time.Minute)); h.Rebooted != nil {
		t.Fatalf("a reboot before this breakage (%v) must not count", h.Rebooted)
	}
}
