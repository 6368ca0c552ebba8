// Package azurevmss is the azure-vmss provider: a pool's machines are the
// instances of its Azure VM scale sets (an AKS node pool is one), made by
// raising a Uniform set's capacity or by creating a VM in a Flexible set,
// and removed by deleting the one instance or VM, through Azure Resource
// Manager with the Azure SDK for Go (armcompute).
//
// On a Uniform scale set Azure picks the new instance, so sluice cannot name
// it in advance as provider.Provider.Create asks. The provider therefore
// writes a Claim first (the machine's name and the set's instance IDs as
// they are), then raises the capacity by one; the machine is the instance
// that was not there before. A controller restarted between the two finds
// the claim: if the set has the new instance, that is the machine; if not,
// the capacity was never raised, and it is raised now. One scale set is
// changed by one request at a time, and sluice must be the set's only
// writer of capacity: instances the claims cannot explain are refused as
// CapacityChangedElsewhere instead of being guessed at.
//
// A new instance boots what the set's model says. A pool's
// spec.template.image (in a form CheckImage takes) is written into the
// model's imageReference before a scale-out that needs it; the instances
// already there are left as they are, which only a set whose
// upgradePolicy.mode is Manual does, so a set Azure would roll itself is
// refused a new image. (AKS does not expect its node pools' sets to be
// changed under it, and its next operation on the node pool may write its
// own model back.)
//
// The provider never writes the model's kubelet flags either: the
// sluice.dev/unregistered taint a new instance's Node should register with
// is the user's to put in the model's user data (an AKS node pool's
// --node-initialization-taints), since a model's customData cannot be read
// back from Azure and an AKS node pool's set is AKS's.
// RegistersUnregisteredTaint says whether a model's user data does.
//
// A set of Flexible orchestration (its orchestrationMode; a set naming
// none is Uniform) holds standard VMs, and the provider makes the machine
// as a VM named after it: a PUT whose virtualMachineScaleSet names the
// set, built from the set's model (read with $expand=userData) with the
// template's image, computerName the machine's name, and the TagNodePool
// tag. A VM's name is its identity, so Create needs no claim of an
// instance: a name already there is returned as it is (when its tag says
// it is the pool's). The provider still keeps a record (a Claim with
// Flexible set) of the set the VM is in, because Get, List and Delete are
// given names only. Delete deletes the VM with forceDeletion false (one
// named by NameOf only when its set is a pool's: ForeignVM); List
// reads each set's VMs once, filtered by the set's id. A model holding
// what Azure never returns (an adminPassword, customData) or needing
// extensions cannot be copied into a VM: only a Linux model logging in by
// SSH key, whose kubelet starts from its user data or image, can.
package azurevmss

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurearm"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Namer    = (*Provider)(nil)
)

// unavailableFor is how long a VM size Azure had no capacity for is passed
// over when a scale set is chosen (as Karpenter's ICE cache does).
const unavailableFor = 3 * time.Minute

// Options tune the provider.
type Options struct {
	// ClientOptions are every client's (tests: the SDK's fake transport).
	ClientOptions *arm.ClientOptions
	// PollEvery is how often a long-running operation is polled when Azure
	// names no Retry-After; default 5 s.
	PollEvery time.Duration
	// ListPools lists the cluster's NodePools (Start: ClusterPoolList).
	// Delete of a VM named by NameOf needs it: the VM is deleted only when
	// its scale set is one an azure-vmss pool lists. Without it, such a
	// Delete is refused.
	ListPools provider.PoolList
	Log       *slog.Logger
}

// Provider makes a pool's machines in its scale sets. Build it with New.
type Provider struct {
	cred      azcore.TokenCredential
	opts      Options
	claims    Claims
	clock     clock.WithTicker
	throttles *azurearm.Throttles

	mu          sync.Mutex
	clients     map[string]*clients    // by subscription
	locks       map[string]*sync.Mutex // by scale set
	unavailable map[string]time.Time   // VM size in a location -> until
}

