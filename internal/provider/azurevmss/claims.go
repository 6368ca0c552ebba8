package azurevmss

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
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

// ConfigMapClaims keeps claims in one ConfigMap, a key per machine. Writes
// are updates at the read resourceVersion, retried on conflict.
type ConfigMapClaims struct {
	client    kubernetes.Interface
	namespace string
	name      string
}

// ClaimsConfigMap is the ConfigMap's name, in the controller's namespace.
const ClaimsConfigMap = "sluice-azure-vmss-claims"

// NewConfigMapClaims keeps claims in namespace's ClaimsConfigMap.
func NewConfigMapClaims(client kubernetes.Interface, namespace string) *ConfigMapClaims {
	return &ConfigMapClaims{client: client, namespace: namespace, name: ClaimsConfigMap}
}

// Get returns the machine's claim, or nil.
func (s *ConfigMapClaims) Get(ctx context.Context, machine string) (*Claim, error) {
	cm, err := s.read(ctx)
	if err != nil || cm == nil {
		return nil, err
	}
	raw, ok := cm.Data[machine]
	if !ok {
		return nil, nil
	}
	return decode(machine, raw)
}

// List returns every claim, by machine name.
func (s *ConfigMapClaims) List(ctx context.Context) ([]*Claim, error) {
	cm, err := s.read(ctx)
	if err != nil || cm == nil {
		return nil, err
	}
	out := make([]*Claim, 0, len(cm.Data))
	for machine, raw := range cm.Data {
		c, err := decode(machine, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *Claim) int { return strings.Compare(a.Machine, b.Machine) })
	return out, nil
}

// Put writes the claim, creating the ConfigMap on first use.
func (s *ConfigMapClaims) Put(ctx context.Context, c *Claim) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.change(ctx, func(data map[string]string) { data[c.Machine] = string(raw) })
}

// Delete removes the machine's claim; none is no error.
func (s *ConfigMapClaims) Delete(ctx context.Context, machine string) error {
	return s.change(ctx, func(data map[string]string) { delete(data, machine) })
}

func (s *ConfigMapClaims) read(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the claims ConfigMap %s/%s: %w", s.namespace, s.name, err)
	}
	return cm, nil
}

func (s *ConfigMapClaims) change(ctx context.Context, edit func(map[string]string)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := s.read(ctx)
		if err != nil {
			return err
		}
		if cm == nil {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "sluice"}}}
			cm.Data = map[string]string{}
			edit(cm.Data)
			_, err = s.client.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), s.name, err)
			}
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		edit(cm.Data)
		_, err = s.client.CoreV1().ConfigMaps(s.namespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the claims ConfigMap %s/%s: %w", s.namespace, s.name, err)
	}
	return nil
}

func decode(machine, raw string) (*Claim, error) {
	var c Claim
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, fmt.Errorf("the claim of machine %s in ConfigMap %s is not valid: %w", machine, ClaimsConfigMap, err)
	}
	c.Machine = machine
	return &c, nil
}
