// Package clusterapi is the cluster-api provider: a pool's machines are the
// Machines of one Cluster API MachineDeployment (or standalone MachineSet),
// made by raising its replicas by one and removed by marking one Machine
// with cluster.x-k8s.io/delete-machine and lowering its replicas by one,
// both through the scale subresource at the resourceVersion read, so a
// change made since is refused, not overwritten (docs/design/cluster-api.md,
// "The provider cluster-api"). It speaks cluster.x-k8s.io/v1beta2 through a
// dynamic client and imports none of Cluster API's Go types.
//
// Cluster API names a new Machine itself, so the provider writes a Claim
// first (sluice's name for the machine, the target's Machines and the
// replicas it asks for), then raises replicas; the machine is the oldest
// Machine that was not there before and that no other claim holds. A
// controller restarted between the two finds the claim: replicas already
// at the claim's count are not raised again. One target is changed by one
// request at a time, and sluice must be the only writer of its replicas: a
// target cluster-autoscaler or a ClusterClass topology sizes is refused, as
// are replicas the claims cannot explain.
//
// Machines the pool had before sluice are named
// cluster-api/<namespace>/<machine> (NameOf, from the Node's providerID);
// Get and Delete act on them in a target some cluster-api NodePool names.
// List gives sluice's machines only.
//
// A machine's image, version and bootstrap are its MachineDeployment's, which
// Cluster API rolls out: sluice never writes them.
package clusterapi

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Namer    = (*Provider)(nil)
)

// Options tune the provider.
type Options struct {
	// ListPools lists the cluster's NodePools: the namespaces NameOf reads
	// Machines in, and the targets Get and Delete may act in for a machine
	// no claim holds.
	ListPools provider.PoolList
	// SettleWithin is how long Create waits, after raising replicas, for
	// Cluster API to make the Machine, so that the claim names it at once;
	// default 10 s. A Machine made later is named by the next Get or List.
	SettleWithin time.Duration
	// PollEvery is how often the Machines are read meanwhile; default
	// 250 ms.
	PollEvery time.Duration
	// IndexTTL is how long NameOf uses a listing of the pools' Machines
	// again before it reads them anew for a providerID it does not know;
	// default provider.PoolListTTL.
	IndexTTL time.Duration
	Log      *slog.Logger
}

// Provider makes a pool's machines in its MachineDeployment or MachineSet.
// Build it with New.
type Provider struct {
	dyn    dynamic.Interface
	claims Claims
	clock  clock.WithTicker
	opts   Options

	mu    sync.Mutex
	locks map[string]chan struct{} // by target, each holding one token
	index index                    // for NameOf
}

// New returns a provider acting on Cluster API's objects through dyn (the
// management cluster's) and keeping its claims in claims.
func New(dyn dynamic.Interface, claims Claims, clk clock.WithTicker, opts Options) *Provider {
	if opts.SettleWithin == 0 {
		opts.SettleWithin = 10 * time.Second
	}
	if opts.PollEvery <= 0 {
		opts.PollEvery = 250 * time.Millisecond
	}
	if opts.IndexTTL <= 0 {
		opts.IndexTTL = provider.PoolListTTL
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Provider{dyn: dyn, claims: claims, clock: clk, opts: opts, locks: map[string]chan struct{}{},
		index: index{byID: map[string]string{}, named: map[string]string{}}}
}

// lock holds the target for one change at a time, or gives up when ctx
// ends; it returns the unlock. Two changes of one target's replicas from
// one controller would each read the same count and Machines.
func (p *Provider) lock(ctx context.Context, t target) (func(), error) {
	p.mu.Lock()
	l, ok := p.locks[t.key()]
	if !ok {
		l = make(chan struct{}, 1)
		p.locks[t.key()] = l
	}
	p.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another change of %s: %w", t, context.Cause(ctx))
	}
}

// Get returns the machine named name.
func (p *Provider) Get(ctx context.Context, name string) (*provider.Machine, error) {
	loc, err := p.locate(ctx, name)
	if err != nil {
		return nil, err
	}
	if loc == nil {
		return nil, fmt.Errorf("machine %s: %w", name, provider.ErrNotFound)
	}
	c := loc.claim
	if c != nil && !c.settled() {
		// Naming the claim's Machine takes the lock: a Create of the same
		// target may be choosing among the same new Machines.
		unlock, err := p.lock(ctx, c.target())
		if err != nil {
			return nil, err
		}
		defer unlock()
		return p.pending(ctx, c, false)
	}
	m, err := get[machine](ctx, p, Machines, loc.namespace, loc.machine)
	if apierrors.IsNotFound(err) {
		if c != nil {
			p.drop(ctx, c)
		}
		return nil, fmt.Errorf("machine %s (Machine %s/%s): %w", name, loc.namespace, loc.machine, provider.ErrNotFound)
	}
	if err != nil {
		return nil, refusal("reading Machine "+loc.namespace+"/"+loc.machine, err)
	}
	if c != nil {
		return describe(c.Machine, c.Pool, c.Created, m), nil
	}
	return describe(name, loc.pool, m.CreationTimestamp.Time, m), nil
}

