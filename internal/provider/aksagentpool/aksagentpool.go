// Package aksagentpool is the aks-agentpool provider: a pool's machines are
// the machines of one AKS agent pool, made by raising the agent pool's
// count and removed by deleting the one machine (AgentPools_DeleteMachines),
// through the AKS API with the Azure SDK for Go (armcontainerservice/v6,
// API 2025-02-01). sluice never touches the scale set behind the pool,
// which AKS reconciles.
//
// AKS names a new machine itself, so sluice cannot name it in advance as
// provider.Provider.Create asks. The provider therefore writes a Claim
// first (the machine's name and the pool's machine names as they are),
// then raises the count by one; the machine is the one that was not there
// before. A controller restarted between the two finds the claim: if the
// pool has the new machine, that is the machine; if the count was never
// raised, it is raised now. One agent pool is changed by one request at a
// time, and sluice must be its only writer of count: an agent pool with
// AKS's cluster autoscaler on is refused, and machines the claims cannot
// explain are refused as CapacityChangedElsewhere instead of being guessed
// at. Machines the pool had before sluice are left alone.
//
// A pool's node image, labels and taints are AKS's: the agent pool's
// nodeImageVersion, nodeLabels, nodeTaints and nodeInitializationTaints.
// sluice never writes them; CheckTemplate and CheckRegistration report
// where they differ from the NodePool.
package aksagentpool

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
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

// Options tune the provider.
type Options struct {
	// ClientOptions are every client's (tests: the fake's transport).
	ClientOptions *arm.ClientOptions
	// PollEvery is how often a long-running operation is polled when Azure
	// names no Retry-After; default 5 s.
	PollEvery time.Duration
	// ListPools lists the cluster's NodePools, for Get and Delete of a
	// machine no claim holds (a Node the pool had before sluice): its
	// agent pool is the one of a NodePool that lists it.
	ListPools provider.PoolList
	Log       *slog.Logger
}

// Provider makes a pool's machines in its AKS agent pool. Build it with New.
type Provider struct {
	cred      azcore.TokenCredential
	opts      Options
	claims    Claims
	clock     clock.WithTicker
	throttles *azurearm.Throttles

	mu      sync.Mutex
	clients map[string]*clients      // by subscription
	locks   map[string]chan struct{} // by agent pool, each holding one token
	// byID are the claimed machines' names by providerID key, for NameOf.
	byID   map[string]string
	loaded bool
}

type clients struct {
	pools    *armcontainerservice.AgentPoolsClient
	machines *armcontainerservice.MachinesClient
	raw      *arm.Client // for what the GA API does not hold
}

// New returns a provider calling AKS with cred (azidentity's default chain
// in a cluster: workload identity) and keeping its claims in claims.
func New(cred azcore.TokenCredential, claims Claims, clk clock.WithTicker, opts Options) *Provider {
	if opts.PollEvery <= 0 {
		opts.PollEvery = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Provider{cred: cred, opts: opts, claims: claims, clock: clk, throttles: azurearm.NewThrottles(clk),
		clients: map[string]*clients{}, locks: map[string]chan struct{}{}, byID: map[string]string{}}
}

// ref names one agent pool.
type ref struct{ subscription, resourceGroup, cluster, agentPool string }

func (r ref) key() string {
	return strings.ToLower(r.subscription + "/" + r.resourceGroup + "/" + r.cluster + "/" + r.agentPool)
}

func (r ref) String() string { return r.resourceGroup + "/" + r.cluster + "/" + r.agentPool }

func refOf(c *Claim) ref { return ref{c.Subscription, c.ResourceGroup, c.Cluster, c.AgentPool} }

func refOfSpec(s *v1alpha1.AKSProviderSpec) ref {
	return ref{s.SubscriptionID, s.ResourceGroup, s.Cluster, s.AgentPool}
}

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
	f, err := armcontainerservice.NewClientFactory(subscription, p.cred, &o)
	if err != nil {
		return nil, fmt.Errorf("azure clients for subscription %s: %w", subscription, err)
	}
	raw, err := arm.NewClient("aksagentpool", "v0.0.0", p.cred, &o)
	if err != nil {
		return nil, fmt.Errorf("azure client for subscription %s: %w", subscription, err)
	}
	c := &clients{pools: f.NewAgentPoolsClient(), machines: f.NewMachinesClient(), raw: raw}
	p.clients[subscription] = c
	return c, nil
}

