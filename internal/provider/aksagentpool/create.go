package aksagentpool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// aksMachine is one machine of an agent pool as the Machines API lists it.
type aksMachine struct{ name, resourceID string }

// Create makes the machine named name in the pool's agent pool, or returns
// it as its claim has it. Once AKS accepted the scale-out, the machine is
// returned even when it is not known yet (Launching, no providerID): Get
// settles it later.
func (p *Provider) Create(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error) {
	spec := pool.Spec.Provider.AKS
	if spec == nil {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: "provider.aks is empty: name the pool's AKS agent pool"}
	}
	if name == "" {
		name = provider.NewName(pool.Name)
	}
	c, err := p.claims.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if c != nil {
		m, err := p.resume(ctx, c)
		if err != nil || m != nil {
			return m, err
		}
		// The claimed machine is gone: it is made anew.
	}
	return p.scaleOut(ctx, pool.Name, name, refOfSpec(spec))
}

// scaleOut raises the agent pool's count by one for the machine, its claim
// written first.
func (p *Provider) scaleOut(ctx context.Context, pool, name string, r ref) (*provider.Machine, error) {
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return nil, err
	}
	unlock, err := p.lock(ctx, r)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ap, err := p.agentPool(ctx, cl, r)
	if err != nil {
		return nil, err
	}
	before, err := p.machines(ctx, cl, r)
	if err != nil {
		return nil, err
	}
	c := &Claim{Machine: name, Pool: pool, Subscription: r.subscription, ResourceGroup: r.resourceGroup, Cluster: r.cluster,
		AgentPool: r.agentPool, Created: p.clock.Now().UTC(), Before: names(before)}
	return p.grow(ctx, cl, c, ap)
}

// agentPool reads the agent pool and refuses one the provider cannot change
// the count of.
func (p *Provider) agentPool(ctx context.Context, cl *clients, r ref) (*armcontainerservice.AgentPool, error) {
	ap, err := p.readPool(ctx, cl, r)
	if err != nil {
		return nil, err
	}
	if err := autoscaled(r, ap); err != nil {
		return nil, err
	}
	return ap, nil
}

// autoscaled refuses an agent pool AKS's cluster autoscaler sizes.
func autoscaled(r ref, ap *armcontainerservice.AgentPool) error {
	if ap.Properties.EnableAutoScaling != nil && *ap.Properties.EnableAutoScaling {
		return &provider.Error{Code: CodeAutoscaled, Message: fmt.Sprintf(
			"agent pool %s has AKS's cluster autoscaler on, which sets its count too; sluice must be the only writer of the count: "+
				"az aks nodepool update --disable-cluster-autoscaler --resource-group %s --cluster-name %s --name %s",
			r, r.resourceGroup, r.cluster, r.agentPool)}
	}
	return nil
}

// resume finishes a claim found stored: the machine, or nil when it is gone
// (the claim is dropped).
func (p *Provider) resume(ctx context.Context, c *Claim) (*provider.Machine, error) {
	cl, err := p.clientsFor(c.Subscription)
	if err != nil {
		return nil, err
	}
	unlock, err := p.lock(ctx, refOf(c))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if c.AKSMachine == "" {
		return p.pending(ctx, cl, c, true)
	}
	m, err := p.claimed(ctx, cl, c)
	if provider.IsNotFound(err) {
		p.forget(c)
		return nil, p.claims.Delete(ctx, c.Machine)
	}
	return m, err
}

// claimed is the machine of a claim that knows its AKS machine; NotFound
// when it is gone.
func (p *Provider) claimed(ctx context.Context, cl *clients, c *Claim) (*provider.Machine, error) {
	r := refOf(c)
	m, err := cl.machines.Get(ctx, r.resourceGroup, r.cluster, r.agentPool, c.AKSMachine, nil)
	if isNotFound(err) {
		return nil, fmt.Errorf("machine %s (%s of agent pool %s): %w", c.Machine, c.AKSMachine, r, provider.ErrNotFound)
	}
	if err != nil {
		return nil, refusal(fmt.Sprintf("reading machine %s of agent pool %s", c.AKSMachine, r), err)
	}
	ap, err := p.readPool(ctx, cl, r)
	if err != nil {
		return nil, err
	}
	return describe(c.Machine, c.Pool, c.Created, resourceIDOf(&m.Machine), ap), nil
}

