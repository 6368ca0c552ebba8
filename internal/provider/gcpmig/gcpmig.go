// Package gcpmig is the gcp-mig provider: a pool's machines are instances of
// its Compute Engine managed instance groups, zonal or regional, that no GKE
// node pool owns (GKE reconciles its own groups; such a group is refused).
// It calls the Compute Engine API over REST (cloud.google.com/go/compute).
//
// A machine is created by name: createInstances with one per-instance
// config naming the instance, which raises the group's targetSize by one.
// The name is sluice's (provider.NewName: the pool's name, a dash and five
// lowercase letters or digits), and it is how every later call finds the
// machine and its pool. Create therefore looks the name up in the pool's
// groups before it asks, so a controller killed after asking makes no
// second instance. A group names the instances of its own resizes
// <baseInstanceName>-<four characters>, and another pool's names carry a
// dash in what follows this pool's name, so neither is ever read as one of
// this pool's machines. (The per-instance config carries no preserved
// state: a preserved metadata key would mark the pool more visibly, but it
// makes the group stateful, which forbids autoscaling and, on a regional
// group, proactive redistribution.)
//
// Compute Engine reports a createInstances DONE once it is accepted; the
// instance's creation is tried afterwards, and a failure (no capacity in the
// zone, no quota) shows only as the managed instance's lastAttempt.errors
// while the group keeps trying. Create therefore waits, up to
// Options.AttemptWait, for the first attempt's outcome: an instance that
// exists is the machine; a failed attempt is deleted again (nothing is left
// for the group to retry) and Create answers the refusal. A failure seen
// later is reported by Get as StateFailed, and the controller deletes it.
//
// Delete is deleteInstances with the instance's URL and
// skipInstancesOnValidationError, which lowers targetSize, so the group
// never replaces what sluice removed; an instance already gone or being
// deleted is no error. A machine of a pool the provider cannot find (the
// NodePool was deleted with machines left) is refused: nothing says which
// group holds it.
//
// A pool's spec.template.image makes the group's instance template a copy
// with that boot image (named after the old one and a hash of the image, so
// asking again finds it), set with setInstanceTemplate: new instances are
// made from it, and the group's other instances are left as they are, which
// only a group whose updatePolicy.type is OPPORTUNISTIC does; a PROACTIVE
// group is refused an image.
//
// Get, Delete and List are given a machine's or a pool's name only; the
// pool's groups come from the pools the provider was handed (Create,
// CheckRegistration) or from Options.Pools.
//
// A Node is its instance, named as the instance is. The Nodes a pool had
// before sluice were made by the group's own resizes (<base>-<4
// characters>), so their names lead nowhere: NameOf (provider.Namer) gives
// them the machine name gce-instance/<project>/<zone>/<instance> from the
// Node's providerID. Get and Delete of such a name read the instance's
// created-by metadata item, which Compute Engine sets on every instance a
// managed instance group creates to the group's URL, and act through that
// group: Delete is the group's deleteInstances, which lowers its
// targetSize. An instance no group made, or a group none of the gcp-mig
// pools lists (Options.ListPools: the cluster's NodePools), is refused
// (CodeForeignInstance) and never deleted. List gives sluice's machines
// only.
package gcpmig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"google.golang.org/api/option"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

var (
	_ provider.Provider            = (*Provider)(nil)
	_ provider.RegistrationChecker = (*Provider)(nil)
)

// unavailableFor is how long a zone (of a zonal group, for its machine
// type) or a regional group that had no capacity is passed over (as
// Karpenter's ICE cache does).
const unavailableFor = 3 * time.Minute

// Options tune the provider.
type Options struct {
	// ClientOptions are every client's (tests: gcptest's endpoint and no
	// credentials); none means Application Default Credentials.
	ClientOptions []option.ClientOption
	// Pools finds a pool the provider was not handed since it started,
	// for Get, Delete and List (Start reads the cluster's NodePools).
	Pools provider.PoolGetter
	// ListPools lists the pools, for Get and Delete of a machine named by
	// NameOf, whose group must be one of a gcp-mig pool's (Start lists the
	// cluster's NodePools). Without it, only the pools the provider was
	// handed or found by name since it started count.
	ListPools provider.PoolList
	// PollEvery is how often the managed instance is read while its first
	// creation attempt is under way; default 2 s.
	PollEvery time.Duration
	// AttemptWait is how long Create waits for the first creation attempt;
	// default 60 s. Compute Engine reports a failed attempt within seconds
	// of createInstances.
	AttemptWait time.Duration
	Log         *slog.Logger
}