// lock holds the agent pool for one change at a time, or gives up when ctx
// ends (a change is held through its polling, minutes); it returns the
// unlock. AKS itself takes one operation per pool at a time and refuses the
// next until the first ends; the lock keeps one controller's changes from
// reading the pool's machines while another of its own is under way.
func (p *Provider) lock(ctx context.Context, r ref) (func(), error) {
	p.mu.Lock()
	l, ok := p.locks[r.key()]
	if !ok {
		l = make(chan struct{}, 1)
		p.locks[r.key()] = l
	}
	p.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another change of agent pool %s: %w", r, context.Cause(ctx))
	}
}

// Delete deletes the machine and its claim; a machine already gone (or
// never made) is no error. A deletion AKS fails keeps the claim, so asking
// again deletes it. A name Delete cannot place (no claim, and no NodePool's
// agent pool has the machine) is an error, so that a Node is kept rather
// than its machine forgotten.
func (p *Provider) Delete(ctx context.Context, name string) error {
	r, aksName, c, err := p.locate(ctx, name)
	if err != nil || r == nil {
		return err
	}
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return err
	}
	unlock, err := p.lock(ctx, *r)
	if err != nil {
		return err
	}
	defer unlock()
	if c != nil && aksName == "" {
		if aksName, err = p.pendingOf(ctx, cl, c); err != nil {
			return err
		}
	}
	if aksName != "" {
		if err := p.deleteMachine(ctx, cl, *r, aksName); err != nil {
			return err
		}
	}
	return p.dropClaims(ctx, name, *r, aksName)
}

// pendingOf is the AKS machine to delete for a claim whose scale-out is not
// settled: "" when the count was never raised for it (or AKS went back on
// it), so no machine is its; an error while the count is raised and AKS
// has not listed the machine yet, so that the claim stays until the
// machine shows and is deleted then, never left running. Several new
// machines, one of which is the claim's, cannot be told apart: they stay
// the agent pool's, and NameOf names their Nodes as it names those the
// pool had before sluice.
func (p *Provider) pendingOf(ctx context.Context, cl *clients, c *Claim) (string, error) {
	r := refOf(c)
	ap, err := p.readPool(ctx, cl, r)
	if err != nil || !raised(c, ap) {
		return "", err
	}
	fresh, err := p.fresh(ctx, cl, c)
	if err != nil {
		return "", err
	}
	switch len(fresh) {
	case 0:
		return "", &provider.Error{Code: CodeOperationInProgress, Retryable: true, Message: fmt.Sprintf(
			"agent pool %s's count was raised for machine %s and AKS has not listed the machine yet; it is deleted once AKS does", r, c.Machine)}
	case 1:
		return fresh[0].name, nil
	}
	p.opts.Log.Info("claim dropped; its machine cannot be told among the agent pool's new ones, which stay the pool's",
		"machine", c.Machine, "agentPool", r.String(), "err", elsewhere(r, c.Machine, fresh))
	return "", nil
}

// deleteMachine deletes one machine of the agent pool, which lowers its
// count by one; a machine already gone is no error.
func (p *Provider) deleteMachine(ctx context.Context, cl *clients, r ref, aksName string) error {
	if _, err := cl.machines.Get(ctx, r.resourceGroup, r.cluster, r.agentPool, aksName, nil); err != nil {
		if isNotFound(err) {
			return nil
		}
		return refusal(fmt.Sprintf("reading machine %s of agent pool %s", aksName, r), err)
	}
	poller, err := cl.pools.BeginDeleteMachines(ctx, r.resourceGroup, r.cluster, r.agentPool,
		armcontainerservice.AgentPoolDeleteMachinesParameter{MachineNames: []*string{to.Ptr(aksName)}}, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opts.PollEvery})
	}
	if err != nil && !isNotFound(err) {
		return refusal(fmt.Sprintf("deleting machine %s of agent pool %s", aksName, r), err)
	}
	p.opts.Log.Info("machine deleted", "agentPool", r.String(), "aksMachine", aksName)
	return nil
}

