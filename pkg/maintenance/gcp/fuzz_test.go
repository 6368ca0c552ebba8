package gcp

import (
	"slices"
	"strings"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/pkg/maintenance"
)

// FuzzValues maps arbitrary values of the two keys, seeded with the values
// Google documents and the ones met in the field. Whatever they hold, a
// preempted=TRUE is always reported, a value is either mapped or rejected,
// and nothing panics.
func FuzzValues(f *testing.F) {
	for _, seed := range [][2]string{
		{PreemptedFalse, MaintenanceNone}, {PreemptedTrue, MaintenanceNone}, {PreemptedFalse, MaintenanceMigrate},
		{PreemptedFalse, MaintenanceTerminate}, {PreemptedTrue, "SHUTDOWN_ON_HOST_MAINTENANCE"}, {PreemptedTrue + "\n", ""},
		{"<html>gateway</html>", MaintenanceTerminate}, {"true", "migrate_on_host_maintenance"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, preempted, event string) {
		src := NewSource(nil, clocktesting.NewFakeClock(t0))
		for i, v := range [len(watched)]string{preempted, event} {
			src.keys[i] = key{answer: Answer{Value: v, ETag: "e"}, read: true}
		}
		obs := src.observe()
		has := func(id string) bool {
			return slices.ContainsFunc(obs.Events, func(e maintenance.Event) bool { return e.ID == id })
		}
		if strings.TrimSpace(preempted) == PreemptedTrue && !has(IDPreempted) {
			t.Fatalf("preempted %q with maintenance-event %q: %+v; the preemption is lost", preempted, event, obs)
		}
		if len(obs.Events)+len(obs.Rejected) > 3 || len(obs.Rejected) > 2 {
			t.Fatalf("%q, %q: %+v", preempted, event, obs)
		}
		for _, e := range obs.Events {
			if e.Source != maintenance.SourceGCP || e.Deadline.IsZero() || !e.Active() {
				t.Fatalf("%q, %q: mapped %+v", preempted, event, e)
			}
		}
	})
}
