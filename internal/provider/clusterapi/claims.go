package clusterapi

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/internal/provider/azurearm"
)

// A Claim is what the provider writes down about a machine before it raises
// replicas for it: Cluster API, not sluice, names the new Machine, so the
// machine is "a Machine the target did not have before" and the record of
// what it had must outlive a restart.
type Claim struct {
	// Machine is sluice's name for the machine.
	Machine string `json:"machine"`
	Pool    string `json:"pool"`
	// Namespace and one of MachineDeployment and MachineSet are the target
	// whose replicas were raised.
	Namespace         string `json:"namespace"`
	MachineDeployment string `json:"machineDeployment,omitempty"`
	MachineSet        string `json:"machineSet,omitempty"`
	// Before are the target's Machines when the claim was written, cleared
	// once CAPIMachine is known.
	Before []string `json:"before,omitempty"`
	// Replicas is what the scale-up asks for: one more than the target had.
	Replicas int32 `json:"replicas,omitempty"`
	// CAPIMachine is the Machine's name, "" until it is known.
	CAPIMachine string    `json:"capiMachine,omitempty"`
	Created     time.Time `json:"created"`
}

func (c *Claim) target() target {
	if c.MachineSet != "" {
		return target{c.Namespace, KindMachineSet, c.MachineSet}
	}
	return target{c.Namespace, KindMachineDeployment, c.MachineDeployment}
}

func (c *Claim) settled() bool { return c.CAPIMachine != "" }

// Claims keeps the provider's claims. Implementations are safe for
// concurrent use; Get returns nil for a machine with no claim.
type Claims interface {
	Get(ctx context.Context, machine string) (*Claim, error)
	Put(ctx context.Context, c *Claim) error
	Delete(ctx context.Context, machine string) error
	List(ctx context.Context) ([]*Claim, error)
}

// ClaimsConfigMap is the claims' ConfigMap, in the controller's namespace.
const ClaimsConfigMap = "sluice-cluster-api-claims"

// ConfigMapClaims keeps claims in ClaimsConfigMap, a key per machine.
type ConfigMapClaims struct{ store *azurearm.Store[Claim] }

var _ Claims = (*ConfigMapClaims)(nil)

// NewConfigMapClaims keeps claims in namespace's ClaimsConfigMap.
func NewConfigMapClaims(client kubernetes.Interface, namespace string) *ConfigMapClaims {
	return &ConfigMapClaims{store: azurearm.NewStore[Claim](client, namespace, ClaimsConfigMap)}
}

// Get returns the machine's claim, or nil.
func (s *ConfigMapClaims) Get(ctx context.Context, machine string) (*Claim, error) {
	c, err := s.store.Get(ctx, machine)
	if c != nil {
		c.Machine = machine
	}
	return c, err
}

// Put writes the claim.
func (s *ConfigMapClaims) Put(ctx context.Context, c *Claim) error {
	return s.store.Put(ctx, c.Machine, c)
}

// Delete removes the machine's claim; none is no error.
func (s *ConfigMapClaims) Delete(ctx context.Context, machine string) error {
	return s.store.Delete(ctx, machine)
}

// List returns every claim, by machine name.
func (s *ConfigMapClaims) List(ctx context.Context) ([]*Claim, error) {
	all, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Claim, 0, len(all))
	for _, r := range all {
		r.Value.Machine = r.Machine
		out = append(out, r.Value)
	}
	return out, nil
}