// dropClaims removes the machine's claim, and any claim of the same AKS
// machine (a Node deleted by the name NameOf gave it).
func (p *Provider) dropClaims(ctx context.Context, name string, r ref, aksName string) error {
	all, err := p.claims.List(ctx)
	if err != nil {
		return err
	}
	for _, c := range all {
		if c.Machine == name || aksName != "" && c.AKSMachine == aksName && refOf(c).key() == r.key() {
			if err := p.claims.Delete(ctx, c.Machine); err != nil {
				return err
			}
			p.forget(c)
		}
	}
	return nil
}

// locate finds the agent pool and AKS machine of a machine: from its claim,
// or from a name NameOf gave, or a Node's own name (an AKS machine's). nil
// when the machine is unknown or gone.
func (p *Provider) locate(ctx context.Context, name string) (*ref, string, *Claim, error) {
	if sub, aksName, ok := parseName(name); ok {
		r, err := p.resolve(ctx, sub, aksName)
		return r, aksName, nil, err
	}
	c, err := p.claims.Get(ctx, name)
	if err != nil {
		return nil, "", nil, err
	}
	if c == nil {
		if aksMachinePattern.MatchString(name) {
			r, err := p.resolve(ctx, "", name)
			return r, name, nil, err
		}
		return nil, "", nil, nil
	}
	r := refOf(c)
	return &r, c.AKSMachine, c, nil
}

// resolve finds the agent pool of an AKS machine no claim holds: among the
// NodePools' agent pools of the name its scale set carries (and of the
// subscription, when known), the one that has it. nil when there are such
// pools and none has it: it is gone. An error when no NodePool names such
// a pool, or the NodePools cannot be read: the machine may be running
// where sluice cannot see, and saying "gone" would let its Node go.
func (p *Provider) resolve(ctx context.Context, subscription, aksName string) (*ref, error) {
	m := aksMachinePattern.FindStringSubmatch(aksName)
	if m == nil {
		return nil, fmt.Errorf("machine %s: not an AKS machine's name", aksName)
	}
	if p.opts.ListPools == nil {
		return nil, fmt.Errorf("machine %s: the provider was started without the NodePools, so it cannot tell its agent pool", aksName)
	}
	pools, err := p.opts.ListPools(ctx)
	if err != nil {
		return nil, fmt.Errorf("machine %s: listing the NodePools to find its agent pool: %w", aksName, err)
	}
	seen := map[string]bool{}
	for _, np := range pools {
		s := np.Spec.Provider.AKS
		if np.Spec.Provider.Name != v1alpha1.ProviderAKS || s == nil || !strings.EqualFold(s.AgentPool, m[1]) ||
			subscription != "" && !strings.EqualFold(s.SubscriptionID, subscription) {
			continue
		}
		r := refOfSpec(s)
		if seen[r.key()] {
			continue
		}
		seen[r.key()] = true
		cl, err := p.clientsFor(r.subscription)
		if err != nil {
			return nil, err
		}
		_, err = cl.machines.Get(ctx, r.resourceGroup, r.cluster, r.agentPool, aksName, nil)
		if err == nil {
			return &r, nil
		}
		if !isNotFound(err) {
			return nil, refusal(fmt.Sprintf("reading machine %s of agent pool %s", aksName, r), err)
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("machine %s: no NodePool names an AKS agent pool %s, so sluice cannot tell which cluster's it is and keeps its Node", aksName, m[1])
	}
	return nil, nil
}

// Get returns the machine named name.
func (p *Provider) Get(ctx context.Context, name string) (*provider.Machine, error) {
	r, aksName, c, err := p.locate(ctx, name)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("machine %s: %w", name, provider.ErrNotFound)
	}
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return nil, err
	}
	if c != nil && aksName == "" {
		// The scale-out is under way, or was cut short. No lock: Get
		// changes nothing in AKS, and the claim it may write (its one new
		// machine) is what any other reader would write.
		return p.pending(ctx, cl, c, false)
	}
	if c != nil {
		return p.claimed(ctx, cl, c)
	}
	m, err := cl.machines.Get(ctx, r.resourceGroup, r.cluster, r.agentPool, aksName, nil)
	if isNotFound(err) {
		return nil, fmt.Errorf("machine %s (%s of agent pool %s): %w", name, aksName, *r, provider.ErrNotFound)
	}
	if err != nil {
		return nil, refusal(fmt.Sprintf("reading machine %s of agent pool %s", aksName, *r), err)
	}
	ap, err := p.readPool(ctx, cl, *r)
	if err != nil {
		return nil, err
	}
	return describe(name, "", time.Time{}, resourceIDOf(&m.Machine), ap), nil
}

