package azurevmss

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// instance is one scale set instance as the provider tells them apart: by
// its vmId, which Azure never gives another VM (instance IDs may be
// reused once an instance is gone).
type instance struct{ id, vmID, state string }

// Create makes the machine named name in one of the pool's scale sets, or
// returns it as its claim has it. Once Azure accepted the scale-out, the
// machine is returned even when its instance is not known yet (Launching,
// no providerID): Get settles it later.
func (p *Provider) Create(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error) {
	spec := pool.Spec.Provider.Azure
	if spec == nil || len(spec.ScaleSets) == 0 {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: "provider.azure.scaleSets is empty: name the pool's VM scale sets"}
	}
	if name == "" {
		name = provider.NewName(pool.Name)
	}
	c, err := p.claims.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if c != nil && c.Flexible {
		m, err := p.resumeVM(ctx, c)
		if err != nil || m != nil {
			return m, err
		}
		// The recorded VM is not there: it is made now.
	} else if c != nil {
		m, err := p.resume(ctx, c, imageOfPool(pool))
		if err != nil || m != nil {
			return m, err
		}
		// The claimed instance is gone: the machine is made anew.
	}
	return p.scaleOut(ctx, pool, name)
}

// resume finishes a claim found stored: the machine, or nil when its
// instance is gone (the claim is dropped). image is the template's.
func (p *Provider) resume(ctx context.Context, c *Claim, image string) (*provider.Machine, error) {
	cl, err := p.clientsFor(c.Subscription)
	if err != nil {
		return nil, err
	}
	unlock := p.lock(refOf(c))
	defer unlock()
	if c.InstanceID == "" {
		return p.pending(ctx, cl, c, image, true)
	}
	m, err := p.claimed(ctx, cl, c)
	if provider.IsNotFound(err) {
		return nil, p.claims.Delete(ctx, c.Machine)
	}
	return m, err
}

// claimed is the machine of a claim that knows its instance; NotFound when
// the instance is gone (or its ID now names another VM).
func (p *Provider) claimed(ctx context.Context, cl *clients, c *Claim) (*provider.Machine, error) {
	r := refOf(c)
	vm, err := cl.vms.Get(ctx, r.resourceGroup, r.scaleSet, c.InstanceID, nil)
	if isNotFound(err) {
		return nil, fmt.Errorf("machine %s (instance %s of scale set %s): %w", c.Machine, c.InstanceID, r, provider.ErrNotFound)
	}
	if err != nil {
		return nil, refusal(fmt.Sprintf("reading instance %s of scale set %s", c.InstanceID, r), err)
	}
	if c.VMID != "" && vm.Properties != nil && str(vm.Properties.VMID) != "" && str(vm.Properties.VMID) != c.VMID {
		return nil, fmt.Errorf("machine %s: instance %s of scale set %s is another VM now: %w", c.Machine, c.InstanceID, r, provider.ErrNotFound)
	}
	return machineOf(c.Machine, c.Pool, r, &vm.VirtualMachineScaleSetVM), nil
}

// pending settles a claim whose instance is not known yet, with the set
// locked: the one new instance is the machine; none and the set's capacity
// raised means Azure has not listed it yet (Launching); none and the
// capacity not raised means the scale-out never happened, so it is made
// when mayRaise (Create), and the machine is NotFound otherwise (Get: the
// controller asks again by the same name). The set's model is made to boot
// image first.
func (p *Provider) pending(ctx context.Context, cl *clients, c *Claim, image string, mayRaise bool) (*provider.Machine, error) {
	r := refOf(c)
	fresh, err := p.fresh(ctx, cl, c)
	if err != nil {
		return nil, err
	}
	switch {
	case len(fresh) == 1:
		return p.settle(ctx, cl, c, fresh[0])
	case len(fresh) > 1:
		return nil, elsewhere(r, c.Machine, fresh)
	}
	got, err := cl.sets.Get(ctx, r.resourceGroup, r.scaleSet, nil)
	if err != nil {
		return nil, refusal("reading scale set "+r.String(), err)
	}
	set := &got.VirtualMachineScaleSet
	if err := usable(set, r); err != nil {
		return nil, err
	}
	if c.Capacity > 0 && *set.SKU.Capacity >= c.Capacity {
		return launching(c), nil
	}
	if !mayRaise {
		return nil, fmt.Errorf("machine %s: scale set %s was never scaled out for it: %w", c.Machine, r, provider.ErrNotFound)
	}
	if err := p.setImage(ctx, cl, r, set, image); err != nil {
		return nil, err
	}
	return p.grow(ctx, cl, c, set)
}

