package gcpmig

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// createIn makes the machine in the group, or says why the group was
// passed over (*skipped) or refused it.
func (p *Provider) createIn(ctx context.Context, pool *v1alpha1.NodePool, g ref, name string) (*provider.Machine, error) {
	igm, err := p.getGroup(ctx, g)
	if err != nil {
		return nil, err
	}
	t, err := p.template(ctx, g.project, igm.GetInstanceTemplate())
	if err != nil {
		return nil, err
	}
	if why := gkeOwned(igm, t); why != "" {
		return nil, gkeRefusal(g, why)
	}
	var template v1alpha1.NodeTemplate
	if pool.Spec.Template != nil {
		template = *pool.Spec.Template
	}
	if types := template.InstanceTypes; len(types) > 0 && !slices.Contains(types, t.machineType) {
		return nil, &skipped{&provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
			"group %s makes machine type %s, which the pool's template.instanceTypes (%s) does not allow", g, t.machineType, strings.Join(types, ", "))}}
	}
	key := unavailableKey(g, t.machineType)
	if p.isUnavailable(key) {
		return nil, &skipped{&provider.Error{Code: provider.CodeInsufficientCapacity, Retryable: true, Message: fmt.Sprintf(
			"group %s had no capacity for %s in the last %s", g, t.machineType, unavailableFor)}}
	}
	if err := p.ask(ctx, g, igm, t, template.Image, name); err != nil {
		return nil, err
	}
	mi, err := p.firstAttempt(ctx, g, name)
	if err != nil {
		return nil, err
	}
	if errs := mi.GetLastAttempt().GetErrors().GetErrors(); mi.GetInstanceStatus() == "" && len(errs) > 0 {
		refused := attemptRefusal(fmt.Sprintf("creating instance %s in group %s", name, g), errs)
		// The group would keep trying; the machine is refused, so nothing
		// of it may stay.
		if err := p.deleteInstance(ctx, g, mi); err != nil {
			return nil, fmt.Errorf("deleting instance %s, whose creation failed (%s): %w", name, refused.Error(), err)
		}
		if e, ok := provider.AsError(refused); ok && e.Code == provider.CodeInsufficientCapacity {
			p.markUnavailable(key)
		}
		p.opts.Log.Info("the group could not create the machine", "machine", name, "group", g.String(), "why", refused)
		return nil, refused
	}
	p.opts.Log.Info("machine created", "machine", name, "pool", pool.Name, "group", g.String())
	return p.machineOf(ctx, pool.Name, g, mi)
}

// ask makes the group's template boot image (when one is asked and differs)
// and asks for the instance, holding the group so that no other pool's
// image comes between the two.
func (p *Provider) ask(ctx context.Context, g ref, igm *computepb.InstanceGroupManager, t *template, image, name string) error {
	unlock, err := p.lock(ctx, g)
	if err != nil {
		return err
	}
	defer unlock()
	if image != "" && image != t.image {
		if err := p.useImage(ctx, g, igm, t, image); err != nil {
			return err
		}
	}
	return p.createInstance(ctx, g, name)
}

// firstAttempt waits, up to Options.AttemptWait, for the group's first
// attempt at creating the instance: it returns the managed instance once
// the instance exists, the attempt failed, or the wait is over.
func (p *Provider) firstAttempt(ctx context.Context, g ref, name string) (*computepb.ManagedInstance, error) {
	deadline := p.clock.Now().Add(p.opts.AttemptWait)
	for {
		all, err := p.managedInstances(ctx, g)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(all, func(mi *computepb.ManagedInstance) bool { return mi.GetName() == name })
		if i < 0 {
			return nil, fmt.Errorf("group %s does not list instance %s it was asked to create: %w", g, name, errGone)
		}
		mi := all[i]
		if mi.GetInstanceStatus() != "" || len(mi.GetLastAttempt().GetErrors().GetErrors()) > 0 || !p.clock.Now().Before(deadline) {
			return mi, nil
		}
		if err := p.sleep(ctx, p.opts.PollEvery); err != nil {
			return nil, err
		}
	}
}

// errGone is a managed instance that left the group while being created.
var errGone = errors.New("the instance is gone")

// unavailableKey is what a lack of capacity is remembered by: the zone and
// machine type of a zonal group; a regional group, which picks its zone
// itself.
func unavailableKey(g ref, machineType string) string {
	if g.region != "" {
		return "group/" + g.key()
	}
	return "zone/" + g.project + "/" + g.zone + "/" + machineType
}
