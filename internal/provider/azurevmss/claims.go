package azurevmss

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/internal/provider/azurearm"
)

// A Claim is what the provider writes down about a machine before it raises
// a scale set's capacity for it: Azure, not sluice, picks a Uniform scale
// set's new instance, so the machine is "the instance that was not there
// before" and the record of what was there must outlive a restart.
// Instances are told apart by vmId: Azure may give a gone instance's ID to
// a new one.
type Claim struct {
	Machine       string `json:"machine"`
	Pool          string `json:"pool"`
	Subscription  string `json:"subscription"`
	ResourceGroup string `json:"resourceGroup"`
	ScaleSet      string `json:"scaleSet"`
	// Before are the vmIds of the set's instances before the scale-out,
	// cleared once InstanceID is known.
	Before []string `json:"before,omitempty"`
	// Capacity is the set's capacity the scale-out asks for.
	Capacity int64 `json:"capacity,omitempty"`
	// InstanceID is the machine's instance, "" until the scale-out is
	// seen; VMID is its vmId, which no other VM ever has.
	InstanceID string `json:"instanceID,omitempty"`
	VMID       string `json:"vmID,omitempty"`
	// Flexible marks the record of a Flexible set's VM, named Machine: it
	// says where the VM is, nothing more (a VM is made by its name, so
	// there is no instance to guess at).
	Flexible bool      `json:"flexible,omitempty"`
	Created  time.Time `json:"created"`
}

// Claims keeps the provider's claims. Implementations are safe for
// concurrent use; Get returns nil for a machine with no claim.
type Claims interface {
	Get(ctx context.Context, machine string) (*Claim, error)
	Put(ctx context.Context, c *Claim) error
	Delete(ctx context.Context, machine string) error
	List(ctx context.Context) ([]*Claim, error)
}

// ClaimsConfigMap is the ConfigMap's name, in the controller's namespace.
const ClaimsConfigMap = "sluice-azure-vmss-claims"

// ConfigMapClaims keeps claims in ClaimsConfigMap, a key per machine name
// holding the claim as JSON (azurearm.Store's layout, which is the one this
// provider has always written, so claims written by earlier releases still
// read).
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
		c.Machine = machine // the key names the machine, whatever the JSON says
	}
	return c, err
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

// Put writes the claim, creating the ConfigMap on first use.
func (s *ConfigMapClaims) Put(ctx context.Context, c *Claim) error {
	return s.store.Put(ctx, c.Machine, c)
}

// Delete removes the machine's claim; none is no error.
func (s *ConfigMapClaims) Delete(ctx context.Context, machine string) error {
	return s.store.Delete(ctx, machine)
}
