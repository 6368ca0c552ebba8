package kwok

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Namer    = (*Provider)(nil)
)

// ProviderIDPrefix begins the provider ID of every machine the provider
// makes: kwok://<name>.
const ProviderIDPrefix = "kwok://"

// fieldManager owns what the provider writes on Nodes.
const fieldManager = "sluice-kwok-provider"

// Defaults of Options.
const (
	DefaultInstanceType      = "Standard_D4s_v5"
	DefaultRegistrationRetry = 2 * time.Second
)

// Options configure a Provider; the zero value takes the defaults.
type Options struct {
	// DefaultInstanceType is what a template that lists no instance types
	// gets; default Standard_D4s_v5.
	DefaultInstanceType string
	// Zones new machines are spread over, round-robin within each pool, when
	// the template's labels name no zone; default the instance type's
	// region's three zones (eastus-1..3, us-east-1a..c).
	Zones []string
	// RegistrationRetry is how long after the API server failed to create a
	// Node the provider tries again; default 2s.
	RegistrationRetry time.Duration
	// StartupTaintsLifted is how long after its Node registers the
	// template's startupTaints are taken off it, as the CNI or node agent
	// that owns them would once the node is ready for work; default 2s.
	StartupTaintsLifted time.Duration
	// Log is where registration failures go; default nowhere.
	Log *slog.Logger
	// NodeNames names a machine's Node; default the machine's own name.
	// Naming them as a cloud's kubelet does (ip-10-0-3-7…) makes the
	// controller find its replacements by providerID, as on AWS and Azure.
	NodeNames func(machine string) string
	// Registered makes Nodes as a controller leaves them once it has
	// registered them (provider.Apply: the pool's template given, the
	// unregistered taint lifted). It is for making a pool's existing nodes
	// before any controller runs (a sandbox, a test's or a benchmark's
	// starting fleet); the controller's own provider never sets it.
	Registered bool
	// RebootDowntime is how long a node rebooted in place is NotReady;
	// default DefaultRebootDowntime.
	RebootDowntime time.Duration
}

// DefaultStartupTaintsLifted is Options.StartupTaintsLifted's default.
const DefaultStartupTaintsLifted = 2 * time.Second

// Provider is the sandbox's simulated cloud. Build it with New.
type Provider struct {
	client kubernetes.Interface
	clock  clock.WithTicker
	opts   Options
	wake   chan struct{} // Create tells Run a registration is due

	mu       sync.Mutex
	machines map[string]*machine // machines without a Node: Launching or Failed
	zone     map[string]int      // per pool, the round-robin position of its next machine
}

// machine is a machine whose Node has not registered.
type machine struct {
	provider.Machine
	// due is when its Node registers; zero for never.
	due time.Time
	// node is the Node that registers, made from the template at Create.
	node *nodeSpec
}

// New returns a provider that creates Nodes through client and reads time
// from clk. Call Run for the Nodes to register.
func New(client kubernetes.Interface, clk clock.WithTicker, opts Options) *Provider {
	if opts.DefaultInstanceType == "" {
		opts.DefaultInstanceType = DefaultInstanceType
	}
	if opts.RegistrationRetry <= 0 {
		opts.RegistrationRetry = DefaultRegistrationRetry
	}
	if opts.StartupTaintsLifted <= 0 {
		opts.StartupTaintsLifted = DefaultStartupTaintsLifted
	}
	if opts.RebootDowntime <= 0 {
		opts.RebootDowntime = DefaultRebootDowntime
	}
	opts.Zones = slices.Clone(opts.Zones)
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Provider{
		client:   client,
		clock:    clk,
		opts:     opts,
		wake:     make(chan struct{}, 1),
		machines: map[string]*machine{},
		zone:     map[string]int{},
	}
}

// Run registers the Node of every machine whose boot delay has passed, as
// it passes, until ctx ends; then it returns nil. Machines created while Run
// is not running register once it runs. Run it once per Provider.
func (p *Provider) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		next := p.register(ctx)
		var (
			timer clock.Timer
			fire  <-chan time.Time
		)
		if !next.IsZero() {
			wait := next.Sub(p.clock.Now())
			if wait <= 0 {
				continue // the clock moved on while registering
			}
			timer = p.clock.NewTimer(wait)
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-p.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
	return nil
}

