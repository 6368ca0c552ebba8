package agent

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	chart "github.com/sluice-dev/sluice/charts/sluice"
	"github.com/sluice-dev/sluice/pkg/contract"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// Which event, if any, the agent cordons its node for. (The write itself,
// and the admission policy around it, are TestLeastPrivilege's.)
func TestCordonForPicksANewEventThatTakesTheMachineAway(t *testing.T) {
	at := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	ev := func(id string, typ maintenance.Type, status maintenance.Status, notBefore time.Time) maintenance.Event {
		return maintenance.Event{ID: id, Source: maintenance.SourceAzure, Type: typ, Status: status, NotBefore: notBefore, Deadline: notBefore}
	}
	preempt := ev("p1", maintenance.TypePreempt, maintenance.StatusScheduled, at.Add(30*time.Second))
	terminate := ev("t1", maintenance.TypeTerminate, maintenance.StatusScheduled, at.Add(10*time.Second))
	redeploy := ev("r1", maintenance.TypeRedeploy, maintenance.StatusScheduled, at.Add(5*time.Second))
	node := func(unschedulable bool, known ...maintenance.Event) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{}}, Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
		if len(known) > 0 {
			n.Annotations[contract.AnnotationMaintenanceEvents] = maintenance.NewReport(maintenance.SourceAzure, true, known).Encode()
		}
		return n
	}
	report := func(es ...maintenance.Event) maintenance.Report {
		return maintenance.NewReport(maintenance.SourceAzure, true, es)
	}
	for _, tc := range []struct {
		name   string
		off    bool
		node   *corev1.Node
		report maintenance.Report
		want   string // "" for no cordon
	}{
		{"a new Preempt", false, node(false), report(preempt), "p1"},
		{"the earliest of two", false, node(false), report(preempt, terminate), "t1"},
		{"a Redeploy is the controller's to cordon", false, node(false), report(redeploy), ""},
		{"already reported: the controller has it", false, node(false, preempt), report(preempt), ""},
		{"a new one beside a known one", false, node(false, preempt), report(preempt, terminate), "t1"},
		{"already cordoned, by anyone", false, node(true), report(preempt), ""},
		{"no longer active", false, node(false), report(ev("p2", maintenance.TypePreempt, maintenance.StatusCompleted, at)), ""},
		{"turned off", true, node(false), report(preempt), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(nil, slog.New(slog.DiscardHandler), Config{Node: "n1", CordonInvoluntary: !tc.off})
			e, ok := a.cordonFor(tc.node, tc.report)
			switch {
			case tc.want == "" && ok:
				t.Errorf("cordons for %s; want no cordon", e.ID)
			case tc.want != "" && (!ok || e.ID != tc.want):
				t.Errorf("cordons for %q (%v); want %s", e.ID, ok, tc.want)
			}
		})
	}
}

// The admission policy lets the agent's cordon change spec.unschedulable and
// nothing else, by comparing every other field of the spec by name: a field
// Kubernetes adds to NodeSpec would be writable in that one write until the
// policy names it too.
func TestThePolicyListsEveryNodeSpecField(t *testing.T) {
	policy, err := chart.AgentPolicy("sluice-system")
	if err != nil {
		t.Fatal(err)
	}
	spec := reflect.TypeOf(corev1.NodeSpec{})
	for i := range spec.NumField() {
		name, _, _ := strings.Cut(spec.Field(i).Tag.Get("json"), ",")
		if name == "unschedulable" {
			continue
		}
		if !strings.Contains(policy, "object.spec.?"+name+".") && !strings.Contains(policy, "has(object.spec."+name+")") {
			t.Errorf("the agent policy's agentCordon does not compare spec.%s: add it, or the agent's cordon may change it", name)
		}
	}
}
