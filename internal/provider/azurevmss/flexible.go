package azurevmss

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A Flexible set's machine is a standard VM (Microsoft.Compute/virtualMachines)
// named after the machine, whose virtualMachineScaleSet names the set. Azure
// makes a VM by a PUT of its name, which is idempotent: the same name is
// the same VM. The provider still writes a record of where it is (a Claim
// with Flexible set, never Before or Capacity), because Get, List and
// Delete are given a machine's or a pool's name only, not its subscription
// and resource group.

// isFlexible says whether the set orchestrates standard VMs. A set that
// names no orchestrationMode is Uniform, as cluster-autoscaler's Azure
// provider takes it: only Flexible is Flexible.
func isFlexible(set *armcompute.VirtualMachineScaleSet) bool {
	p := set.Properties
	return p != nil && p.OrchestrationMode != nil && *p.OrchestrationMode == armcompute.OrchestrationModeFlexible
}

// vmRef names one VM of a Flexible set.
type vmRef struct{ subscription, resourceGroup, name string }

func (v vmRef) String() string { return v.resourceGroup + "/" + v.name }

func vmRefOf(c *Claim) vmRef { return vmRef{c.Subscription, c.ResourceGroup, c.Machine} }

// createVM makes the machine named name as a VM of the Flexible set r, or
// returns the VM of that name already there (the pool's, by its tag).
func (p *Provider) createVM(ctx context.Context, cl *clients, pool, name string, r ref, image string) (*provider.Machine, error) {
	v := vmRef{r.subscription, r.resourceGroup, name}
	got, err := cl.machines.Get(ctx, r.resourceGroup, name, nil)
	switch {
	case err == nil:
		return p.adopt(ctx, pool, v, &got.VirtualMachine)
	case !isNotFound(err):
		return nil, refusal("reading VM "+v.String(), err)
	}
	full, err := cl.sets.Get(ctx, r.resourceGroup, r.scaleSet,
		&armcompute.VirtualMachineScaleSetsClientGetOptions{Expand: to.Ptr(armcompute.ExpandTypesForGetVMScaleSetsUserData)})
	if err != nil {
		return nil, refusal("reading scale set "+r.String(), err)
	}
	size := str(full.Location) + "/" + str(full.SKU.Name) // the key of the unavailable sizes, as scaleOutIn's
	avoid := func(zone string) bool { return p.isUnavailable(zoneKey(size, zone)) }
	vm, err := vmOf(&full.VirtualMachineScaleSet, r, name, pool, image, avoid)
	if err != nil {
		return nil, err
	}
	c := &Claim{Machine: name, Pool: pool, Subscription: r.subscription, ResourceGroup: r.resourceGroup, ScaleSet: r.scaleSet,
		Flexible: true, Created: p.clock.Now().UTC()}
	if err := p.claims.Put(ctx, c); err != nil {
		return nil, err
	}
	poller, err := cl.machines.BeginCreateOrUpdate(ctx, r.resourceGroup, name, vm, nil)
	var answer *azcore.ResponseError
	if err != nil && errors.As(err, &answer) {
		// Refused before Azure started: nothing was made.
		if derr := p.claims.Delete(ctx, name); derr != nil {
			return nil, errors.Join(refusal("creating VM "+v.String(), err), derr)
		}
		return nil, p.noteZone(err, refusal(fmt.Sprintf("creating VM %s in scale set %s", v, r), err), size, &vm, full.Zones)
	}
	if err == nil {
		var done armcompute.VirtualMachinesClientCreateOrUpdateResponse
		if done, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opts.PollEvery}); err == nil {
			p.opts.Log.Info("machine made", "machine", name, "scaleSet", r.String(), "vm", name)
			return machineOfVM(name, pool, v, &done.VirtualMachine), nil
		}
	}
	if !errors.As(err, &answer) {
		// Cut short: whether Azure made the VM is unknown; asking again by
		// the same name finds it or makes it.
		p.opts.Log.Info("VM creation cut short; the machine is settled when it is next read", "machine", name, "scaleSet", r.String(), "err", err)
		return launchingVM(c), nil
	}
	m, ferr := p.failedVM(ctx, cl, c, err)
	return m, p.noteZone(err, ferr, size, &vm, full.Zones)
}