func launching(c *Claim) *provider.Machine {
	return &provider.Machine{Name: c.Machine, Pool: c.Pool, Created: c.Created, State: provider.StateLaunching}
}

func elsewhere(r ref, machine string, fresh []instance) error {
	ids := make([]string, 0, len(fresh))
	for _, f := range fresh {
		ids = append(ids, f.id)
	}
	return &provider.Error{Code: CodeCapacityChangedElsewhere, Message: fmt.Sprintf(
		"scale set %s has %d new instances (%s) where machine %s asked for one: something else scales it (a cluster autoscaler?); sluice must be its only writer of capacity",
		r, len(fresh), strings.Join(ids, ", "), machine)}
}

// scaleOut raises the capacity of the first scale set that can take the
// machine.
func (p *Provider) scaleOut(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error) {
	spec := pool.Spec.Provider.Azure
	var allowed []string
	if pool.Spec.Template != nil {
		allowed = pool.Spec.Template.InstanceTypes
	}
	image := imageOfPool(pool)
	if err := CheckImage(image); err != nil {
		return nil, err
	}
	var lastRefusal error
	for _, s := range spec.ScaleSets {
		r := ref{spec.SubscriptionID, spec.ResourceGroup, s.Name}
		m, size, err := p.scaleOutIn(ctx, pool.Name, name, r, allowed, image)
		if err == nil && m != nil {
			return m, nil
		}
		if err == nil { // the set's size is not allowed or lately unavailable
			continue
		}
		perr, ok := provider.AsError(err)
		if !ok || perr.Code != provider.CodeInsufficientCapacity {
			return nil, err
		}
		if zf := (*zoneFull)(nil); !errors.As(err, &zf) { // a zone only: the size stays, in the set's other zones
			p.markUnavailable(size)
		}
		lastRefusal = err
	}
	if lastRefusal != nil {
		return nil, lastRefusal
	}
	return nil, &provider.Error{Code: provider.CodeInsufficientCapacity, Retryable: true,
		Message: "no scale set of the pool has a VM size the template allows that Azure had capacity for in the last " + unavailableFor.String()}
}

// scaleOutIn makes the machine, booting image, in one scale set; nil and no
// error when the set's VM size is not one to try. size is the set's VM size
// in its location, the key of the unavailable sizes.
func (p *Provider) scaleOutIn(ctx context.Context, pool, name string, r ref, allowed []string, image string) (m *provider.Machine, size string, err error) {
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return nil, "", err
	}
	unlock := p.lock(r)
	defer unlock()
	got, err := cl.sets.Get(ctx, r.resourceGroup, r.scaleSet, nil)
	if err != nil {
		return nil, "", refusal("reading scale set "+r.String(), err)
	}
	set := &got.VirtualMachineScaleSet
	if err := usable(set, r); err != nil {
		return nil, "", err
	}
	vmSize := str(set.SKU.Name)
	size = str(set.Location) + "/" + vmSize
	if len(allowed) > 0 && !slices.Contains(allowed, vmSize) || p.isUnavailable(size) {
		return nil, size, nil
	}
	if isFlexible(set) {
		m, err = p.createVM(ctx, cl, pool, name, r, image)
		return m, size, err
	}
	if err := p.setImage(ctx, cl, r, set, image); err != nil {
		return nil, size, err
	}
	before, err := p.instances(ctx, cl, r)
	if err != nil {
		return nil, size, err
	}
	c := &Claim{Machine: name, Pool: pool, Subscription: r.subscription, ResourceGroup: r.resourceGroup, ScaleSet: r.scaleSet,
		Created: p.clock.Now().UTC()}
	for _, i := range before {
		c.Before = append(c.Before, i.vmID)
	}
	m, err = p.grow(ctx, cl, c, set)
	return m, size, err
}

