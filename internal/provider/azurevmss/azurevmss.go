// Package azurevmss is the azure-vmss provider: a pool's machines are the
// instances of its Azure VM scale sets (an AKS node pool is one), made by
// raising a set's capacity and removed by deleting the one instance, through
// Azure Resource Manager with the Azure SDK for Go (armcompute).
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
package azurevmss

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
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
	Log       *slog.Logger
}

// Provider makes a pool's machines in its scale sets. Build it with New.
type Provider struct {
	cred      azcore.TokenCredential
	opts      Options
	claims    Claims
	clock     clock.WithTicker
	throttles throttles

	mu          sync.Mutex
	clients     map[string]*clients    // by subscription
	locks       map[string]*sync.Mutex // by scale set
	unavailable map[string]time.Time   // VM size in a location -> until
}

type clients struct {
	sets *armcompute.VirtualMachineScaleSetsClient
	vms  *armcompute.VirtualMachineScaleSetVMsClient
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
	return &Provider{cred: cred, opts: opts, claims: claims, clock: clk, throttles: throttles{clock: clk},
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
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[subscription]; ok {
		return c, nil
	}
	o := arm.ClientOptions{}
	if p.opts.ClientOptions != nil {
		o = *p.opts.ClientOptions
	}
	o.PerRetryPolicies = append(slices.Clone(o.PerRetryPolicies), policy.Policy(p.throttles.For(subscription)))
	f, err := armcompute.NewClientFactory(subscription, p.cred, &o)
	if err != nil {
		return nil, fmt.Errorf("azure clients for subscription %s: %w", subscription, err)
	}
	c := &clients{sets: f.NewVirtualMachineScaleSetsClient(), vms: f.NewVirtualMachineScaleSetVMsClient()}
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

// Create makes the machine named name in one of the pool's scale sets, or
// returns it when its claim says it is there.
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
	if c != nil {
		unlock := p.lock(refOf(c))
		m, err := p.resume(ctx, c)
		unlock()
		if err != nil || m != nil {
			return m, err
		}
		// The claimed instance is gone: the machine is made anew.
	}
	return p.scaleOut(ctx, pool, name)
}

// scaleOut raises the capacity of the first scale set that can take the
// machine.
func (p *Provider) scaleOut(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error) {
	spec := pool.Spec.Provider.Azure
	var allowed []string
	if pool.Spec.Template != nil {
		allowed = pool.Spec.Template.InstanceTypes
	}
	var lastRefusal error
	for _, s := range spec.ScaleSets {
		r := ref{spec.SubscriptionID, spec.ResourceGroup, s.Name}
		m, size, err := p.scaleOutIn(ctx, pool.Name, name, r, allowed)
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
		p.markUnavailable(size)
		lastRefusal = err
	}
	if lastRefusal != nil {
		return nil, lastRefusal
	}
	return nil, &provider.Error{Code: provider.CodeInsufficientCapacity, Retryable: true,
		Message: "no scale set of the pool has a VM size the template allows that Azure had capacity for in the last " + unavailableFor.String()}
}

// scaleOutIn makes the machine in one scale set; nil and no error when the
// set's VM size is not one to try. size is the set's VM size in its
// location, the key of the unavailable sizes.
func (p *Provider) scaleOutIn(ctx context.Context, pool, name string, r ref, allowed []string) (m *provider.Machine, size string, err error) {
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
	before, err := p.instanceIDs(ctx, cl, r)
	if err != nil {
		return nil, size, err
	}
	c := &Claim{Machine: name, Pool: pool, Subscription: r.subscription, ResourceGroup: r.resourceGroup, ScaleSet: r.scaleSet,
		Before: before, Created: p.clock.Now().UTC()}
	if err := p.claims.Put(ctx, c); err != nil {
		return nil, size, err
	}
	m, err = p.grow(ctx, cl, c, set)
	return m, size, err
}

// usable refuses a scale set the provider cannot make machines in.
func usable(set *armcompute.VirtualMachineScaleSet, r ref) error {
	if set.SKU == nil || set.SKU.Capacity == nil || set.SKU.Name == nil {
		return fmt.Errorf("scale set %s: Azure answered without its sku", r)
	}
	if set.Properties != nil && set.Properties.OrchestrationMode != nil && *set.Properties.OrchestrationMode == armcompute.OrchestrationModeFlexible {
		return &provider.Error{Code: provider.CodeInvalidTemplate,
			Message: fmt.Sprintf("scale set %s uses Flexible orchestration; the azure-vmss provider supports Uniform scale sets (as AKS node pools are) only", r)}
	}
	return nil
}

// grow raises the set's capacity by one for the stored claim c and returns
// the new instance as the machine. A scale-out Azure refuses may still have
// made an instance (one that failed to provision, counted in the capacity):
// it is deleted and the claim dropped, so the set is as it was.
func (p *Provider) grow(ctx context.Context, cl *clients, c *Claim, set *armcompute.VirtualMachineScaleSet) (*provider.Machine, error) {
	r := refOf(c)
	update := armcompute.VirtualMachineScaleSetUpdate{SKU: &armcompute.SKU{Name: set.SKU.Name, Tier: set.SKU.Tier, Capacity: to.Ptr(*set.SKU.Capacity + 1)}}
	poller, err := cl.sets.BeginUpdate(ctx, r.resourceGroup, r.scaleSet, update, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opts.PollEvery})
	}
	var azureSaidNo *azcore.ResponseError
	if err != nil && !errors.As(err, &azureSaidNo) {
		// Cut short (a timeout, a lost connection): whether Azure made the
		// instance is unknown; the claim stays for the next Create.
		return nil, fmt.Errorf("raising the capacity of scale set %s for machine %s: %w", r, c.Machine, err)
	}
	fresh, ferr := p.fresh(ctx, cl, c)
	if ferr != nil { // the claim stays: the next Create looks again
		if err == nil {
			return nil, ferr
		}
		return nil, errors.Join(refusal("raising the capacity of scale set "+r.String(), err), ferr)
	}
	if err != nil {
		undo := make([]error, 0, len(fresh))
		for _, id := range fresh {
			undo = append(undo, p.deleteInstance(ctx, cl, r, id))
		}
		if uerr := errors.Join(undo...); uerr != nil {
			// The claim stays, so the next Create or Delete finds the leftover.
			return nil, errors.Join(refusal("raising the capacity of scale set "+r.String(), err), uerr)
		}
		return nil, errors.Join(refusal("raising the capacity of scale set "+r.String(), err), p.claims.Delete(ctx, c.Machine))
	}
	return p.settle(ctx, cl, c, fresh)
}