// List returns the pool's machines: those its claims hold that are there.
// Claims whose Machines are gone are dropped.
func (p *Provider) List(ctx context.Context, pool string) ([]*provider.Machine, error) {
	all, err := p.claims.List(ctx)
	if err != nil {
		return nil, err
	}
	byNamespace := map[string][]*machine{}
	var out []*provider.Machine
	for _, c := range all {
		if c.Pool != pool {
			continue
		}
		if !c.settled() {
			m, err := p.Get(ctx, c.Machine)
			if provider.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, m)
			continue
		}
		ms, ok := byNamespace[c.Namespace]
		if !ok {
			if ms, err = list[machine](ctx, p, Machines, c.Namespace, ""); err != nil {
				return nil, refusal("listing the Machines of namespace "+c.Namespace, err)
			}
			byNamespace[c.Namespace] = ms
		}
		i := slices.IndexFunc(ms, func(m *machine) bool { return m.Name == c.CAPIMachine })
		if i < 0 {
			p.drop(ctx, c)
			continue
		}
		out = append(out, describe(c.Machine, c.Pool, c.Created, ms[i]))
	}
	return out, nil
}

// describe is a Machine as a provider.Machine named name.
func describe(name, pool string, created time.Time, m *machine) *provider.Machine {
	out := &provider.Machine{Name: name, Pool: pool, Created: created, ProviderID: m.Spec.ProviderID, Zone: m.zone(), State: provider.StateLaunching}
	switch {
	case m.deleting():
		out.State = provider.StateDeleting
	case m.Status.Phase == "Failed":
		out.State, out.Message = provider.StateFailed, fmt.Sprintf("Cluster API reports Machine %s/%s Failed", m.Namespace, m.Name)
	case m.Status.NodeRef != nil && m.Status.NodeRef.Name != "":
		out.State = provider.StateRunning
	}
	return out
}

// launching is a claimed machine whose Machine is not known yet.
func launching(c *Claim) *provider.Machine {
	return &provider.Machine{Name: c.Machine, Pool: c.Pool, Created: c.Created, State: provider.StateLaunching}
}

// location is where a machine name leads: its claim, if any, and its
// Machine ("" while a claim's Machine is not known), in a pool's target.
type location struct {
	claim     *Claim
	namespace string
	machine   string
	pool      string // for a machine no claim holds: the pool naming its target
}

// namePrefix begins the name of a machine no claim holds:
// cluster-api/<namespace>/<machine>.
const namePrefix = "cluster-api/"

// MachineName is the machine name of a Machine no claim holds.
func MachineName(namespace, machine string) string { return namePrefix + namespace + "/" + machine }

// locate finds a machine by its name: a claim's, a name NameOf gave
// (cluster-api/<namespace>/<machine>), or a Machine's or its Node's own name
// in the namespace of a cluster-api pool. nil when no such Machine is in a
// target some cluster-api pool names (a name never made, or gone). An error
// when the NodePools cannot be read, or the Machine is in no pool's target:
// saying "gone" would let its Node go while the Machine runs on.
func (p *Provider) locate(ctx context.Context, name string) (*location, error) {
	c, err := p.claims.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if c != nil {
		return &location{claim: c, namespace: c.Namespace, machine: c.CAPIMachine}, nil
	}
	if rest, ok := strings.CutPrefix(name, namePrefix); ok {
		ns, m, ok := strings.Cut(rest, "/")
		if !ok || ns == "" || m == "" || strings.Contains(m, "/") {
			return nil, nil
		}
		return p.inPool(ctx, name, ns, func(ctx context.Context) (*machine, error) {
			m, err := get[machine](ctx, p, Machines, ns, m)
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return m, err
		})
	}
	if strings.Contains(name, "/") {
		return nil, nil
	}
	pools, err := p.pools(ctx)
	if err != nil {
		return nil, fmt.Errorf("machine %s: listing the NodePools to find its Machine: %w", name, err)
	}
	for _, ns := range namespaces(pools) {
		loc, err := p.inPool(ctx, name, ns, func(ctx context.Context) (*machine, error) {
			ms, err := list[machine](ctx, p, Machines, ns, "")
			if err != nil {
				return nil, err
			}
			for _, m := range ms {
				if m.Name == name || m.Status.NodeRef != nil && m.Status.NodeRef.Name == name {
					return m, nil
				}
			}
			return nil, nil
		})
		if err != nil || loc != nil {
			return loc, err
		}
	}
	return nil, nil
}