// pending settles a claim whose AKS machine is not known yet. Only once
// the pool's count reached the claim's were its new machines made for it:
// before, they are another operation's (an upgrade's surge nodes). Then
// the one new machine is the machine; none means AKS has not listed it
// yet (Launching); several cannot be told apart, and the machine is Failed
// saying so, for the controller to give it up and Delete it. A count never
// raised (or that AKS went back on) is raised now when mayRaise (Create),
// and the machine is NotFound otherwise (Get: the controller asks again by
// the same name).
func (p *Provider) pending(ctx context.Context, cl *clients, c *Claim, mayRaise bool) (*provider.Machine, error) {
	r := refOf(c)
	ap, err := p.readPool(ctx, cl, r)
	if err != nil {
		return nil, err
	}
	if !raised(c, ap) {
		if !mayRaise {
			return nil, fmt.Errorf("machine %s: agent pool %s was never scaled out for it: %w", c.Machine, r, provider.ErrNotFound)
		}
		if err := autoscaled(r, ap); err != nil {
			return nil, err
		}
		before, err := p.machines(ctx, cl, r)
		if err != nil {
			return nil, err
		}
		c.Before = names(before) // what came meanwhile is not this claim's
		return p.grow(ctx, cl, c, ap)
	}
	fresh, err := p.fresh(ctx, cl, c)
	switch {
	case err != nil:
		return nil, err
	case len(fresh) == 1:
		return p.settle(ctx, cl, c, fresh[0])
	case len(fresh) > 1:
		m := launching(c)
		m.State, m.Message = provider.StateFailed, elsewhere(r, c.Machine, fresh).Error()
		return m, nil
	}
	return launching(c), nil
}

// raised says whether the agent pool's count reached the one the claim
// asked for.
func raised(c *Claim, ap *armcontainerservice.AgentPool) bool {
	return *ap.Properties.Count >= c.Count
}

func names(ms []aksMachine) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.name)
	}
	return out
}

func launching(c *Claim) *provider.Machine {
	return &provider.Machine{Name: c.Machine, Pool: c.Pool, Created: c.Created, Capacity: v1alpha1.CapacityOnDemand, State: provider.StateLaunching}
}

func elsewhere(r ref, machine string, fresh []aksMachine) error {
	names := make([]string, 0, len(fresh))
	for _, f := range fresh {
		names = append(names, f.name)
	}
	return &provider.Error{Code: CodeCapacityChangedElsewhere, Message: fmt.Sprintf(
		"agent pool %s has %d new machines (%s) where machine %s asked for one: something else scales it (a cluster autoscaler, a person's az aks nodepool scale?); sluice must be the only writer of its count",
		r, len(fresh), strings.Join(names, ", "), machine)}
}

// grow stores the claim with the count it asks for (one more than the pool
// has), then PUTs the agent pool with that count, as AKS has it otherwise,
// at its eTag: a pool changed since it was read is refused, not
// overwritten. The count is an absolute number, so a request the SDK
// repeats after a lost answer asks for nothing more.
func (p *Provider) grow(ctx context.Context, cl *clients, c *Claim, ap *armcontainerservice.AgentPool) (*provider.Machine, error) {
	r := refOf(c)
	c.Count = *ap.Properties.Count + 1
	if err := p.claims.Put(ctx, c); err != nil {
		return nil, err
	}
	body := withoutReadOnly(*ap)
	body.Properties.Count = &c.Count
	poller, err := cl.pools.BeginCreateOrUpdate(ctx, r.resourceGroup, r.cluster, r.agentPool, body,
		&armcontainerservice.AgentPoolsClientBeginCreateOrUpdateOptions{IfMatch: ap.Properties.ETag})
	var answer *azcore.ResponseError
	if errors.As(err, &answer) {
		// AKS refused the request itself (another operation runs, the
		// pool changed, quota): nothing changed, and a machine new since
		// is another operation's.
		return nil, p.refused(ctx, c, refusal("raising the count of agent pool "+r.String(), err))
	}
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opts.PollEvery})
	}
	if err != nil && !errors.As(err, &answer) {
		// Cut short (a timeout, a lost connection): whether AKS scaled
		// out is unknown, and the claim says what to look for.
		p.opts.Log.Info("scale-out cut short; the machine is settled when it is next read", "machine", c.Machine, "agentPool", r.String(), "err", err)
		return launching(c), nil
	}
	fresh, ferr := p.fresh(ctx, cl, c)
	switch {
	case ferr != nil && err != nil:
		return nil, errors.Join(refusal("raising the count of agent pool "+r.String(), err), ferr)
	case ferr != nil, err == nil && len(fresh) == 0:
		return launching(c), nil
	case err == nil:
		return p.settle(ctx, cl, c, fresh...)
	}
	return p.failedScaleOut(ctx, cl, c, fresh, err)
}