type clients struct {
	sets *armcompute.VirtualMachineScaleSetsClient
	vms  *armcompute.VirtualMachineScaleSetVMsClient
	// machines are standard VMs: a Flexible set's.
	machines *armcompute.VirtualMachinesClient
}

// New returns a provider calling Azure with cred (azidentity's default chain
// in a cluster: workload identity) and keeping its claims in claims.
func New(cred azcore.TokenCredential, claims Claims, clk clock.WithTicker, opts Options) *Provider {
	if opts.PollEvery <= 0 {
		opts.PollEvery = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Provider{cred: cred, opts: opts, claims: claims, clock: clk, throttles: azurearm.NewThrottles(clk),
		clients: map[string]*clients{}, locks: map[string]*sync.Mutex{}, unavailable: map[string]time.Time{}}
}

// ref names one scale set.
type ref struct{ subscription, resourceGroup, scaleSet string }

func (r ref) key() string {
	return strings.ToLower(r.subscription + "/" + r.resourceGroup + "/" + r.scaleSet)
}

func (r ref) String() string { return r.resourceGroup + "/" + r.scaleSet }

func refOf(c *Claim) ref { return ref{c.Subscription, c.ResourceGroup, c.ScaleSet} }

func (p *Provider) clientsFor(subscription string) (*clients, error) {
	subscription = strings.ToLower(subscription) // a GUID, in any case
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[subscription]; ok {
		return c, nil
	}
	o := arm.ClientOptions{}
	if p.opts.ClientOptions != nil {
		o = *p.opts.ClientOptions
	}
	o.PerRetryPolicies = append(slices.Clone(o.PerRetryPolicies), p.throttles.For(subscription))
	f, err := armcompute.NewClientFactory(subscription, p.cred, &o)
	if err != nil {
		return nil, fmt.Errorf("azure clients for subscription %s: %w", subscription, err)
	}
	c := &clients{sets: f.NewVirtualMachineScaleSetsClient(), vms: f.NewVirtualMachineScaleSetVMsClient(), machines: f.NewVirtualMachinesClient()}
	p.clients[subscription] = c
	return c, nil
}

// lock holds the scale set for one change at a time; it returns the unlock.
func (p *Provider) lock(r ref) func() {
	p.mu.Lock()
	l, ok := p.locks[r.key()]
	if !ok {
		l = &sync.Mutex{}
		p.locks[r.key()] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// deleteInstance deletes one instance of the set, which lowers its capacity
// by one; an instance already gone is no error.
func (p *Provider) deleteInstance(ctx context.Context, cl *clients, r ref, id string) error {
	if _, err := cl.vms.Get(ctx, r.resourceGroup, r.scaleSet, id, nil); err != nil {
		if isNotFound(err) {
			return nil
		}
		return refusal(fmt.Sprintf("reading instance %s of scale set %s", id, r), err)
	}
	poller, err := cl.sets.BeginDeleteInstances(ctx, r.resourceGroup, r.scaleSet,
		armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: []*string{to.Ptr(id)}}, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opts.PollEvery})
	}
	if err != nil && !isNotFound(err) {
		return refusal(fmt.Sprintf("deleting instance %s of scale set %s", id, r), err)
	}
	return nil
}

