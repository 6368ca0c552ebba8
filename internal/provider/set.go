package provider

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// NotEnabled is the error for a pool whose provider this controller does not
// run.
func NotEnabled(name v1alpha1.ProviderName) error {
	return &Error{Code: "ProviderNotEnabled", Message: fmt.Sprintf("this controller does not run provider %s: start it with --providers %s", name, name)}
}

// Machines runs the providers a controller was started with, for the pools
// that name them, and measures every call.
type Machines struct {
	set   Set
	clock clock.PassiveClock
}

// NewMachines serves the pools whose provider is in set.
func NewMachines(set Set, clk clock.PassiveClock) *Machines {
	return &Machines{set: set, clock: clk}
}

// Serves says whether the named provider runs here.
func (m *Machines) Serves(name v1alpha1.ProviderName) bool { return m.set[name] != nil }

// CreateMachine asks the pool's provider for a new machine named name
// (idempotent: see Provider.Create).
func (m *Machines) CreateMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) (*Machine, error) {
	p, ok := m.set.For(pool)
	if !ok {
		return nil, NotEnabled(pool.Spec.Provider.Name)
	}
	start := m.clock.Now()
	machine, err := p.Create(ctx, pool, name)
	observe(pool.Spec.Provider.Name, "create", m.clock.Since(start), err)
	return machine, err
}

// GetMachine reads one of the pool's machines.
func (m *Machines) GetMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) (*Machine, error) {
	p, ok := m.set.For(pool)
	if !ok {
		return nil, NotEnabled(pool.Spec.Provider.Name)
	}
	return p.Get(ctx, name)
}

// ListMachines lists the machines the pool's provider made for it (its own
// tag or claim only: never a machine the group or scale set made itself).
func (m *Machines) ListMachines(ctx context.Context, pool *v1alpha1.NodePool) ([]*Machine, error) {
	p, ok := m.set.For(pool)
	if !ok {
		return nil, NotEnabled(pool.Spec.Provider.Name)
	}
	return p.List(ctx, pool.Name)
}

// DeleteMachine deletes one of the pool's machines; an unknown one is no
// error.
func (m *Machines) DeleteMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) error {
	p, ok := m.set.For(pool)
	if !ok {
		return NotEnabled(pool.Spec.Provider.Name)
	}
	start := m.clock.Now()
	err := p.Delete(ctx, name)
	observe(pool.Spec.Provider.Name, "delete", m.clock.Since(start), err)
	return err
}

// CanReboot says whether the pool's provider restarts machines in place
// (Rebooter): a repair's first step, and a reboot the OS asked for.
func (m *Machines) CanReboot(pool *v1alpha1.NodePool) bool {
	p, ok := m.set.For(pool)
	if !ok {
		return false
	}
	_, ok = p.(Rebooter)
	return ok
}

// RebootMachine asks the pool's provider to restart one of its machines in
// place; a provider that cannot answers an error saying so (CanReboot).
func (m *Machines) RebootMachine(ctx context.Context, pool *v1alpha1.NodePool, name string) error {
	p, ok := m.set.For(pool)
	if !ok {
		return NotEnabled(pool.Spec.Provider.Name)
	}
	r, ok := p.(Rebooter)
	if !ok {
		return fmt.Errorf("provider %s cannot reboot a machine in place", pool.Spec.Provider.Name)
	}
	start := m.clock.Now()
	err := r.Reboot(ctx, name)
	observe(pool.Spec.Provider.Name, "reboot", m.clock.Since(start), err)
	return err
}

// CheckRegistration asks the pool's provider whether its new machines will
// join with the unregistered taint (RegistrationChecker); a provider that
// cannot tell answers ErrCannotTell.
func (m *Machines) CheckRegistration(ctx context.Context, pool *v1alpha1.NodePool) (string, error) {
	p, ok := m.set.For(pool)
	if !ok {
		return "", NotEnabled(pool.Spec.Provider.Name)
	}
	c, ok := p.(RegistrationChecker)
	if !ok {
		return "", fmt.Errorf("provider %s: %w", pool.Spec.Provider.Name, ErrCannotTell)
	}
	return c.CheckRegistration(ctx, pool)
}

// CheckTemplate asks the pool's provider how the labels and taints its
// cloud gives new machines differ from the pool's template
// (TemplateChecker); "" when they agree or the provider leaves them to
// sluice.
func (m *Machines) CheckTemplate(ctx context.Context, pool *v1alpha1.NodePool) (string, error) {
	p, ok := m.set.For(pool)
	if !ok {
		return "", NotEnabled(pool.Spec.Provider.Name)
	}
	if c, ok := p.(TemplateChecker); ok {
		return c.CheckTemplate(ctx, pool)
	}
	return "", nil
}

// MachineName is the name of the machine a Node is, as far as the Node
// itself says: the controller's contract.AnnotationMachine when it wrote one
// (the cloud named the Node), else the Node's own name (the kwok provider
// names Nodes after their machines).
func MachineName(n *corev1.Node) string {
	if name := n.Annotations[contract.AnnotationMachine]; name != "" {
		return name
	}
	return n.Name
}

// MachineOf is the name of the machine the pool's Node is: what the
// controller noted on it, else what the pool's provider reads from it (a
// Namer), else the Node's own name.
func (m *Machines) MachineOf(pool *v1alpha1.NodePool, n *corev1.Node) string {
	if _, noted := n.Annotations[contract.AnnotationMachine]; !noted {
		if p, ok := m.set.For(pool); ok {
			if namer, ok := p.(Namer); ok {
				if name := namer.NameOf(n); name != "" {
					return name
				}
			}
		}
	}
	return MachineName(n)
}

// NamesOf lists every name the Node is known by as a machine, for an index
// from machine names to Nodes: its own, the one noted on it, and the one
// any provider reads from it.
func (m *Machines) NamesOf(n *corev1.Node) []string {
	names := []string{n.Name}
	if name := MachineName(n); name != n.Name {
		names = append(names, name)
	}
	for _, p := range m.set {
		if namer, ok := p.(Namer); ok {
			if name := namer.NameOf(n); name != "" && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

// Metrics of every provider call, by provider, operation and outcome.
var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_provider_requests_total",
		Help: "Calls to a machine provider, by provider, operation (create, delete) and code (OK or the provider's error code)."}, []string{"provider", "op", "code"})
	latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_provider_request_seconds",
		Help: "How long a machine provider took to answer, by provider and operation.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}, []string{"provider", "op"})
)

// Register adds the providers' metrics to reg.
func Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{requests, latency} {
		if err := reg.Register(c); err != nil {
			if _, dup := err.(prometheus.AlreadyRegisteredError); !dup { //nolint:errorlint // prometheus returns the value type
				return err
			}
		}
	}
	return nil
}

func observe(name v1alpha1.ProviderName, op string, took time.Duration, err error) {
	code := "OK"
	if err != nil {
		code = "Error"
		if pe, ok := AsError(err); ok {
			code = pe.Code
		}
	}
	requests.WithLabelValues(string(name), op, code).Inc()
	latency.WithLabelValues(string(name), op).Observe(took.Seconds())
}