// Provider makes a pool's machines in its managed instance groups. Build it
// with New.
type Provider struct {
	clients *clients
	clock   clock.WithTicker
	opts    Options

	mu          sync.Mutex
	pools       map[string]*v1alpha1.GCPProviderSpec // by pool name, as last handed
	locks       map[string]chan struct{}             // by group: one change at a time (see lock)
	unavailable map[string]time.Time                 // zone/machine type or regional group -> until
	templates   map[string]*template                 // by URL: templates never change
}

// New returns a provider calling Compute Engine with the options' clients.
func New(ctx context.Context, clk clock.WithTicker, opts Options) (*Provider, error) {
	if opts.PollEvery <= 0 {
		opts.PollEvery = 2 * time.Second
	}
	if opts.AttemptWait <= 0 {
		opts.AttemptWait = time.Minute
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c, err := newClients(ctx, opts.ClientOptions)
	if err != nil {
		return nil, err
	}
	return &Provider{clients: c, clock: clk, opts: opts, pools: map[string]*v1alpha1.GCPProviderSpec{},
		locks: map[string]chan struct{}{}, unavailable: map[string]time.Time{}, templates: map[string]*template{}}, nil
}

// Close releases the clients' connections.
func (p *Provider) Close() error { return p.clients.close() }

// Create makes the machine named name in the first of the pool's groups that
// can take it, or returns it when it is there already.
func (p *Provider) Create(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error) {
	spec, err := p.remember(pool)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = provider.NewName(pool.Name)
	}
	if !isMachineOf(name, pool.Name) {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
			"machine name %q is not one gcp-mig can find again: it must be the pool's name, a dash and five lowercase letters or digits (provider.NewName)", name)}
	}
	// A machine of the name being deleted (a refused attempt) is not this
	// one: the name is asked for again.
	if m, err := p.find(ctx, pool.Name, spec, name); err != nil && !provider.IsNotFound(err) {
		return nil, err
	} else if err == nil && m.State != provider.StateDeleting {
		return m, nil
	}
	var refused error
	for _, g := range groupsOf(spec) {
		m, err := p.createIn(ctx, pool, g, name)
		var skip *skipped
		switch {
		case errors.As(err, &skip):
			if refused == nil {
				refused = skip.why
			}
			continue
		case err == nil:
			return m, nil
		}
		if e, ok := provider.AsError(err); ok && e.Code == provider.CodeInsufficientCapacity {
			refused = err
			continue
		}
		return nil, err
	}
	return nil, refused
}

// skipped is a group Create passed over, and why.
type skipped struct{ why error }

func (s *skipped) Error() string { return s.why.Error() }

// Delete deletes the machine's instance; one its pool's groups do not list
// (gone, or never made) or are deleting already is no error. A machine
// whose pool cannot be found (the NodePool was deleted with machines left,
// or its provider changed) is refused: which group holds the instance is
// known only from the pool, and answering nil would let the Node go while
// the instance runs on.
func (p *Provider) Delete(ctx context.Context, name string) error {
	if strings.HasPrefix(name, instancePrefix) {
		return p.deleteGroupMade(ctx, name)
	}
	if !isNewName(name) {
		return &provider.Error{Code: CodeUnknownPool, Message: fmt.Sprintf(
			"machine %s: not a name gcp-mig gives (a pool's name, a dash and five letters or digits, or %s<project>/<zone>/<instance>), so gcp-mig cannot tell which instance it is and deletes nothing",
			name, instancePrefix)}
	}
	pool, spec, err := p.poolOf(ctx, name)
	if err != nil {
		return err
	}
	if spec == nil {
		return &provider.Error{Code: CodeUnknownPool, Message: fmt.Sprintf(
			"machine %s: there is no gcp-mig NodePool %s (deleted with machines left, or its provider changed), so gcp-mig cannot tell which instance group holds the instance and deletes nothing. "+
				"If instance %s still runs, delete it from its group yourself (gcloud compute instance-groups managed delete-instances GROUP --instances=%s --zone or --region), then delete the Node; "+
				"or put the NodePool back as it was, so sluice removes its machines before it goes",
			name, pool, name, name)}
	}
	g, mi, err := p.locate(ctx, spec, name)
	if provider.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if leaving(mi) {
		return nil
	}
	if err := p.deleteInstance(ctx, g, mi); err != nil {
		return err
	}
	p.opts.Log.Info("machine deleted", "machine", name, "pool", pool, "group", g.String())
	return nil
}

