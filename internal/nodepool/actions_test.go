package nodepool

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/maintenance"
)

func TestActionFor(t *testing.T) {
	overrides := &v1alpha1.MaintenanceSpec{Actions: v1alpha1.MaintenanceActions{
		Freeze:    v1alpha1.ActionDrain,
		Reboot:    v1alpha1.ActionCordon,
		Preempt:   v1alpha1.ActionNone,
		Rebalance: v1alpha1.ActionNone,
	}}
	tests := []struct {
		name string
		spec *v1alpha1.MaintenanceSpec
		typ  maintenance.Type
		want v1alpha1.MaintenanceAction
	}{
		// The default table (DESIGN.md), from a node with no pool.
		{"default Freeze", nil, maintenance.TypeFreeze, v1alpha1.ActionNone},
		{"default Reboot", nil, maintenance.TypeReboot, v1alpha1.ActionNone},
		{"default Redeploy", nil, maintenance.TypeRedeploy, v1alpha1.ActionDrain},
		{"default Preempt", nil, maintenance.TypePreempt, v1alpha1.ActionDrain},
		{"default Terminate", nil, maintenance.TypeTerminate, v1alpha1.ActionDrain},
		{"default Rebalance", nil, maintenance.TypeRebalance, v1alpha1.ActionCordon},
		{"default Maintenance", nil, maintenance.TypeMaintenance, v1alpha1.ActionNone},
		{"unknown type", nil, maintenance.Type("Hibernate"), v1alpha1.ActionNone},
		{"empty type", nil, "", v1alpha1.ActionNone},
		// A pool without actions takes the defaults too.
		{"empty spec Terminate", &v1alpha1.MaintenanceSpec{}, maintenance.TypeTerminate, v1alpha1.ActionDrain},
		{"empty spec Rebalance", &v1alpha1.MaintenanceSpec{}, maintenance.TypeRebalance, v1alpha1.ActionCordon},
		// A pool's choice wins, and only for the types it set.
		{"override Freeze", overrides, maintenance.TypeFreeze, v1alpha1.ActionDrain},
		{"override Reboot", overrides, maintenance.TypeReboot, v1alpha1.ActionCordon},
		{"override Preempt to None", overrides, maintenance.TypePreempt, v1alpha1.ActionNone},
		{"override Rebalance to None", overrides, maintenance.TypeRebalance, v1alpha1.ActionNone},
		{"unset beside overrides", overrides, maintenance.TypeRedeploy, v1alpha1.ActionDrain},
		{"unknown type beside overrides", overrides, maintenance.Type("Hibernate"), v1alpha1.ActionNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ActionFor(tt.spec, tt.typ); got != tt.want {
				t.Errorf("ActionFor(%q) = %q, want %q", tt.typ, got, tt.want)
			}
		})
	}
}

// Every field of MaintenanceActions is named, in JSON, for the event type it
// answers, and ActionFor reads it for that type: a field added without its
// case in actionSet, or with a misspelt name, fails here.
func TestMaintenanceActionsFieldsAnswerTheirType(t *testing.T) {
	typ := reflect.TypeOf(v1alpha1.MaintenanceActions{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		for _, a := range []v1alpha1.MaintenanceAction{v1alpha1.ActionNone, v1alpha1.ActionCordon, v1alpha1.ActionDrain} {
			spec := &v1alpha1.MaintenanceSpec{}
			reflect.ValueOf(&spec.Actions).Elem().Field(i).SetString(string(a))
			if got := ActionFor(spec, maintenance.Type(name)); got != a {
				t.Errorf("field %s set to %q: ActionFor(%q) = %q", f.Name, a, name, got)
			}
		}
	}
}

// A node with no pool takes the defaults; a pool's own choice wins.
func TestActionForAPool(t *testing.T) {
	var none *v1alpha1.NodePool
	if got := ActionFor(none.MaintenanceSpec(), maintenance.TypePreempt); got != v1alpha1.ActionDrain {
		t.Errorf("no pool: ActionFor(Preempt) = %q, want Drain", got)
	}
	pool := &v1alpha1.NodePool{Spec: v1alpha1.NodePoolSpec{Maintenance: &v1alpha1.MaintenanceSpec{Actions: v1alpha1.MaintenanceActions{Preempt: v1alpha1.ActionCordon}}}}
	if got := ActionFor(pool.MaintenanceSpec(), maintenance.TypePreempt); got != v1alpha1.ActionCordon {
		t.Errorf("pool: ActionFor(Preempt) = %q, want Cordon", got)
	}
}