func imageOfPool(pool *v1alpha1.NodePool) string {
	if pool.Spec.Template == nil {
		return ""
	}
	return pool.Spec.Template.Image
}

// setImage makes the set's model boot image ("" leaves it as it is), with
// the set locked, before its capacity is raised: new instances are made
// from the model. Instances already there keep the model they were made
// from while the set's upgradePolicy.mode is Manual; Automatic or Rolling
// would have Azure reimage them itself, without a drain, so such a set is
// refused. The model's spelling is compared exactly, not ignoring case:
// Azure reports an instance's image as the model spelled it, and that is
// what the template is compared with.
func (p *Provider) setImage(ctx context.Context, cl *clients, r ref, set *armcompute.VirtualMachineScaleSet, image string) error {
	if image == "" || modelImage(set) == image {
		return nil
	}
	if mode := upgradeMode(set); mode != armcompute.UpgradeModeManual {
		return &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
			"scale set %s has upgradePolicy.mode %s: Azure would reimage its instances to image %s itself, without draining them; set its upgradePolicy.mode to Manual for sluice to roll the pool",
			r, mode, image)}
	}
	want, err := imageReference(image)
	if err != nil {
		return err
	}
	poller, err := cl.sets.BeginUpdate(ctx, r.resourceGroup, r.scaleSet, imagePatch(want), nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opts.PollEvery})
	}
	if err != nil {
		// No claim is written yet: asking again finds the model as
		// Azure left it and changes it only if it still differs.
		return refusal(fmt.Sprintf("changing the image of scale set %s to %s", r, image), err)
	}
	p.opts.Log.Info("scale set model changed", "scaleSet", r.String(), "image", image, "was", modelImage(set))
	return nil
}

// upgradeMode is the set's upgradePolicy.mode; Manual when Azure names
// none, its default.
func upgradeMode(set *armcompute.VirtualMachineScaleSet) armcompute.UpgradeMode {
	if p := set.Properties; p != nil && p.UpgradePolicy != nil && p.UpgradePolicy.Mode != nil {
		return *p.UpgradePolicy.Mode
	}
	return armcompute.UpgradeModeManual
}

// usable refuses a scale set the provider cannot make machines in.
func usable(set *armcompute.VirtualMachineScaleSet, r ref) error {
	if set.SKU == nil || set.SKU.Capacity == nil || set.SKU.Name == nil {
		return fmt.Errorf("scale set %s: Azure answered without its sku", r)
	}
	return nil
}

// grow stores the claim with the capacity it asks for (one more than the
// set has), then raises the set's capacity to it. The capacity is an
// absolute number, so a request the SDK repeats after a lost answer asks
// for nothing more.
func (p *Provider) grow(ctx context.Context, cl *clients, c *Claim, set *armcompute.VirtualMachineScaleSet) (*provider.Machine, error) {
	r := refOf(c)
	c.Capacity = *set.SKU.Capacity + 1
	if err := p.claims.Put(ctx, c); err != nil {
		return nil, err
	}
	update := armcompute.VirtualMachineScaleSetUpdate{SKU: &armcompute.SKU{Name: set.SKU.Name, Tier: set.SKU.Tier, Capacity: to.Ptr(c.Capacity)}}
	poller, err := cl.sets.BeginUpdate(ctx, r.resourceGroup, r.scaleSet, update, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opts.PollEvery})
	}
	var answer *azcore.ResponseError
	if err != nil && !errors.As(err, &answer) {
		// Cut short (a timeout, a lost connection): whether Azure made
		// the instance is unknown, and the claim says what to look for.
		p.opts.Log.Info("scale-out cut short; the machine is settled when it is next read", "machine", c.Machine, "scaleSet", r.String(), "err", err)
		return launching(c), nil
	}
	fresh, ferr := p.fresh(ctx, cl, c)
	if ferr != nil {
		if err != nil {
			return nil, errors.Join(refusal("raising the capacity of scale set "+r.String(), err), ferr)
		}
		return launching(c), nil
	}
	if err == nil {
		if len(fresh) == 0 {
			return launching(c), nil
		}
		return p.settle(ctx, cl, c, fresh...)
	}
	return p.failedScaleOut(ctx, cl, c, fresh, err)
}