// Create accepts a machine for the pool, or refuses it with a
// *provider.Error: InvalidTemplate when the template names an instance type
// the catalogue does not know (or none it lists is sold as the template's
// capacity type), or the refusal the pool's kwok.failure asks for.
func (p *Provider) Create(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error) {
	if pool == nil || pool.Name == "" {
		return nil, errors.New("creating a machine: no pool named")
	}
	if name != "" {
		// Asked again for a machine it may have made already.
		if m, err := p.Get(ctx, name); err == nil {
			return m, nil
		} else if !provider.IsNotFound(err) {
			return nil, err
		}
	}
	template := pool.Spec.Template
	if template == nil {
		template = &v1alpha1.NodeTemplate{}
	}
	capacity := template.Capacity
	if capacity == "" {
		capacity = v1alpha1.CapacityOnDemand
	}
	typ, err := p.instanceType(template, capacity)
	if err != nil {
		return nil, err
	}
	if err := CheckImage(template.Image); err != nil {
		return nil, err
	}
	bootDelay, failure := v1alpha1.DefaultKwokBootDelay, v1alpha1.KwokFailureNone
	if k := pool.Spec.Provider.Kwok; k != nil {
		if k.BootDelay != nil {
			bootDelay = k.BootDelay.Duration
		}
		if k.Failure != "" {
			failure = k.Failure
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	zone := p.nextZone(pool.Name, template, typ)
	switch failure {
	case v1alpha1.KwokFailureInsufficientCapacity:
		return nil, insufficientCapacity(typ, capacity, zone)
	case v1alpha1.KwokFailureQuotaExceeded:
		return nil, quotaExceeded(typ, capacity)
	case v1alpha1.KwokFailureThrottled:
		return nil, throttled(typ)
	}
	if name == "" {
		name = p.newName(pool.Name)
	}
	now := p.clock.Now()
	m := &machine{
		Machine: provider.Machine{
			Name:         name,
			Pool:         pool.Name,
			ProviderID:   ProviderIDPrefix + name,
			NodeName:     p.nodeName(name),
			InstanceType: typ.Name,
			Capacity:     capacity,
			Zone:         zone,
			Image:        template.Image,
			Created:      now,
			State:        provider.StateLaunching,
		},
	}
	// The pool may be a shared cache's object, and change before the boot.
	m.node = &nodeSpec{machine: m.Machine, nodeName: p.nodeName(name), template: template.DeepCopy(), typ: typ}
	if p.opts.Registered {
		m.node.registered = pool.DeepCopy()
	}
	if failure != v1alpha1.KwokFailureNeverJoins {
		m.due = now.Add(bootDelay)
	}
	p.machines[name] = m
	select {
	case p.wake <- struct{}{}:
	default:
	}
	out := m.Machine
	return &out, nil
}

// Delete forgets a machine that has not registered, so its Node never does,
// and deletes the Node of one that has. A name the provider never made, or a
// Node it did not make, is no error and is left alone.
func (p *Provider) Delete(ctx context.Context, name string) error {
	p.mu.Lock()
	_, booting := p.machines[name]
	delete(p.machines, name)
	p.mu.Unlock()
	if booting {
		// Its Node does not exist, or register is creating it right now and
		// deletes it when it finds the machine gone.
		return nil
	}
	node, err := p.client.CoreV1().Nodes().Get(ctx, p.nodeName(name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the node of machine %s: %w", name, err)
	}
	if m, ours := machineOf(node); !ours || m.Name != name {
		return nil
	}
	return p.deleteNode(ctx, node.Name, &node.UID)
}

// Get returns the machine named name. A machine that registered is read from
// its Node: a live read, as a cloud's API call would be.
func (p *Provider) Get(ctx context.Context, name string) (*provider.Machine, error) {
	p.mu.Lock()
	m, booting := p.machines[name]
	var out provider.Machine
	if booting {
		out = m.Machine
	}
	p.mu.Unlock()
	if booting {
		return &out, nil
	}
	node, err := p.client.CoreV1().Nodes().Get(ctx, p.nodeName(name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("machine %s: %w", name, provider.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the node of machine %s: %w", name, err)
	}
	machine, ours := machineOf(node)
	if !ours || machine.Name != name {
		return nil, fmt.Errorf("machine %s (node %s was not made by the kwok provider for it): %w", name, node.Name, provider.ErrNotFound)
	}
	return machine, nil
}

// NameOf is the name of the machine a Node of this provider is, read from
// its providerID (kwok://<machine>); "" for any other Node.
func (p *Provider) NameOf(n *corev1.Node) string {
	if m, ours := machineOf(n); ours {
		return m.Name
	}
	return ""
}

// nodeName is the name of the machine's Node.
func (p *Provider) nodeName(machine string) string {
	if p.opts.NodeNames != nil {
		return p.opts.NodeNames(machine)
	}
	return machine
}

// List returns the pool's machines, by name.
func (p *Provider) List(ctx context.Context, pool string) ([]*provider.Machine, error) {
	// Machines first, Nodes second: register creates a machine's Node before
	// it forgets the machine, so a registering machine is in one or both.
	var out []*provider.Machine
	seen := map[string]bool{}
	p.mu.Lock()
	for _, m := range p.machines {
		if m.Pool == pool {
			c := m.Machine
			out = append(out, &c)
			seen[m.Name] = true
		}
	}
	p.mu.Unlock()
	selector := labels.Set{provider.LabelNodePool: pool}.AsSelector().String()
	nodes, err := p.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of pool %s: %w", pool, err)
	}
	for i := range nodes.Items {
		if m, ours := machineOf(&nodes.Items[i]); ours && !seen[m.Name] {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *provider.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// register creates the Nodes of the machines whose boot delay has passed,
// and returns when the next one is due (zero: none is).
func (p *Provider) register(ctx context.Context) time.Time {
	now := p.clock.Now()
	var due []*machine
	p.mu.Lock()
	for _, m := range p.machines {
		if m.State == provider.StateLaunching && !m.due.IsZero() && !m.due.After(now) {
			due = append(due, m)
		}
	}
	p.mu.Unlock()
	slices.SortFunc(due, func(a, b *machine) int { return a.due.Compare(b.due) })
	for _, m := range due {
		if ctx.Err() != nil {
			break
		}
		p.registerOne(ctx, m)
	}

	var next time.Time
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.machines {
		if m.State == provider.StateLaunching && !m.due.IsZero() && (next.IsZero() || m.due.Before(next)) {
			next = m.due
		}
	}
	return next
}

// registerOne creates the machine's Node, as its kubelet would on boot.
func (p *Provider) registerOne(ctx context.Context, m *machine) {
	err := p.createNode(ctx, m)

	p.mu.Lock()
	deleted := p.machines[m.Name] != m
	switch {
	case deleted:
	case err == nil:
		delete(p.machines, m.Name) // its Node is its record now
	case ctx.Err() != nil:
		// Run is ending; the next Run tries again.
	case apierrors.IsInvalid(err) || apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err):
		m.State = provider.StateFailed
		m.Message = fmt.Sprintf("registering node: %v", err)
	default:
		m.due = p.clock.Now().Add(p.opts.RegistrationRetry)
	}
	p.mu.Unlock()

	if t := m.node.template; !deleted && err == nil && t != nil && len(t.StartupTaints) > 0 {
		go p.liftStartupTaints(ctx, m.node.nodeName, t.StartupTaints)
	}
	switch {
	case deleted && err == nil:
		// Deleted while its Node was being created: take the Node away again.
		if err := p.deleteNode(ctx, m.node.nodeName, nil); err != nil {
			p.opts.Log.Error("deleting the node of a deleted machine", "node", m.node.nodeName, "machine", m.Name, "err", err)
		}
	case err != nil && !deleted && ctx.Err() == nil:
		p.opts.Log.Error("registering node", "node", m.node.nodeName, "machine", m.Name, "pool", m.Pool, "err", err)
	}
}

// liftStartupTaints takes the template's startupTaints off a registered
// Node after Options.StartupTaintsLifted, as their owner would.
func (p *Provider) liftStartupTaints(ctx context.Context, name string, startup []corev1.Taint) {
	select {
	case <-ctx.Done():
		return
	case <-p.clock.After(p.opts.StartupTaintsLifted):
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := p.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool {
			return slices.ContainsFunc(startup, func(s corev1.Taint) bool { return s.Key == t.Key && s.Effect == t.Effect })
		})
		if len(kept) == len(n.Spec.Taints) {
			return nil
		}
		n.Spec.Taints = kept
		_, err = p.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		p.opts.Log.Error("lifting startup taints", "node", name, "err", err)
	}
}

// createNode creates the machine's Node; a Node already there that is this
// machine's (an earlier attempt that timed out, say) counts as created.
func (p *Provider) createNode(ctx context.Context, m *machine) error {
	nodes := p.client.CoreV1().Nodes()
	_, err := nodes.Create(ctx, m.node.build(), metav1.CreateOptions{FieldManager: fieldManager})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing, getErr := nodes.Get(ctx, m.node.nodeName, metav1.GetOptions{})
	if getErr == nil && existing.Spec.ProviderID == m.ProviderID {
		return nil
	}
	return err
}

func (p *Provider) deleteNode(ctx context.Context, name string, uid *types.UID) error {
	opts := metav1.DeleteOptions{}
	if uid != nil {
		// Not a Node of the same name made since it was read.
		opts.Preconditions = &metav1.Preconditions{UID: uid}
	}
	err := p.client.CoreV1().Nodes().Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	return nil
}

var _ provider.RegistrationChecker = (*Provider)(nil)

// CheckRegistration says every Node the provider makes joins with the
// unregistered taint.
func (p *Provider) CheckRegistration(context.Context, *v1alpha1.NodePool) (string, error) {
	return "", nil
}