// List returns the pool's machines: those its claims hold that are there.
// Each agent pool and its machine list is read once.
func (p *Provider) List(ctx context.Context, pool string) ([]*provider.Machine, error) {
	all, err := p.claims.List(ctx)
	if err != nil {
		return nil, err
	}
	byRef := map[string][]*Claim{}
	var keys []string
	for _, c := range all {
		if c.Pool != pool {
			continue
		}
		k := refOf(c).key()
		if _, ok := byRef[k]; !ok {
			keys = append(keys, k)
		}
		byRef[k] = append(byRef[k], c)
	}
	var out []*provider.Machine
	for _, k := range keys {
		ms, err := p.listAgentPool(ctx, byRef[k])
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

// listAgentPool are the machines of claims of one agent pool that are
// there.
func (p *Provider) listAgentPool(ctx context.Context, claims []*Claim) ([]*provider.Machine, error) {
	r := refOf(claims[0])
	cl, err := p.clientsFor(r.subscription)
	if err != nil {
		return nil, err
	}
	ap, err := p.readPool(ctx, cl, r)
	if err != nil {
		return nil, err
	}
	listed, err := p.machines(ctx, cl, r)
	if err != nil {
		return nil, err
	}
	var out []*provider.Machine
	for _, c := range claims {
		if c.AKSMachine == "" {
			m, err := p.pending(ctx, cl, c, false)
			if provider.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, m)
			continue
		}
		if i := slices.IndexFunc(listed, func(m aksMachine) bool { return m.name == c.AKSMachine }); i >= 0 {
			out = append(out, describe(c.Machine, c.Pool, c.Created, listed[i].resourceID, ap))
		}
	}
	return out, nil
}

// readPool reads the agent pool, which must say its count.
func (p *Provider) readPool(ctx context.Context, cl *clients, r ref) (*armcontainerservice.AgentPool, error) {
	got, err := cl.pools.Get(ctx, r.resourceGroup, r.cluster, r.agentPool, nil)
	if err != nil {
		return nil, refusal("reading agent pool "+r.String(), err)
	}
	if got.Properties == nil || got.Properties.Count == nil {
		return nil, fmt.Errorf("agent pool %s: AKS answered without its count", r)
	}
	return &got.AgentPool, nil
}

func resourceIDOf(m *armcontainerservice.Machine) string {
	if m.Properties == nil {
		return ""
	}
	return str(m.Properties.ResourceID)
}

// describe is an AKS machine as a provider.Machine, with what its agent
// pool says of all its machines: the VM size, node image and priority
// (the GA Machines API reports none of them per machine, nor a zone or a
// state). So its state is the pool's: Running once the pool's operation
// has ended (AKS ends a scale-out when its nodes are ready), Launching
// while any operation runs on the pool, a machine that has long been
// running included.
func describe(name, pool string, created time.Time, resourceID string, ap *armcontainerservice.AgentPool) *provider.Machine {
	out := &provider.Machine{Name: name, Pool: pool, Created: created, Capacity: v1alpha1.CapacityOnDemand, State: provider.StateLaunching}
	if resourceID != "" {
		out.ProviderID = providerID(resourceID)
	}
	if props := ap.Properties; props != nil {
		out.InstanceType = str(props.VMSize)
		out.Image = str(props.NodeImageVersion)
		if props.ScaleSetPriority != nil && *props.ScaleSetPriority == armcontainerservice.ScaleSetPrioritySpot {
			out.Capacity = v1alpha1.CapacitySpot
		}
		if str(props.ProvisioningState) == "Succeeded" {
			out.State = provider.StateRunning
		}
	}
	return out
}

// vmPattern is a scale set VM's resource ID, or the providerID of its Node,
// in any case (cloud-provider-azure lowercases the resource group).
var vmPattern = regexp.MustCompile(`(?i)^(?:azure://)?/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Compute/virtualMachineScaleSets/([^/]+)/virtualMachines/([0-9]{1,10})$`)

// aksMachinePattern is the name AKS gives an agent pool's machine (and its
// Node): the pool's scale set, aks-<agent pool>-<8 digits>-vmss, and the
// instance ID in six base-36 digits. AKS allows an agent pool's name only
// lowercase letters and digits, at most 12.
var aksMachinePattern = regexp.MustCompile(`^aks-([a-z0-9]{1,12})-[0-9]+-vmss[0-9a-z]{6}$`)

// providerID is the providerID of a machine's Node, "azure://" and its
// resource ID, as cloud-provider-azure writes it: the resource group
// lowercased.
func providerID(resourceID string) string {
	m := vmPattern.FindStringSubmatchIndex(resourceID)
	if m == nil {
		return "azure://" + resourceID
	}
	return "azure://" + resourceID[:m[4]] + strings.ToLower(resourceID[m[4]:m[5]]) + resourceID[m[5]:]
}

// namePrefix begins the machine name NameOf gives a Node of an agent pool
// sluice has no claim for: a machine the pool had before sluice.
const namePrefix = "aks-agentpool/"

// NameOf is the machine name of a Node of an agent pool: the name sluice
// gave it when a claim holds its providerID, else
// "aks-agentpool/<subscription>/<AKS machine>" (a machine the pool had
// before sluice), which Get and Delete place among the NodePools' agent
// pools without having listed any; "" for a Node of no AKS scale set.
func (p *Provider) NameOf(n *corev1.Node) string {
	m := vmPattern.FindStringSubmatch(n.Spec.ProviderID)
	if m == nil {
		return ""
	}
	p.loadClaims()
	p.mu.Lock()
	name, ok := p.byID[provider.IDKey(n.Spec.ProviderID)]
	p.mu.Unlock()
	if ok {
		return name
	}
	id, err := strconv.ParseInt(m[4], 10, 64)
	if err != nil {
		return ""
	}
	aksName := machineName(m[3], id)
	if !aksMachinePattern.MatchString(aksName) {
		return ""
	}
	return namePrefix + m[1] + "/" + aksName
}

// machineName is the name AKS gives a scale set's instance: the set's name
// and the instance ID in six base-36 digits (aks-nodepool1-25481572-vmss00000a,
// in the REST reference's examples).
func machineName(set string, id int64) string {
	s := strconv.FormatInt(id, 36)
	return strings.ToLower(set) + strings.Repeat("0", max(0, 6-len(s))) + s
}

// parseName reads a name NameOf gave: the subscription and the AKS
// machine.
func parseName(name string) (string, string, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return "", "", false
	}
	sub, aksName, ok := strings.Cut(rest, "/")
	if !ok || sub == "" || !aksMachinePattern.MatchString(aksName) {
		return "", "", false
	}
	return sub, aksName, true
}

