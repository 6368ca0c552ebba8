package azurevmss

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/internal/provider"
)

var _ provider.Rebooter = (*Provider)(nil)

// Reboot restarts the machine in place: a Uniform set's instance with
// "Virtual Machine Scale Set VMs - Restart", a Flexible set's VM with
// "Virtual Machines - Restart". It returns once Azure accepted the restart
// (202 Accepted) and does not poll the operation: its end says only that
// Azure restarted the VM, while what the caller waits for is the Node
// Ready again, which it watches itself (docs/design/health.md). The
// machine is found as Get finds it (its claim, or a name NameOf gave); one
// that is unknown, has no instance yet, or that Azure answers 404 for (its
// instance, VM, set or resource group gone) is provider.ErrNotFound.
func (p *Provider) Reboot(ctx context.Context, name string) error {
	m, err := p.Get(ctx, name)
	if err != nil {
		return err
	}
	if f := providerIDPattern.FindStringSubmatch(m.ProviderID); f != nil {
		return p.restartInstance(ctx, name, ref{f[1], f[2], f[3]}, f[4])
	}
	if f := vmProviderIDPattern.FindStringSubmatch(m.ProviderID); f != nil {
		return p.restartVM(ctx, name, vmRef{f[1], f[2], f[3]})
	}
	return fmt.Errorf("machine %s has no instance yet (%s): %w", name, m.State, provider.ErrNotFound)
}

// restartInstance asks Azure to restart the Uniform set's instance.
func (p *Provider) restartInstance(ctx context.Context, name string, r ref, id string) error {
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return err
	}
	if _, err := cl.vms.BeginRestart(ctx, r.resourceGroup, r.scaleSet, id, nil); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("machine %s (instance %s of scale set %s): %w", name, id, r, provider.ErrNotFound)
		}
		return refusal(fmt.Sprintf("restarting instance %s of scale set %s (machine %s)", id, r, name), err)
	}
	p.opts.Log.Info("machine restart accepted", "machine", name, "scaleSet", r.String(), "instance", id)
	return nil
}

// restartVM asks Azure to restart the Flexible set's VM.
func (p *Provider) restartVM(ctx context.Context, name string, v vmRef) error {
	cl, err := p.clientsFor(v.subscription)
	if err != nil {
		return err
	}
	if _, err := cl.machines.BeginRestart(ctx, v.resourceGroup, v.name, nil); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("machine %s (VM %s): %w", name, v, provider.ErrNotFound)
		}
		return refusal(fmt.Sprintf("restarting VM %s (machine %s)", v, name), err)
	}
	p.opts.Log.Info("machine restart accepted", "machine", name, "vm", v.String())
	return nil
}