// zoneKey is what a zone that had no capacity for a VM size is remembered
// by: size is scaleOutIn's (location/VM size).
func zoneKey(size, zone string) string { return size + "/zone-" + zone }

// zoneFull is a Flexible set's refusal for lack of capacity in the VM's
// zone only, while another of the set's zones remains: the set's VM size is
// not passed over, only the zone, so the machine asked again goes to
// another zone.
type zoneFull struct{ error }

func (z *zoneFull) Unwrap() error { return z.error }

// noteZone remembers, for unavailableFor, the VM's zone as having no
// capacity for the set's size when Azure refused the VM for its zone
// (cause: ZonalAllocationFailed, OverconstrainedZonalAllocationRequest),
// and returns refused as a zoneFull while another of the set's zones is
// not so remembered. Other answers are returned as they are.
func (p *Provider) noteZone(cause, refused error, size string, vm *armcompute.VirtualMachine, zones []*string) error {
	var re *azcore.ResponseError
	if refused == nil || len(vm.Zones) == 0 || vm.Zones[0] == nil || !errors.As(cause, &re) ||
		re.ErrorCode != "ZonalAllocationFailed" && re.ErrorCode != "OverconstrainedZonalAllocationRequest" {
		return refused
	}
	p.markUnavailable(zoneKey(size, *vm.Zones[0]))
	p.opts.Log.Info("no capacity in the zone; the next VMs of the size go to the set's other zones", "size", size, "zone", *vm.Zones[0], "for", unavailableFor)
	for _, z := range zones {
		if z != nil && !p.isUnavailable(zoneKey(size, *z)) {
			return &zoneFull{refused}
		}
	}
	return refused
}

// adopt returns the VM already named name when it is the pool's, and makes
// sure a record of it is kept.
func (p *Provider) adopt(ctx context.Context, pool string, v vmRef, vm *armcompute.VirtualMachine) (*provider.Machine, error) {
	if tag(vm, TagNodePool) != pool {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
			"VM %s is there already and is not pool %s's (its %s tag is %q): choose another machine name", v, pool, TagNodePool, tag(vm, TagNodePool))}
	}
	set := ""
	if vm.Properties != nil && vm.Properties.VirtualMachineScaleSet != nil {
		set = lastSegment(str(vm.Properties.VirtualMachineScaleSet.ID))
	}
	c := &Claim{Machine: v.name, Pool: pool, Subscription: v.subscription, ResourceGroup: v.resourceGroup, ScaleSet: set, Flexible: true,
		Created: p.clock.Now().UTC()}
	if vm.Properties != nil && vm.Properties.TimeCreated != nil {
		c.Created = vm.Properties.TimeCreated.UTC()
	}
	if err := p.claims.Put(ctx, c); err != nil {
		return nil, err
	}
	return machineOfVM(v.name, pool, v, vm), nil
}

// failedVM answers a creation whose operation Azure ended in an error: a VM
// that provisions anyway is the machine; a Failed one (AllocationFailed
// leaves it) is deleted and the record dropped, so that another set may be
// tried.
func (p *Provider) failedVM(ctx context.Context, cl *clients, c *Claim, err error) (*provider.Machine, error) {
	v := vmRefOf(c)
	refused := refusal(fmt.Sprintf("creating VM %s in scale set %s", v, refOf(c)), err)
	got, gerr := cl.machines.Get(ctx, v.resourceGroup, v.name, nil)
	switch {
	case gerr != nil && !isNotFound(gerr):
		return nil, errors.Join(refused, gerr)
	case gerr == nil && got.Properties != nil && str(got.Properties.ProvisioningState) != "Failed":
		return machineOfVM(c.Machine, c.Pool, v, &got.VirtualMachine), nil
	case gerr == nil:
		if derr := p.deleteVM(ctx, cl, v); derr != nil {
			// Not a refusal, so no other set is tried: the record stays and
			// names the VM left to delete.
			return nil, fmt.Errorf("deleting failed VM %s after %s: %w", v, refused.Error(), derr)
		}
	}
	if derr := p.claims.Delete(ctx, c.Machine); derr != nil {
		return nil, errors.Join(refused, derr)
	}
	return nil, refused
}