// refused drops the claim of a scale-out AKS did not accept and returns
// why.
func (p *Provider) refused(ctx context.Context, c *Claim, why error) error {
	if err := p.claims.Delete(ctx, c.Machine); err != nil {
		return errors.Join(why, fmt.Errorf("then dropping the claim: %w", err))
	}
	return why
}

// failedScaleOut answers a scale-out AKS accepted and ended in an error. A
// machine made anyway (the error was the polling's) is the machine; none
// drops the claim, so the pool is as it was; more than one is refused, not
// guessed at.
func (p *Provider) failedScaleOut(ctx context.Context, cl *clients, c *Claim, fresh []aksMachine, err error) (*provider.Machine, error) {
	r := refOf(c)
	refused := refusal("raising the count of agent pool "+r.String(), err)
	switch {
	case len(fresh) > 1:
		return nil, errors.Join(refused, elsewhere(r, c.Machine, fresh))
	case len(fresh) == 1:
		return p.settle(ctx, cl, c, fresh...)
	}
	return nil, p.refused(ctx, c, refused)
}

// settle makes the one fresh AKS machine the claim's machine.
func (p *Provider) settle(ctx context.Context, cl *clients, c *Claim, fresh ...aksMachine) (*provider.Machine, error) {
	if len(fresh) != 1 {
		return nil, elsewhere(refOf(c), c.Machine, fresh)
	}
	c.AKSMachine, c.ResourceID, c.Before = fresh[0].name, fresh[0].resourceID, nil
	if err := p.claims.Put(ctx, c); err != nil {
		return nil, err
	}
	p.remember(c)
	p.opts.Log.Info("machine made", "machine", c.Machine, "agentPool", refOf(c).String(), "aksMachine", c.AKSMachine)
	return p.claimed(ctx, cl, c)
}

// fresh are the pool's machines that were not there before the claim and
// that no other claim holds.
func (p *Provider) fresh(ctx context.Context, cl *clients, c *Claim) ([]aksMachine, error) {
	r := refOf(c)
	all, err := p.machines(ctx, cl, r)
	if err != nil {
		return nil, err
	}
	claims, err := p.claims.List(ctx)
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, o := range claims {
		if o.Machine != c.Machine && refOf(o).key() == r.key() && o.AKSMachine != "" {
			held[o.AKSMachine] = true
		}
	}
	var out []aksMachine
	for _, m := range all {
		if !slices.Contains(c.Before, m.name) && !held[m.name] {
			out = append(out, m)
		}
	}
	return out, nil
}

// machines lists the agent pool's machines, page by page.
func (p *Provider) machines(ctx context.Context, cl *clients, r ref) ([]aksMachine, error) {
	var out []aksMachine
	pager := cl.machines.NewListPager(r.resourceGroup, r.cluster, r.agentPool, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, refusal("listing the machines of agent pool "+r.String(), err)
		}
		for _, m := range page.Value {
			if m == nil || m.Name == nil {
				continue
			}
			out = append(out, aksMachine{name: *m.Name, resourceID: resourceIDOf(m)})
		}
	}
	slices.SortFunc(out, func(a, b aksMachine) int { return strings.Compare(a.name, b.name) })
	return out, nil
}