// loadClaims fills NameOf's index from the claims once; the provider keeps
// it as it writes them after that.
func (p *Provider) loadClaims() {
	p.mu.Lock()
	loaded := p.loaded
	p.mu.Unlock()
	if loaded {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, err := p.claims.List(ctx)
	if err != nil {
		p.opts.Log.Info("reading the claims for NameOf; trying again at the next Node", "err", err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range all {
		if c.ResourceID != "" {
			p.byID[provider.IDKey(providerID(c.ResourceID))] = c.Machine
		}
	}
	p.loaded = true
}

// remember notes a settled claim for NameOf.
func (p *Provider) remember(c *Claim) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byID[provider.IDKey(providerID(c.ResourceID))] = c.Machine
}

// forget drops a claim from NameOf's index.
func (p *Provider) forget(c *Claim) {
	if c.ResourceID == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byID, provider.IDKey(providerID(c.ResourceID)))
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// withoutReadOnly is the agent pool as a PUT of it should send it: every
// setting as AKS has it (a PUT replaces the pool, and a setting left out
// would be reset to its default, an orchestratorVersion to the latest), and
// none of the fields AKS reports but does not take.
func withoutReadOnly(ap armcontainerservice.AgentPool) armcontainerservice.AgentPool {
	props := *ap.Properties
	props.CurrentOrchestratorVersion, props.ETag, props.NodeImageVersion, props.ProvisioningState = nil, nil, nil, nil
	return armcontainerservice.AgentPool{Properties: &props}
}