// failedScaleOut answers a scale-out whose operation Azure ended in an
// error. Its instances that provision anyway (the error was the polling's,
// a 429 or a 5xx) make the machine; its Failed instances (AllocationFailed
// leaves them counted in the capacity) are deleted and the claim dropped,
// so the set is as it was. Only the claim's own new instance is ever
// deleted: more than one is refused, not guessed at.
func (p *Provider) failedScaleOut(ctx context.Context, cl *clients, c *Claim, fresh []instance, err error) (*provider.Machine, error) {
	r := refOf(c)
	refused := refusal("raising the capacity of scale set "+r.String(), err)
	switch {
	case len(fresh) > 1:
		return nil, errors.Join(refused, elsewhere(r, c.Machine, fresh))
	case len(fresh) == 1 && fresh[0].state != "Failed":
		return p.settle(ctx, cl, c, fresh...)
	case len(fresh) == 1:
		if derr := p.deleteInstance(ctx, cl, r, fresh[0].id); derr != nil {
			// Not a refusal, so no other set is tried: the claim stays
			// and names the instance left to delete.
			return nil, fmt.Errorf("scale set %s: deleting failed instance %s after %s: %w", r, fresh[0].id, refused.Error(), derr)
		}
	}
	if derr := p.claims.Delete(ctx, c.Machine); derr != nil {
		return nil, errors.Join(refused, fmt.Errorf("then dropping the claim: %w", derr))
	}
	return nil, refused
}

// settle makes the one fresh instance the claim's machine.
func (p *Provider) settle(ctx context.Context, cl *clients, c *Claim, fresh ...instance) (*provider.Machine, error) {
	if len(fresh) != 1 {
		return nil, elsewhere(refOf(c), c.Machine, fresh)
	}
	c.InstanceID, c.VMID, c.Before = fresh[0].id, fresh[0].vmID, nil
	if err := p.claims.Put(ctx, c); err != nil {
		return nil, err
	}
	p.opts.Log.Info("machine made", "machine", c.Machine, "scaleSet", refOf(c).String(), "instance", c.InstanceID)
	return p.claimed(ctx, cl, c)
}

// fresh are the set's instances that were not there before the claim and
// that no other claim holds.
func (p *Provider) fresh(ctx context.Context, cl *clients, c *Claim) ([]instance, error) {
	r := refOf(c)
	all, err := p.instances(ctx, cl, r)
	if err != nil {
		return nil, err
	}
	claims, err := p.claims.List(ctx)
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, o := range claims {
		if o.Machine != c.Machine && refOf(o).key() == r.key() && o.VMID != "" {
			held[o.VMID] = true
		}
	}
	var out []instance
	for _, i := range all {
		if !slices.Contains(c.Before, i.vmID) && !held[i.vmID] {
			out = append(out, i)
		}
	}
	return out, nil
}

// instances lists the set's instances, page by page.
func (p *Provider) instances(ctx context.Context, cl *clients, r ref) ([]instance, error) {
	var out []instance
	pager := cl.vms.NewListPager(r.resourceGroup, r.scaleSet, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, refusal("listing the instances of scale set "+r.String(), err)
		}
		for _, vm := range page.Value {
			if vm == nil || vm.InstanceID == nil {
				continue
			}
			i := instance{id: *vm.InstanceID, vmID: *vm.InstanceID}
			if vm.Properties != nil {
				i.state = str(vm.Properties.ProvisioningState)
				if id := str(vm.Properties.VMID); id != "" {
					i.vmID = id
				}
			}
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(a, b instance) int { return strings.Compare(a.id, b.id) })
	return out, nil
}