// Get returns the machine named name.
func (p *Provider) Get(ctx context.Context, name string) (*provider.Machine, error) {
	if strings.HasPrefix(name, instancePrefix) {
		return p.getGroupMade(ctx, name)
	}
	pool, spec, err := p.poolOf(ctx, name)
	if err != nil {
		return nil, err
	}
	if spec == nil {
		return nil, fmt.Errorf("machine %s: no gcp-mig pool %s: %w", name, pool, provider.ErrNotFound)
	}
	return p.find(ctx, pool, spec, name)
}

// List returns the pool's machines: the instances of its groups named as
// its machines are.
func (p *Provider) List(ctx context.Context, pool string) ([]*provider.Machine, error) {
	spec, err := p.specOf(ctx, pool)
	if err != nil || spec == nil {
		return nil, err
	}
	var out []*provider.Machine
	for _, g := range groupsOf(spec) {
		all, err := p.managedInstances(ctx, g)
		if err != nil {
			return nil, err
		}
		for _, mi := range all {
			if isMachineOf(mi.GetName(), pool) {
				m, err := p.machineOf(ctx, pool, g, mi)
				if err != nil {
					return nil, err
				}
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// find returns the pool's machine named name, or a NotFound error.
func (p *Provider) find(ctx context.Context, pool string, spec *v1alpha1.GCPProviderSpec, name string) (*provider.Machine, error) {
	g, mi, err := p.locate(ctx, spec, name)
	if err != nil {
		return nil, err
	}
	return p.machineOf(ctx, pool, g, mi)
}

// machineSuffix is the form of sluice's machine names (provider.NewName),
// after the pool's name.
var machineSuffix = regexp.MustCompile(`^-[a-z0-9]{5}$`)

// isMachineOf says whether name is a machine name provider.NewName gives
// the pool.
func isMachineOf(name, pool string) bool {
	return len(name) == len(pool)+6 && name[:len(pool)] == pool && machineSuffix.MatchString(name[len(pool):])
}

// isNewName says whether name is shaped as provider.NewName gives: a pool's
// name, a dash and five lowercase letters or digits. A group's own
// instances end in a dash and four.
func isNewName(name string) bool {
	return len(name) >= 7 && machineSuffix.MatchString(name[len(name)-6:])
}

// poolOf is the pool a machine name belongs to and its spec (nil when the
// pool is unknown or not gcp-mig's).
func (p *Provider) poolOf(ctx context.Context, name string) (string, *v1alpha1.GCPProviderSpec, error) {
	if !isNewName(name) {
		return "", nil, nil
	}
	pool := name[:len(name)-6]
	spec, err := p.specOf(ctx, pool)
	return pool, spec, err
}

// specOf is the pool's gcp-mig spec: as last handed to the provider, else
// from Options.Pools; nil when there is no such pool.
func (p *Provider) specOf(ctx context.Context, pool string) (*v1alpha1.GCPProviderSpec, error) {
	p.mu.Lock()
	spec := p.pools[pool]
	p.mu.Unlock()
	if spec != nil || p.opts.Pools == nil {
		return spec, nil
	}
	np, err := p.opts.Pools(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("reading NodePool %s: %w", pool, err)
	}
	if np == nil || np.Spec.Provider.Name != v1alpha1.ProviderGCPMIG || np.Spec.Provider.GCP == nil {
		return nil, nil
	}
	return p.remember(np)
}

// remember keeps the pool's spec for the calls given only a name, and
// returns it; a pool without one is refused.
func (p *Provider) remember(pool *v1alpha1.NodePool) (*v1alpha1.GCPProviderSpec, error) {
	spec := pool.Spec.Provider.GCP
	if spec == nil || spec.Project == "" || len(spec.InstanceGroups) == 0 {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: "provider.gcp needs a project and instanceGroups: name the pool's managed instance groups"}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pools[pool.Name] = spec.DeepCopy()
	return p.pools[pool.Name], nil
}

// lock holds the group for one change at a time; it returns the unlock.
// The holder waits on Compute Engine operations, which can take minutes,
// so a caller waiting for the group gives up when its ctx ends, with
// ctx's error (a sync.Mutex would keep it waiting).
func (p *Provider) lock(ctx context.Context, g ref) (func(), error) {
	p.mu.Lock()
	l, ok := p.locks[g.key()]
	if !ok {
		l = make(chan struct{}, 1)
		p.locks[g.key()] = l
	}
	p.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another change to group %s: %w", g, ctx.Err())
	}
}

func (p *Provider) isUnavailable(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.unavailable[key]
	return ok && p.clock.Now().Before(until)
}

func (p *Provider) markUnavailable(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unavailable[key] = p.clock.Now().Add(unavailableFor)
}

// sleep waits d on the provider's clock, or until ctx ends.
func (p *Provider) sleep(ctx context.Context, d time.Duration) error {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