// resumeVM returns a recorded VM; nil when it is not there (it is made
// anew).
func (p *Provider) resumeVM(ctx context.Context, c *Claim) (*provider.Machine, error) {
	m, err := p.getVM(ctx, vmRefOf(c), c.Machine, c.Pool)
	if provider.IsNotFound(err) {
		return nil, nil
	}
	return m, err
}

// getVM reads the VM as the machine named name. pool is the record's; ""
// for a name NameOf gave, whose VM need only be in a scale set.
func (p *Provider) getVM(ctx context.Context, v vmRef, name, pool string) (*provider.Machine, error) {
	cl, err := p.clientsFor(v.subscription)
	if err != nil {
		return nil, err
	}
	got, err := cl.machines.Get(ctx, v.resourceGroup, v.name, nil)
	if isNotFound(err) {
		return nil, fmt.Errorf("machine %s (VM %s): %w", name, v, provider.ErrNotFound)
	}
	if err != nil {
		return nil, refusal("reading VM "+v.String(), err)
	}
	vm := &got.VirtualMachine
	if reason := notOurs(vm, pool); reason != "" {
		return nil, fmt.Errorf("machine %s: VM %s %s: %w", name, v, reason, provider.ErrNotFound)
	}
	if pool == "" {
		pool = tag(vm, TagNodePool)
	}
	return machineOfVM(name, pool, v, vm), nil
}

// notOurs says why the VM is not the pool's machine ("" when it is): it is
// in no scale set, or pool is given and its tag names another.
func notOurs(vm *armcompute.VirtualMachine, pool string) string {
	if vm.Properties == nil || vm.Properties.VirtualMachineScaleSet == nil {
		return "is in no scale set"
	}
	if pool != "" && tag(vm, TagNodePool) != pool {
		return fmt.Sprintf("is not pool %s's (its %s tag is %q)", pool, TagNodePool, tag(vm, TagNodePool))
	}
	return ""
}

// removeVM deletes the machine's VM and then its record; a VM already gone
// is no error. A name NameOf gave (NameOf names any standard VM's Node) is
// deleted only while its VM is in a scale set some azure-vmss NodePool
// lists: a standalone VM (a control plane's), or one of another set, is
// never the provider's.
func (p *Provider) removeVM(ctx context.Context, v vmRef, name string, recorded bool) error {
	cl, err := p.clientsFor(v.subscription)
	if err != nil {
		return err
	}
	if !recorded {
		got, err := cl.machines.Get(ctx, v.resourceGroup, v.name, nil)
		switch {
		case isNotFound(err):
			return p.dropVMRecords(ctx, name, v)
		case err != nil:
			return refusal("reading VM "+v.String(), err)
		case notOurs(&got.VirtualMachine, "") != "":
			return fmt.Errorf("machine %s: VM %s is in no scale set: azure-vmss deletes scale sets' VMs only", name, v)
		}
		setID := *got.Properties.VirtualMachineScaleSet.ID
		id, err := arm.ParseResourceID(setID)
		if err != nil {
			return &provider.Error{Code: CodeForeignVM, Message: fmt.Sprintf(
				"machine %s: VM %s is in scale set %s, an id azure-vmss cannot read (%v): it deletes only VMs of its pools' scale sets; delete it yourself if it should go", name, v, setID, err)}
		}
		if err := p.poolsList(ctx, name, "VM "+v.String(), ref{id.SubscriptionID, id.ResourceGroupName, id.Name}); err != nil {
			return err
		}
	}
	if err := p.deleteVM(ctx, cl, v); err != nil {
		return err
	}
	p.opts.Log.Info("machine deleted", "machine", name, "vm", v.String())
	return p.dropVMRecords(ctx, name, v)
}

