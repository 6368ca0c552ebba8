package nodepool_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/controller"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A machine the provider made for the pool whose record was lost (on
// purpose here, as a crash between asking for a machine and writing its name
// down would lose it), and which never became a Node, is found once it is
// older than the registration timeout: a dry run says it would delete it and
// leaves it, the controller then deletes it, with an Event and a metric. The
// pool's own machines, which are Nodes, stay.
func TestAMachineWhoseRecordWasLostIsDeleted(t *testing.T) {
	s := newScene(t, 2, nil)
	nodes := s.waitNodes(t, 2, time.Minute)
	ctx := t.Context()
	never := s.pool(t).DeepCopy()
	never.Spec.Provider.Kwok.Failure = v1alpha1.KwokFailureNeverJoins
	lost := s.name + "-lost"
	if _, err := s.kwok.Create(ctx, never, lost); err != nil {
		t.Fatal(err)
	}
	const timeout = 5 * time.Second
	said := func(reason string) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			return slices.ContainsFunc(s.poolEvents(t), func(e string) bool {
				return strings.HasPrefix(e, reason+": ") && strings.Contains(e, lost)
			}), nil
		}
	}

	stop := s.run(t, func(o *controller.Options) { o.DryRun, o.RegistrationTimeout = true, timeout })
	s.env.WaitFor(t, time.Minute, "a WouldDelete Event naming the lost machine", said("WouldDelete"))
	stop()
	if _, err := s.kwok.Get(ctx, lost); err != nil {
		t.Fatalf("after the dry run, the lost machine: %v; want it still there", err)
	}

	reg := prometheus.NewRegistry()
	s.startWith(t, func(o *controller.Options) { o.RegistrationTimeout, o.Registry = timeout, reg })
	s.env.WaitFor(t, time.Minute, "the lost machine deleted", func(ctx context.Context) (bool, error) {
		_, err := s.kwok.Get(ctx, lost)
		return provider.IsNotFound(err), nil
	})
	s.env.WaitFor(t, 30*time.Second, "an OrphanDeleted Event naming it", said("OrphanDeleted"))
	if got := s.deleted.list(); !slices.Equal(got, []string{lost}) {
		t.Errorf("machines deleted: %v; want only %s", got, lost)
	}
	if v := counterValue(t, reg, "sluice_orphaned_machines_deleted_total"); v != 1 {
		t.Errorf("sluice_orphaned_machines_deleted_total = %v; want 1", v)
	}
	for _, n := range nodes {
		if _, err := s.kwok.Get(ctx, n); err != nil {
			t.Errorf("the pool's machine %s: %v; want it kept", n, err)
		}
	}
}

// counterValue sums the named counter's series in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