// inPool finds the Machine find reads in namespace ns, and the pool whose
// target holds it.
func (p *Provider) inPool(ctx context.Context, name, ns string, find func(context.Context) (*machine, error)) (*location, error) {
	m, err := find(ctx)
	if err != nil {
		return nil, refusal("finding the Machine of machine "+name+" in namespace "+ns, err)
	}
	if m == nil {
		return nil, nil
	}
	pools, err := p.pools(ctx)
	if err != nil {
		return nil, fmt.Errorf("machine %s: listing the NodePools to find its pool: %w", name, err)
	}
	for _, np := range pools {
		if s := np.Spec.Provider.ClusterAPI; np.Spec.Provider.Name == v1alpha1.ProviderClusterAPI && s != nil && targetOf(s).owns(m) {
			return &location{namespace: ns, machine: m.Name, pool: np.Name}, nil
		}
	}
	return nil, fmt.Errorf("machine %s: Machine %s/%s is in no MachineDeployment or MachineSet a cluster-api NodePool names, so sluice keeps it and its Node",
		name, ns, m.Name)
}

// pools lists the cluster-api NodePools.
func (p *Provider) pools(ctx context.Context) ([]v1alpha1.NodePool, error) {
	if p.opts.ListPools == nil {
		return nil, fmt.Errorf("the provider was started without the NodePools")
	}
	all, err := p.opts.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	var out []v1alpha1.NodePool
	for _, np := range all {
		if np.Spec.Provider.Name == v1alpha1.ProviderClusterAPI && np.Spec.Provider.ClusterAPI != nil {
			out = append(out, np)
		}
	}
	return out, nil
}

// namespaces are the pools' namespaces, each once, in order.
func namespaces(pools []v1alpha1.NodePool) []string {
	var out []string
	for _, np := range pools {
		if ns := np.Spec.Provider.ClusterAPI.Namespace; !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// drop removes a claim whose Machine is gone. Best effort: a claim left is
// dropped at the next look.
func (p *Provider) drop(ctx context.Context, c *Claim) {
	if err := p.claims.Delete(ctx, c.Machine); err != nil {
		p.opts.Log.Info("dropping the claim of a machine that is gone; trying again at the next look", "machine", c.Machine, "err", err)
		return
	}
	p.index.forget(c)
}

// NameOf is the machine name of a Node of a Cluster API Machine, found by
// the Node's providerID among the Machines of the cluster-api pools'
// namespaces: the name sluice gave it when a claim holds the Machine, else
// cluster-api/<namespace>/<machine>; "" for a Node of no such Machine.
func (p *Provider) NameOf(n *corev1.Node) string {
	if n.Spec.ProviderID == "" {
		return ""
	}
	id := provider.IDKey(n.Spec.ProviderID)
	if name, ok := p.index.lookup(id); ok {
		return name
	}
	if !p.index.due(p.clock.Now(), p.opts.IndexTTL) {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.refreshIndex(ctx); err != nil {
		p.opts.Log.Info("reading the Machines for NameOf; trying again later", "err", err)
		return ""
	}
	name, _ := p.index.lookup(id)
	return name
}

// refreshIndex reads the pools' Machines and the claims for NameOf.
func (p *Provider) refreshIndex(ctx context.Context) error {
	pools, err := p.pools(ctx)
	if err != nil {
		return err
	}
	claims, err := p.claims.List(ctx)
	if err != nil {
		return err
	}
	byID := map[string]string{}
	for _, ns := range namespaces(pools) {
		ms, err := list[machine](ctx, p, Machines, ns, "")
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Spec.ProviderID != "" {
				byID[provider.IDKey(m.Spec.ProviderID)] = ns + "/" + m.Name
			}
		}
	}
	named := map[string]string{}
	for _, c := range claims {
		if c.settled() {
			named[c.Namespace+"/"+c.CAPIMachine] = c.Machine
		}
	}
	p.index.replace(byID, named, p.clock.Now())
	return nil
}

// index is NameOf's: providerIDs to Machines (namespace/name), and Machines
// to the names claims gave them.
type index struct {
	mu     sync.Mutex
	byID   map[string]string
	named  map[string]string
	listed time.Time
}

func (x *index) lookup(id string) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	key, ok := x.byID[id]
	if !ok {
		return "", false
	}
	if name, ok := x.named[key]; ok {
		return name, true
	}
	ns, m, _ := strings.Cut(key, "/")
	return MachineName(ns, m), true
}

// due says whether the index is older than ttl.
func (x *index) due(now time.Time, ttl time.Duration) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.listed.IsZero() || !now.Before(x.listed.Add(ttl))
}

func (x *index) replace(byID, named map[string]string, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.byID, x.named, x.listed = byID, named, now
}

// remember notes a settled claim, and its Machine's providerID once known.
func (x *index) remember(c *Claim, m *machine) {
	x.mu.Lock()
	defer x.mu.Unlock()
	key := c.Namespace + "/" + c.CAPIMachine
	x.named[key] = c.Machine
	if m != nil && m.Spec.ProviderID != "" {
		x.byID[provider.IDKey(m.Spec.ProviderID)] = key
	}
}

func (x *index) forget(c *Claim) {
	if !c.settled() {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.named, c.Namespace+"/"+c.CAPIMachine)
}
