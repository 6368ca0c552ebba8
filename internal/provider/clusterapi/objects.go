package clusterapi

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// The fields of Cluster API's v1beta2 objects the provider reads, and
// nothing else: unknown fields are dropped when an object is read into one
// of these, and the provider never writes one back whole (it patches, or
// writes the scale subresource).

// Kinds of the objects whose replicas the provider changes.
const (
	KindMachineDeployment = "MachineDeployment"
	KindMachineSet        = "MachineSet"
)

// scalable is a MachineDeployment or a MachineSet.
type scalable struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ClusterName string `json:"clusterName"`
		Replicas    *int32 `json:"replicas,omitempty"`
	} `json:"spec"`
}

func (s *scalable) replicas() int32 {
	if s.Spec.Replicas == nil {
		return 0
	}
	return *s.Spec.Replicas
}

// cluster is a Cluster.
type cluster struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Paused *bool `json:"paused,omitempty"`
	} `json:"spec"`
}

// machine is a Machine.
type machine struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ProviderID    string `json:"providerID,omitempty"`
		FailureDomain string `json:"failureDomain,omitempty"`
	} `json:"spec"`
	Status struct {
		NodeRef *struct {
			Name string `json:"name"`
		} `json:"nodeRef,omitempty"`
		Phase         string `json:"phase,omitempty"`
		FailureDomain string `json:"failureDomain,omitempty"`
	} `json:"status"`
}

func (m *machine) deleting() bool { return m.DeletionTimestamp != nil }

// set is the name of the MachineSet that controls the Machine, "" for none.
func (m *machine) set() string { return controller(&m.ObjectMeta, KindMachineSet) }

// zone is the failure domain the Machine is in, or the one it asked for
// until Cluster API reports it.
func (m *machine) zone() string {
	if m.Status.FailureDomain != "" {
		return m.Status.FailureDomain
	}
	return m.Spec.FailureDomain
}

// controller is the name of the object's controller of the kind, in
// Cluster API's group.
func controller(o *metav1.ObjectMeta, kind string) string {
	for _, ref := range o.OwnerReferences {
		if ref.Kind == kind && ref.Controller != nil && *ref.Controller && strings.HasPrefix(ref.APIVersion, Group+"/") {
			return ref.Name
		}
	}
	return ""
}

// fromUnstructured reads an object into one of the types above.
func fromUnstructured[T any](u *unstructured.Unstructured) (*T, error) {
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return &out, nil
}

// target is the object whose replicas a pool's machines are: a
// MachineDeployment, or a standalone MachineSet.
type target struct {
	Namespace, Kind, Name string
}

func targetOf(s *v1alpha1.ClusterAPIProviderSpec) target {
	if s.MachineSet != "" {
		return target{s.Namespace, KindMachineSet, s.MachineSet}
	}
	return target{s.Namespace, KindMachineDeployment, s.MachineDeployment}
}

func (t target) resource() schema.GroupVersionResource {
	if t.Kind == KindMachineSet {
		return MachineSets
	}
	return MachineDeployments
}

func (t target) key() string { return t.Kind + "/" + t.Namespace + "/" + t.Name }

func (t target) String() string { return t.Kind + " " + t.Namespace + "/" + t.Name }

// owns says whether the Machine is one of the target's.
func (t target) owns(m *machine) bool {
	if m.Namespace != t.Namespace {
		return false
	}
	if t.Kind == KindMachineSet {
		return m.set() == t.Name
	}
	return m.Labels[LabelDeploymentName] == t.Name
}

// markPrefix begins the value of the delete-machine annotation sluice
// writes: "sluice:<N>", N the replicas it lowers from. Cluster API reads
// only the annotation's presence; the value lets sluice tell its own marks
// from a person's, and a mark whose decrement never happened (replicas
// still N, the Machine alive) from one Cluster API has yet to act on.
const markPrefix = "sluice:"

func mark(replicas int32) string { return markPrefix + strconv.FormatInt(int64(replicas), 10) }

// markOf reads the Machine's delete-machine annotation: whether it has one,
// and the replicas it was written at when sluice wrote it (ok false for a
// mark not sluice's).
func markOf(m *machine) (marked bool, from int32, ours bool) {
	v, marked := m.Annotations[AnnotationDeleteMachine]
	if !marked {
		return false, 0, false
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(v, markPrefix), 10, 32)
	if !strings.HasPrefix(v, markPrefix) || err != nil {
		return true, 0, false
	}
	return true, int32(n), true
}

// oldestFirst orders Machines by creation, then name.
func oldestFirst(ms []*machine) {
	slices.SortFunc(ms, func(a, b *machine) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// list reads every object of the resource in the namespace (matching the
// selector) into T.
func list[T any](ctx context.Context, p *Provider, res schema.GroupVersionResource, ns, selector string) ([]*T, error) {
	l, err := p.dyn.Resource(res).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make([]*T, 0, len(l.Items))
	for i := range l.Items {
		o, err := fromUnstructured[T](&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// get reads one object into T.
func get[T any](ctx context.Context, p *Provider, res schema.GroupVersionResource, ns, name string) (*T, error) {
	u, err := p.dyn.Resource(res).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured[T](u)
}