// Delete deletes the machine's instance and its claim; a machine already
// gone (or never made) is no error. A deletion Azure fails keeps the claim,
// so asking again deletes it. An instance named by NameOf is deleted only
// when its scale set is one an azure-vmss NodePool lists (ForeignVM).
func (p *Provider) Delete(ctx context.Context, name string) error {
	if v, ok := parseVMName(name); ok {
		return p.removeVM(ctx, v, name, false)
	}
	r, id, c, err := p.locate(ctx, name)
	if err != nil || r == nil {
		return err
	}
	if c != nil && c.Flexible {
		return p.removeVM(ctx, vmRefOf(c), name, true)
	}
	if c == nil { // a name NameOf gave: any scale set's instance
		if err := p.poolsList(ctx, name, "instance "+id, *r); err != nil {
			return err
		}
	}
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return err
	}
	unlock := p.lock(*r)
	defer unlock()
	if c != nil && id == "" {
		fresh, err := p.fresh(ctx, cl, c)
		if err != nil {
			return err
		}
		if len(fresh) > 1 {
			return elsewhere(*r, name, fresh)
		}
		if len(fresh) == 1 {
			id = fresh[0].id
		}
	}
	if c != nil && c.InstanceID != "" {
		// Only the claim's own VM: its instance ID may name another one now.
		if _, err := p.claimed(ctx, cl, c); provider.IsNotFound(err) {
			return p.dropClaims(ctx, name, *r, "")
		} else if err != nil {
			return err
		}
	}
	if id != "" {
		if err := p.deleteInstance(ctx, cl, *r, id); err != nil {
			return err
		}
		p.opts.Log.Info("machine deleted", "machine", name, "scaleSet", r.String(), "instance", id)
	}
	return p.dropClaims(ctx, name, *r, id)
}

// dropClaims removes the machine's claim, and any claim of the same
// instance (a Node deleted by its providerID's name).
func (p *Provider) dropClaims(ctx context.Context, name string, r ref, id string) error {
	all, err := p.claims.List(ctx)
	if err != nil {
		return err
	}
	for _, c := range all {
		if c.Machine == name || id != "" && c.InstanceID == id && refOf(c).key() == r.key() {
			if err := p.claims.Delete(ctx, c.Machine); err != nil {
				return err
			}
		}
	}
	return nil
}

// locate finds the scale set and instance of a machine: from its claim, or
// from a name NameOf gave. nil when the machine is unknown.
func (p *Provider) locate(ctx context.Context, name string) (*ref, string, *Claim, error) {
	if r, id, ok := parseName(name); ok {
		return &r, id, nil, nil
	}
	c, err := p.claims.Get(ctx, name)
	if err != nil || c == nil {
		return nil, "", nil, err
	}
	r := refOf(c)
	return &r, c.InstanceID, c, nil
}

// Get returns the machine named name.
func (p *Provider) Get(ctx context.Context, name string) (*provider.Machine, error) {
	if v, ok := parseVMName(name); ok {
		return p.getVM(ctx, v, name, "")
	}
	r, id, c, err := p.locate(ctx, name)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("machine %s: %w", name, provider.ErrNotFound)
	}
	if c != nil && c.Flexible {
		return p.getVM(ctx, vmRefOf(c), name, c.Pool)
	}
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return nil, err
	}
	if c != nil && id == "" { // the scale-out is under way, or was cut short
		unlock := p.lock(*r)
		defer unlock()
		return p.pending(ctx, cl, c, "", false)
	}
	if c != nil {
		return p.claimed(ctx, cl, c)
	}
	vm, err := cl.vms.Get(ctx, r.resourceGroup, r.scaleSet, id, nil)
	if isNotFound(err) {
		return nil, fmt.Errorf("machine %s (instance %s of scale set %s): %w", name, id, r, provider.ErrNotFound)
	}
	if err != nil {
		return nil, refusal(fmt.Sprintf("reading instance %s of scale set %s", id, r), err)
	}
	return machineOf(name, "", *r, &vm.VirtualMachineScaleSetVM), nil
}

