package provider

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Provider makes and removes the machines of pools. Implementations are safe
// for concurrent use.
type Provider interface {
	// Create asks for a new machine for the pool's template; it returns once
	// the cloud accepted it (State Launching); the Node registers later. A
	// refusal is an *Error. name is the machine's (and its Node's) name,
	// chosen by the caller and recorded before it asks, so that asking again
	// after a crash is safe: a machine of that name already there is
	// returned as it is. "" lets the provider choose (NewName).
	Create(ctx context.Context, pool *v1alpha1.NodePool, name string) (*Machine, error)
	// Delete removes the machine (idempotent: an unknown machine is no
	// error).
	Delete(ctx context.Context, name string) error
	// Get returns the machine, or an error for which IsNotFound is true.
	Get(ctx context.Context, name string) (*Machine, error)
	// List returns the pool's machines.
	List(ctx context.Context, pool string) ([]*Machine, error)
}

// Namer is a provider whose Nodes are not named after their machines, and
// which can tell, from a Node it made (its providerID), the machine's name;
// NameOf returns "" for a Node it did not make.
type Namer interface {
	NameOf(node *corev1.Node) string
}

// RegistrationChecker is a provider that can read from the cloud whether
// the machines it launches for a pool will register with
// contract.TaintUnregistered (docs/design/registration.md).
type RegistrationChecker interface {
	// CheckRegistration says why the pool's new machines will join
	// without the taint, "" when they will join with it. An error for
	// which errors.Is(err, ErrCannotTell) says the cloud does not show it
	// (its message says why); other errors are the cloud's refusals.
	CheckRegistration(ctx context.Context, pool *v1alpha1.NodePool) (string, error)
}

// TemplateChecker is a provider whose cloud, not sluice, gives a new
// machine's kubelet its labels and taints (an AKS agent pool's nodeLabels
// and nodeTaints). sluice does not fight the cloud over them: it reports
// where they differ from the pool's template.
type TemplateChecker interface {
	// CheckTemplate says how the labels and taints the cloud gives the
	// pool's new machines differ from the pool's template (one line, for
	// a condition), "" when they agree.
	CheckTemplate(ctx context.Context, pool *v1alpha1.NodePool) (string, error)
}

// Rebooter is a provider that can restart one of its machines in place
// (the OS reboots; the machine, its disks and its Node stay): the first step
// of a repair and the step of a reboot the OS asked for
// (docs/design/health.md). A provider without it is replaced instead.
type Rebooter interface {
	// Reboot asks the cloud to restart the machine and returns once the
	// cloud accepted the request (the Node goes NotReady and comes back
	// later). An unknown machine is an error for which IsNotFound is
	// true; a refusal is an *Error.
	Reboot(ctx context.Context, name string) error
}

// ErrCannotTell is what CheckRegistration wraps when the cloud does not
// show how a machine's kubelet registers.
var ErrCannotTell = errors.New("the cloud does not show how its machines register")

// State is where a machine is in its life.
type State string

// Machine states.
const (
	// StateLaunching: the cloud accepted the machine; its Node has not
	// registered yet.
	StateLaunching State = "Launching"
	// StateRunning: the machine's Node registered (it may not be Ready yet).
	StateRunning State = "Running"
	// StateFailed: the machine will never register; Message says why. It
	// stays until it is deleted, as a failed VM does.
	StateFailed State = "Failed"
	// StateDeleting: the machine is being deleted.
	StateDeleting State = "Deleting"
)

// Machine is one machine a provider made.
type Machine struct {
	// Name is the machine's name, chosen by sluice; its Node's name is the
	// same unless the cloud names Nodes itself (then the Node is found by
	// ProviderID).
	Name       string
	Pool       string
	ProviderID string // as on the Node's spec.providerID, e.g. kwok://<name>
	// NodeName is the name the machine's Node registers with when the
	// provider decides it (kwok); empty when the machine's kubelet does.
	NodeName     string
	InstanceType string
	Capacity     v1alpha1.CapacityType
	Zone         string
	Image        string
	Created      time.Time
	State        State
	// Message says why the machine failed.
	Message string
}

// Error is a cloud's refusal of a request.
type Error struct {
	// Code is what went wrong, one of the Code constants.
	Code string
	// Message is the cloud's own explanation, for people.
	Message string
	// Retryable says whether trying again later may work.
	Retryable bool
	// RetryAfter is how long the cloud asked to be left alone (a throttled
	// API's Retry-After); zero when it did not say.
	RetryAfter time.Duration
}

// Error codes.
const (
	// CodeInsufficientCapacity: the cloud has no machines of the type (in
	// the zone) now; it may later.
	CodeInsufficientCapacity = "InsufficientCapacity"
	// CodeQuotaExceeded: the account's quota would be exceeded; only a
	// person raising the quota helps.
	CodeQuotaExceeded = "QuotaExceeded"
	// CodeInvalidTemplate: the template asks for something the cloud does
	// not have (an unknown instance type, say); only changing it helps.
	CodeInvalidTemplate = "InvalidTemplate"
	// CodeThrottled: the cloud's API kept refusing for the request rate
	// after the SDK's own retries; trying again later works.
	CodeThrottled = "Throttled"
)

// Error says the code and the cloud's message.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// AsError returns the cloud's refusal within err, if there is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// ErrNotFound is what Get wraps when the provider has no such machine.
var ErrNotFound = errors.New("machine not found")

// IsNotFound says whether err means the provider has no such machine.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// Set holds the providers a controller can use, by name.
type Set map[v1alpha1.ProviderName]Provider

// For returns the provider that makes the pool's machines, and false when
// the pool has none (no pool, provider none, or one the set lacks).
func (s Set) For(pool *v1alpha1.NodePool) (Provider, bool) {
	if pool == nil || !pool.Spec.Provider.Manages() {
		return nil, false
	}
	p, ok := s[pool.Spec.Provider.Name]
	return p, ok && p != nil
}

// NewName is a name for a new machine of the pool: the pool's name and five
// random lowercase letters and digits, as a Node name.
func NewName(pool string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [5]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return pool + "-" + string(b[:])
}

// IDKey is the form in which providerIDs are compared: an Azure
// providerID's case varies between the Node (cloud-provider-azure lowercases
// the resource group) and Azure's own answers, and Azure resource IDs are
// case-insensitive, so it is lowercased; others are compared as they are.
func IDKey(id string) string {
	if strings.HasPrefix(strings.ToLower(id), "azure://") {
		return strings.ToLower(id)
	}
	return id
}
