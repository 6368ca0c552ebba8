package v1alpha1

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

func TestActionFor(t *testing.T) {
	overrides := &MaintenanceSpec{Actions: MaintenanceActions{
		Freeze:    ActionDrain,
		Reboot:    ActionCordon,
		Preempt:   ActionNone,
		Rebalance: ActionNone,
	}}
	tests := []struct {
		name string
		spec *MaintenanceSpec
		typ  maintenance.Type
		want MaintenanceAction
	}{
		// The default table (DESIGN.md), from a node with no pool.
		{"default Freeze", nil, maintenance.TypeFreeze, ActionNone},
		{"default Reboot", nil, maintenance.TypeReboot, ActionNone},
		{"default Redeploy", nil, maintenance.TypeRedeploy, ActionDrain},
		{"default Preempt", nil, maintenance.TypePreempt, ActionDrain},
		{"default Terminate", nil, maintenance.TypeTerminate, ActionDrain},
		{"default Rebalance", nil, maintenance.TypeRebalance, ActionCordon},
		{"default Maintenance", nil, maintenance.TypeMaintenance, ActionNone},
		{"unknown type", nil, maintenance.Type("Hibernate"), ActionNone},
		{"empty type", nil, "", ActionNone},
		// A pool without actions takes the defaults too.
		{"empty spec Terminate", &MaintenanceSpec{}, maintenance.TypeTerminate, ActionDrain},
		{"empty spec Rebalance", &MaintenanceSpec{}, maintenance.TypeRebalance, ActionCordon},
		// A pool's choice wins, and only for the types it set.
		{"override Freeze", overrides, maintenance.TypeFreeze, ActionDrain},
		{"override Reboot", overrides, maintenance.TypeReboot, ActionCordon},
		{"override Preempt to None", overrides, maintenance.TypePreempt, ActionNone},
		{"override Rebalance to None", overrides, maintenance.TypeRebalance, ActionNone},
		{"unset beside overrides", overrides, maintenance.TypeRedeploy, ActionDrain},
		{"unknown type beside overrides", overrides, maintenance.Type("Hibernate"), ActionNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.ActionFor(tt.typ); got != tt.want {
				t.Errorf("ActionFor(%q) = %q, want %q", tt.typ, got, tt.want)
			}
		})
	}
}

// Every field of MaintenanceActions is named, in JSON, for the event type it
// answers, and ActionFor reads it for that type: a field added without its
// case in get, or with a misspelt name, fails here.
func TestMaintenanceActionsFieldsAnswerTheirType(t *testing.T) {
	typ := reflect.TypeOf(MaintenanceActions{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		for _, a := range []MaintenanceAction{ActionNone, ActionCordon, ActionDrain} {
			spec := &MaintenanceSpec{}
			reflect.ValueOf(&spec.Actions).Elem().Field(i).SetString(string(a))
			if got := spec.ActionFor(maintenance.Type(name)); got != a {
				t.Errorf("field %s set to %q: ActionFor(%q) = %q", f.Name, a, name, got)
			}
		}
	}
}

func TestMaintenanceSpecDefaults(t *testing.T) {
	tests := []struct {
		name     string
		spec     *MaintenanceSpec
		approve  bool
		margin   time.Duration
		deadline OnDeadlineAction
	}{
		{"nil", nil, true, 5 * time.Second, OnDeadlineDelete},
		{"empty", &MaintenanceSpec{}, true, 5 * time.Second, OnDeadlineDelete},
		{"set", &MaintenanceSpec{
			ApproveEarly:   ptr.To(false),
			DeadlineMargin: &metav1.Duration{Duration: 90 * time.Second},
			OnDeadline:     OnDeadlineStop,
		}, false, 90 * time.Second, OnDeadlineStop},
		{"zero margin is kept", &MaintenanceSpec{DeadlineMargin: &metav1.Duration{}}, true, 0, OnDeadlineDelete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.ApproveEarlyOrDefault(); got != tt.approve {
				t.Errorf("ApproveEarlyOrDefault() = %v, want %v", got, tt.approve)
			}
			if got := tt.spec.DeadlineMarginOrDefault(); got != tt.margin {
				t.Errorf("DeadlineMarginOrDefault() = %v, want %v", got, tt.margin)
			}
			if got := tt.spec.OnDeadlineOrDefault(); got != tt.deadline {
				t.Errorf("OnDeadlineOrDefault() = %q, want %q", got, tt.deadline)
			}
		})
	}
}

func TestApproveUserInitiated(t *testing.T) {
	for _, tc := range []struct {
		spec *MaintenanceSpec
		want bool
	}{
		{nil, false},
		{&MaintenanceSpec{}, false},
		{&MaintenanceSpec{UserInitiated: UserInitiatedLikePlatform}, false},
		{&MaintenanceSpec{UserInitiated: UserInitiatedApprove}, true},
	} {
		if got := tc.spec.ApproveUserInitiated(); got != tc.want {
			t.Errorf("%+v: ApproveUserInitiated() = %v, want %v", tc.spec, got, tc.want)
		}
	}
}

func TestNodePoolMaintenanceSpecNil(t *testing.T) {
	var pool *NodePool
	if got := pool.MaintenanceSpec().ActionFor(maintenance.TypePreempt); got != ActionDrain {
		t.Errorf("no pool: ActionFor(Preempt) = %q, want Drain", got)
	}
	pool = &NodePool{Spec: NodePoolSpec{Maintenance: &MaintenanceSpec{Actions: MaintenanceActions{Preempt: ActionCordon}}}}
	if got := pool.MaintenanceSpec().ActionFor(maintenance.TypePreempt); got != ActionCordon {
		t.Errorf("pool: ActionFor(Preempt) = %q, want Cordon", got)
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	in := &NodePool{Spec: NodePoolSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "spot"}},
		Maintenance:  &MaintenanceSpec{ApproveEarly: ptr.To(true)},
	}}
	out := in.DeepCopy()
	out.Spec.NodeSelector.MatchLabels["pool"] = "other"
	*out.Spec.Maintenance.ApproveEarly = false
	if in.Spec.NodeSelector.MatchLabels["pool"] != "spot" || !*in.Spec.Maintenance.ApproveEarly {
		t.Errorf("DeepCopy shares memory with its source: %+v", in.Spec)
	}
}