// deleteVM deletes the VM and waits for Azure to finish; gone is no error.
// forceDeletion is false, as Azure asks of callers that do not want a
// force delete now that its default may be one
// (armcompute.VirtualMachinesClientBeginDeleteOptions).
func (p *Provider) deleteVM(ctx context.Context, cl *clients, v vmRef) error {
	poller, err := cl.machines.BeginDelete(ctx, v.resourceGroup, v.name, &armcompute.VirtualMachinesClientBeginDeleteOptions{ForceDeletion: to.Ptr(false)})
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opts.PollEvery})
	}
	if err != nil && !isNotFound(err) {
		return refusal("deleting VM "+v.String(), err)
	}
	return nil
}

// dropVMRecords removes the machine's record and any record of the same VM.
func (p *Provider) dropVMRecords(ctx context.Context, name string, v vmRef) error {
	all, err := p.claims.List(ctx)
	if err != nil {
		return err
	}
	for _, c := range all {
		same := c.Flexible && strings.EqualFold(c.Machine, v.name) && strings.EqualFold(c.ResourceGroup, v.resourceGroup) &&
			strings.EqualFold(c.Subscription, v.subscription)
		if c.Machine == name || same {
			if err := p.claims.Delete(ctx, c.Machine); err != nil {
				return err
			}
		}
	}
	return nil
}

// listVMs returns the recorded machines that are there, reading each of
// their sets' VMs once (the VM list filtered by the set's id, as Azure
// documents for listing a Flexible set's VMs: its scale set VM list gives
// their IDs only).
func (p *Provider) listVMs(ctx context.Context, records []*Claim) ([]*provider.Machine, error) {
	bySet := map[string][]*Claim{}
	var order []string
	for _, c := range records {
		k := refOf(c).key()
		if _, ok := bySet[k]; !ok {
			order = append(order, k)
		}
		bySet[k] = append(bySet[k], c)
	}
	var out []*provider.Machine
	for _, k := range order {
		group := bySet[k]
		vms, err := p.setVMs(ctx, refOf(group[0]))
		if err != nil {
			return nil, err
		}
		for _, c := range group {
			if vm, ok := vms[strings.ToLower(c.Machine)]; ok && notOurs(vm, c.Pool) == "" {
				out = append(out, machineOfVM(c.Machine, c.Pool, vmRefOf(c), vm))
			}
		}
	}
	return out, nil
}

// setVMs are the VMs of the Flexible set, by lowercase name.
func (p *Provider) setVMs(ctx context.Context, r ref) (map[string]*armcompute.VirtualMachine, error) {
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return nil, err
	}
	filter := fmt.Sprintf("'virtualMachineScaleSet/id' eq '%s'", setID(r))
	out := map[string]*armcompute.VirtualMachine{}
	pager := cl.machines.NewListPager(r.resourceGroup, &armcompute.VirtualMachinesClientListOptions{Filter: &filter})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, refusal("listing the VMs of scale set "+r.String(), err)
		}
		for _, vm := range page.Value {
			if vm != nil && vm.Name != nil {
				out[strings.ToLower(*vm.Name)] = vm
			}
		}
	}
	return out, nil
}

func setID(r ref) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s", r.subscription, r.resourceGroup, r.scaleSet)
}

// vmProviderIDPattern is a standard VM's providerID, in any case.
var vmProviderIDPattern = regexp.MustCompile(`(?i)^azure:///subscriptions/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/resourceGroups/([-\w.()]{1,90})/providers/Microsoft\.Compute/virtualMachines/([-\w.]{1,64})$`)

// vmProviderID is a VM's providerID as cloud-provider-azure writes it on
// the Node: "azure://" and the VM's resource ID with the resource group
// lowercased.
func vmProviderID(v vmRef) string {
	return fmt.Sprintf("azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s",
		v.subscription, strings.ToLower(v.resourceGroup), v.name)
}