// settle makes the one fresh instance the claim's machine.
func (p *Provider) settle(ctx context.Context, cl *clients, c *Claim, fresh []string) (*provider.Machine, error) {
	r := refOf(c)
	switch len(fresh) {
	case 0:
		return nil, fmt.Errorf("scale set %s: the capacity was raised for machine %s but no new instance is listed yet", r, c.Machine)
	case 1:
	default:
		return nil, &provider.Error{Code: CodeCapacityChangedElsewhere, Message: fmt.Sprintf(
			"scale set %s has %d new instances (%s) where machine %s asked for one: something else scales it (a cluster autoscaler?); sluice must be its only writer of capacity",
			r, len(fresh), strings.Join(fresh, ", "), c.Machine)}
	}
	c.InstanceID, c.Before = fresh[0], nil
	if err := p.claims.Put(ctx, c); err != nil {
		return nil, err
	}
	vm, err := cl.vms.Get(ctx, r.resourceGroup, r.scaleSet, c.InstanceID, nil)
	if err != nil {
		return nil, refusal(fmt.Sprintf("reading instance %s of scale set %s", c.InstanceID, r), err)
	}
	p.opts.Log.Info("machine made", "machine", c.Machine, "scaleSet", r.String(), "instance", c.InstanceID)
	return machineOf(c.Machine, c.Pool, r, &vm.VirtualMachineScaleSetVM), nil
}

