package gcpmig

import (
	"context"
	"fmt"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/sluice-dev/sluice/internal/provider"
)

var _ provider.Rebooter = (*Provider)(nil)

// Reboot resets the machine's instance in place (instances.reset) and
// returns once Compute Engine accepted it (its Operation answered), without
// waiting for the operation: the caller waits for the Node instead
// (docs/design/health.md). Compute Engine has no other restart: a reset is
// "a hard reset. The VM does not do a graceful shutdown" (API reference),
// so the OS does not shut down cleanly; sluice reboots a node it has
// drained, or one already broken. The instance stays RUNNING and keeps its
// disks and its place in its group. The machine is found as Get finds it;
// one that is unknown, being deleted, or that Compute Engine answers 404
// for (no VM yet, or gone) is provider.ErrNotFound.
func (p *Provider) Reboot(ctx context.Context, name string) error {
	m, err := p.Get(ctx, name)
	if err != nil {
		return err
	}
	f := providerIDPattern.FindStringSubmatch(m.ProviderID)
	if f == nil || m.State == provider.StateDeleting {
		return fmt.Errorf("machine %s (%s): %w", name, m.State, provider.ErrNotFound)
	}
	project, zone, instance := f[1], f[2], f[3]
	what := fmt.Sprintf("resetting instance %s in zone %s (machine %s)", instance, zone, name)
	op, err := p.clients.instances.Reset(ctx, &computepb.ResetInstanceRequest{Project: project, Zone: zone, Instance: instance})
	if isNotFound(err) {
		return fmt.Errorf("machine %s: instance %s in zone %s: %w", name, instance, zone, provider.ErrNotFound)
	}
	if err != nil {
		return refusal(what, err)
	}
	if errs := op.Proto().GetError().GetErrors(); len(errs) > 0 {
		return attemptRefusal(what, errs)
	}
	p.opts.Log.Info("machine reset accepted", "machine", name, "zone", zone, "instance", instance)
	return nil
}