// parseVMName reads a name NameOf gave a Flexible set's VM,
// "azure-vmss/<subscription>/<resource group>/<VM name>".
func parseVMName(name string) (vmRef, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return vmRef{}, false
	}
	f := strings.Split(rest, "/")
	if len(f) != 3 || f[0] == "" || f[1] == "" || f[2] == "" {
		return vmRef{}, false
	}
	return vmRef{f[0], f[1], f[2]}, true
}

func launchingVM(c *Claim) *provider.Machine {
	return &provider.Machine{Name: c.Machine, Pool: c.Pool, ProviderID: vmProviderID(vmRefOf(c)), Created: c.Created, State: provider.StateLaunching}
}

// machineOfVM describes a Flexible set's VM as a machine. Its Node is named
// after the VM's computerName, which the provider sets to the VM's name.
func machineOfVM(name, pool string, v vmRef, vm *armcompute.VirtualMachine) *provider.Machine {
	if vm.Name != nil {
		v.name = *vm.Name
	}
	m := &provider.Machine{Name: name, Pool: pool, ProviderID: vmProviderID(v), Capacity: v1alpha1.CapacityOnDemand, State: provider.StateLaunching}
	m.Zone = str(vm.Location)
	if len(vm.Zones) > 0 && vm.Zones[0] != nil {
		m.Zone += "-" + *vm.Zones[0]
	}
	props := vm.Properties
	if props == nil {
		return m
	}
	if props.HardwareProfile != nil && props.HardwareProfile.VMSize != nil {
		m.InstanceType = string(*props.HardwareProfile.VMSize)
	}
	if props.Priority != nil && *props.Priority == armcompute.VirtualMachinePriorityTypesSpot {
		m.Capacity = v1alpha1.CapacitySpot
	}
	if props.TimeCreated != nil {
		m.Created = *props.TimeCreated
	}
	switch str(props.ProvisioningState) {
	case "Succeeded":
		m.State = provider.StateRunning
	case "Failed":
		m.State, m.Message = provider.StateFailed, "the VM failed to provision"
	case "Deleting":
		m.State = provider.StateDeleting
	}
	if props.StorageProfile != nil {
		m.Image = imageOf(props.StorageProfile.ImageReference, true)
	}
	return m
}

func tag(vm *armcompute.VirtualMachine, key string) string {
	for k, v := range vm.Tags {
		if strings.EqualFold(k, key) { // Azure's tag names are case-insensitive
			return str(v)
		}
	}
	return ""
}

func lastSegment(id string) string {
	return id[strings.LastIndex(id, "/")+1:]
}

// poolsList refuses the machine (what: its VM or instance) unless its
// scale set is one an azure-vmss NodePool lists.
func (p *Provider) poolsList(ctx context.Context, name, what string, set ref) error {
	refuse := func(why string) error {
		return &provider.Error{Code: CodeForeignVM, Message: fmt.Sprintf(
			"machine %s: %s is in scale set %s, %s: azure-vmss deletes only the VMs of its pools' scale sets; delete it yourself if it should go", name, what, set, why)}
	}
	if p.opts.ListPools == nil {
		return refuse("and the provider cannot list the NodePools to tell whether a pool lists it")
	}
	pools, err := p.opts.ListPools(ctx)
	if err != nil {
		return fmt.Errorf("listing NodePools, to tell whether the scale set of machine %s is a pool's: %w", name, err)
	}
	for _, np := range pools {
		spec := np.Spec.Provider.Azure
		if np.Spec.Provider.Name != v1alpha1.ProviderAzureVMSS || spec == nil {
			continue
		}
		for _, s := range spec.ScaleSets {
			if (ref{spec.SubscriptionID, spec.ResourceGroup, s.Name}).key() == set.key() {
				return nil
			}
		}
	}
	return refuse("which no azure-vmss NodePool's provider.azure.scaleSets lists")
}