// resume finishes a claim found stored: the machine when its instance is
// there, nil when it is gone (the claim is dropped). Called with the set
// locked.
func (p *Provider) resume(ctx context.Context, c *Claim) (*provider.Machine, error) {
	r := refOf(c)
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return nil, err
	}
	if c.InstanceID == "" {
		fresh, err := p.fresh(ctx, cl, c)
		if err != nil {
			return nil, err
		}
		if len(fresh) == 0 {
			// The capacity was never raised (or its instance is gone).
			got, err := cl.sets.Get(ctx, r.resourceGroup, r.scaleSet, nil)
			if err != nil {
				return nil, refusal("reading scale set "+r.String(), err)
			}
			if err := usable(&got.VirtualMachineScaleSet, r); err != nil {
				return nil, err
			}
			return p.grow(ctx, cl, c, &got.VirtualMachineScaleSet)
		}
		return p.settle(ctx, cl, c, fresh)
	}
	vm, err := cl.vms.Get(ctx, r.resourceGroup, r.scaleSet, c.InstanceID, nil)
	if isNotFound(err) {
		return nil, p.claims.Delete(ctx, c.Machine)
	}
	if err != nil {
		return nil, refusal(fmt.Sprintf("reading instance %s of scale set %s", c.InstanceID, r), err)
	}
	return machineOf(c.Machine, c.Pool, r, &vm.VirtualMachineScaleSetVM), nil
}

// fresh are the set's instances that were not there before the claim and
// that no other claim holds.
func (p *Provider) fresh(ctx context.Context, cl *clients, c *Claim) ([]string, error) {
	r := refOf(c)
	ids, err := p.instanceIDs(ctx, cl, r)
	if err != nil {
		return nil, err
	}
	all, err := p.claims.List(ctx)
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, o := range all {
		if o.Machine != c.Machine && refOf(o).key() == r.key() && o.InstanceID != "" {
			held[o.InstanceID] = true
		}
	}
	var out []string
	for _, id := range ids {
		if !slices.Contains(c.Before, id) && !held[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// instanceIDs lists the set's instance IDs, page by page.
func (p *Provider) instanceIDs(ctx context.Context, cl *clients, r ref) ([]string, error) {
	var out []string
	pager := cl.vms.NewListPager(r.resourceGroup, r.scaleSet, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, refusal("listing the instances of scale set "+r.String(), err)
		}
		for _, vm := range page.Value {
			if vm != nil && vm.InstanceID != nil {
				out = append(out, *vm.InstanceID)
			}
		}
	}
	slices.Sort(out)
	return out, nil
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
// so asking again deletes it.
func (p *Provider) Delete(ctx context.Context, name string) error {
	r, id, c, err := p.locate(ctx, name)
	if err != nil || r == nil {
		return err
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
			return &provider.Error{Code: CodeCapacityChangedElsewhere, Message: fmt.Sprintf(
				"scale set %s has %d new instances where machine %s asked for one; which to delete is not known", r, len(fresh), name)}
		}
		if len(fresh) == 1 {
			id = fresh[0]
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
	r, id, c, err := p.locate(ctx, name)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("machine %s: %w", name, provider.ErrNotFound)
	}
	pool := ""
	if c != nil {
		pool = c.Pool
		if id == "" { // the scale-out is under way
			return &provider.Machine{Name: name, Pool: pool, Created: c.Created, State: provider.StateLaunching}, nil
		}
	}
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return nil, err
	}
	vm, err := cl.vms.Get(ctx, r.resourceGroup, r.scaleSet, id, nil)
	if isNotFound(err) {
		return nil, fmt.Errorf("machine %s (instance %s of scale set %s): %w", name, id, r, provider.ErrNotFound)
	}
	if err != nil {
		return nil, refusal(fmt.Sprintf("reading instance %s of scale set %s", id, r), err)
	}
	return machineOf(name, pool, *r, &vm.VirtualMachineScaleSetVM), nil
}

// List returns the pool's machines: those its claims hold that are there.
func (p *Provider) List(ctx context.Context, pool string) ([]*provider.Machine, error) {
	all, err := p.claims.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []*provider.Machine
	for _, c := range all {
		if c.Pool != pool {
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

// NameOf is the machine name of a Node on a scale set,
// "azure-vmss/<subscription>/<resource group>/<scale set>/<instance ID>",
// from its providerID, so that a Node the pool had before sluice can be
// deleted through its set too; "" when the providerID is not a scale set
// instance's. The controller prefers the machine name it noted on a Node it
// asked for (sluice.dev/machine).
func (p *Provider) NameOf(n *corev1.Node) string {
	m := providerIDPattern.FindStringSubmatch(n.Spec.ProviderID)
	if m == nil {
		return ""
	}
	return namePrefix + strings.Join(m[1:], "/")
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
