package azurearm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Store keeps one JSON record of type T per machine in one ConfigMap, a
// key per machine name. A provider writes a record before it asks the
// cloud for a machine it cannot name itself, so the record must outlive a
// restart of the controller. Writes are updates at the read
// resourceVersion, retried on conflict, so two writers never lose each
// other's records. Safe for concurrent use.
type Store[T any] struct {
	client    kubernetes.Interface
	namespace string
	name      string
}

// NewStore keeps records in the ConfigMap namespace/name, made on first use.
func NewStore[T any](client kubernetes.Interface, namespace, name string) *Store[T] {
	return &Store[T]{client: client, namespace: namespace, name: name}
}

// Get returns the machine's record, or nil when it has none.
func (s *Store[T]) Get(ctx context.Context, machine string) (*T, error) {
	cm, err := s.read(ctx)
	if err != nil || cm == nil {
		return nil, err
	}
	raw, ok := cm.Data[machine]
	if !ok {
		return nil, nil
	}
	return s.decode(machine, raw)
}

// Record is one machine's record, as List returns it.
type Record[T any] struct {
	Machine string
	Value   *T
}

// List returns every record, by machine name.
func (s *Store[T]) List(ctx context.Context) ([]Record[T], error) {
	cm, err := s.read(ctx)
	if err != nil || cm == nil {
		return nil, err
	}
	out := make([]Record[T], 0, len(cm.Data))
	for machine, raw := range cm.Data {
		v, err := s.decode(machine, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, Record[T]{Machine: machine, Value: v})
	}
	slices.SortFunc(out, func(a, b Record[T]) int { return strings.Compare(a.Machine, b.Machine) })
	return out, nil
}

// Put writes the machine's record.
func (s *Store[T]) Put(ctx context.Context, machine string, v *T) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.change(ctx, func(data map[string]string) { data[machine] = string(raw) })
}

// Delete removes the machine's record; none is no error.
func (s *Store[T]) Delete(ctx context.Context, machine string) error {
	return s.change(ctx, func(data map[string]string) { delete(data, machine) })
}

func (s *Store[T]) read(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", s.namespace, s.name, err)
	}
	return cm, nil
}

func (s *Store[T]) change(ctx context.Context, edit func(map[string]string)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := s.read(ctx)
		if err != nil {
			return err
		}
		if cm == nil {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "sluice"}}, Data: map[string]string{}}
			edit(cm.Data)
			_, err = s.client.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// Another writer made it first: read it again and edit that.
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
		return fmt.Errorf("writing ConfigMap %s/%s: %w", s.namespace, s.name, err)
	}
	return nil
}

func (s *Store[T]) decode(machine, raw string) (*T, error) {
	var v T
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return nil, fmt.Errorf("the record of machine %s in ConfigMap %s/%s is not valid JSON: %w", machine, s.namespace, s.name, err)
	}
	return &v, nil
}
