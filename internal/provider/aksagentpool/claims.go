package aksagentpool

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/internal/provider/azurearm"
)

// A Claim is what the provider writes down about a machine before it
// raises an agent pool's count for it: AKS, not sluice, names the new
// machine, so the machine is "the one the pool's machine list did not hold
// before" and the record of that list must outlive a restart. AKS names
// machines after their scale set instance, whose IDs are never reused, so
// a machine name is never given to another machine of the pool.
type Claim struct {
	Machine       string `json:"machine"`
	Pool          string `json:"pool"`
	Subscription  string `json:"subscription"`
	ResourceGroup string `json:"resourceGroup"`
	Cluster       string `json:"cluster"`
	AgentPool     string `json:"agentPool"`
	// Before are the pool's machine names before the scale-out, cleared
	// once AKSMachine is known.
	Before []string `json:"before,omitempty"`
	// Count is the pool's count the scale-out asks for.
	Count int32 `json:"count,omitempty"`
	// AKSMachine is the machine's name in AKS, "" until the scale-out is
	// seen; ResourceID is its scale set VM.
	AKSMachine string    `json:"aksMachine,omitempty"`
	ResourceID string    `json:"resourceID,omitempty"`
	Created    time.Time `json:"created"`
}

// Claims keeps the provider's claims. Implementations are safe for
// concurrent use; Get returns nil for a machine with no claim.
type Claims interface {
	Get(ctx context.Context, machine string) (*Claim, error)
	Put(ctx context.Context, c *Claim) error
	Delete(ctx context.Context, machine string) error
	List(ctx context.Context) ([]*Claim, error)
}

// ClaimsConfigMap is the claims' ConfigMap, in the controller's namespace.
const ClaimsConfigMap = "sluice-aks-agentpool-claims"

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