// List returns the pool's machines: those its claims hold that are there.
func (p *Provider) List(ctx context.Context, pool string) ([]*provider.Machine, error) {
	all, err := p.claims.List(ctx)
	if err != nil {
		return nil, err
	}
	var flexible []*Claim
	for _, c := range all {
		if c.Pool == pool && c.Flexible {
			flexible = append(flexible, c)
		}
	}
	out, err := p.listVMs(ctx, flexible)
	if err != nil {
		return nil, err
	}
	for _, c := range all {
		if c.Pool != pool || c.Flexible {
			continue
		}
		m, err := p.Get(ctx, c.Machine)
		if provider.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// namePrefix begins the machine name NameOf gives a Node from its
// providerID: the scale set's instance, whoever made it.
const namePrefix = "azure-vmss/"

// providerIDPattern is an Azure scale set instance's providerID, in any
// case (cloud-provider-azure lowercases the resource group).
var providerIDPattern = regexp.MustCompile(`(?i)^azure:///subscriptions/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/resourceGroups/([-\w.()]{1,90})/providers/Microsoft\.Compute/virtualMachineScaleSets/([-\w.]{1,64})/virtualMachines/([0-9]{1,10})$`)

// NameOf is the machine name of a Node on a scale set, from its
// providerID, so that a Node the pool had before sluice can be deleted
// through its set too: "azure-vmss/<subscription>/<resource group>/<scale
// set>/<instance ID>" for a Uniform set's instance,
// "azure-vmss/<subscription>/<resource group>/<VM name>" for a standard VM
// (any VM's: Get finds it only in a scale set, and Delete deletes it only
// in a set an azure-vmss NodePool lists, Options.ListPools); "" for any
// other providerID. The controller prefers the machine name it noted on a
// Node it asked for (sluice.dev/machine).
func (p *Provider) NameOf(n *corev1.Node) string {
	if m := providerIDPattern.FindStringSubmatch(n.Spec.ProviderID); m != nil {
		return namePrefix + strings.Join(m[1:], "/")
	}
	if m := vmProviderIDPattern.FindStringSubmatch(n.Spec.ProviderID); m != nil {
		return namePrefix + strings.Join(m[1:], "/")
	}
	return ""
}

func parseName(name string) (ref, string, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return ref{}, "", false
	}
	f := strings.Split(rest, "/")
	if len(f) != 4 || slices.Contains(f, "") {
		return ref{}, "", false
	}
	return ref{f[0], f[1], f[2]}, f[3], true
}

// providerID is the providerID of a scale set instance as
// cloud-provider-azure writes it on the Node: the resource group lowercased.
func providerID(r ref, instanceID string) string {
	return fmt.Sprintf("azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s/virtualMachines/%s",
		r.subscription, strings.ToLower(r.resourceGroup), r.scaleSet, instanceID)
}

// machineOf describes a scale set instance as a machine.
func machineOf(name, pool string, r ref, vm *armcompute.VirtualMachineScaleSetVM) *provider.Machine {
	id := str(vm.InstanceID)
	m := &provider.Machine{
		Name:       name,
		Pool:       pool,
		ProviderID: providerID(r, id),
		Capacity:   v1alpha1.CapacityOnDemand,
		State:      provider.StateLaunching,
	}
	if vm.SKU != nil {
		m.InstanceType = str(vm.SKU.Name)
	}
	m.Zone = str(vm.Location)
	if len(vm.Zones) > 0 && vm.Zones[0] != nil {
		m.Zone += "-" + *vm.Zones[0] // as the Node's topology.kubernetes.io/zone: westeurope-1
	}
	if props := vm.Properties; props != nil {
		if props.TimeCreated != nil {
			m.Created = *props.TimeCreated
		}
		switch str(props.ProvisioningState) {
		case "Succeeded":
			m.State = provider.StateRunning
		case "Failed":
			m.State, m.Message = provider.StateFailed, "the instance failed to provision"
		case "Deleting":
			m.State = provider.StateDeleting
		}
	}
	if props := vm.Properties; props != nil && props.StorageProfile != nil {
		// What the instance was made from, as Azure reports it: a model
		// changed since does not change it.
		m.Image = imageOf(props.StorageProfile.ImageReference, true)
	}
	if vm.Properties != nil && vm.Properties.InstanceView != nil {
		for _, s := range vm.Properties.InstanceView.Statuses {
			if s != nil && m.State == provider.StateFailed && s.Message != nil {
				m.Message = *s.Message
			}
		}
	}
	return m
}

func (p *Provider) isUnavailable(size string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.unavailable[size]
	return ok && p.clock.Now().Before(until)
}

func (p *Provider) markUnavailable(size string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unavailable[size] = p.clock.Now().Add(unavailableFor)
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
