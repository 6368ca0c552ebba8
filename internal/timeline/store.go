package timeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/contract"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// The ConfigMap a node's last drain is kept in: one per node, in the
// controller's namespace, replaced by the node's next drain.
const (
	// DataKey holds the Timeline as JSON.
	DataKey = "timeline.json"

	namePrefix = "sluice-timeline-"
	// maxBytes keeps a timeline well inside a ConfigMap's 1 MiB.
	maxBytes = 900 << 10
	// pruneEvery is how often the leader deletes timelines past retention.
	pruneEvery   = time.Hour
	fieldManager = "sluice"
)

// ErrNotFound says no drain of the node is kept.
var ErrNotFound = errors.New("no drain timeline kept")

// Store keeps the last drain of each node as a ConfigMap, for
// `sluice explain node NODE --timeline`.
type Store struct {
	client    kubernetes.Interface
	namespace string
	retention time.Duration
	clock     clock.WithTicker
	log       *slog.Logger
}

// NewStore returns a store writing to namespace and keeping each timeline for
// retention after its drain ended.
func NewStore(client kubernetes.Interface, namespace string, retention time.Duration, clk clock.WithTicker, log *slog.Logger) *Store {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{client: client, namespace: namespace, retention: retention, clock: clk, log: log}
}

// ConfigMapName is the name of the ConfigMap that keeps node's timeline. A
// name too long for a ConfigMap is cut and made unique by a hash of the node.
func ConfigMapName(node string) string {
	name := namePrefix + node
	const maxName = 253
	if len(name) <= maxName {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	suffix := "-" + hex.EncodeToString(sum[:8])
	return strings.TrimRight(name[:maxName-len(suffix)], ".-") + suffix
}

// Save replaces node's kept timeline with tl, in one server-side apply.
func (s *Store) Save(ctx context.Context, node, reason string, tl Timeline) error {
	data, err := encodeBounded(tl)
	if err != nil {
		return fmt.Errorf("keeping the drain timeline of %s: %w", node, err)
	}
	cm := corev1ac.ConfigMap(ConfigMapName(node), s.namespace).
		WithLabels(map[string]string{contract.LabelTimeline: "true", "app.kubernetes.io/managed-by": "sluice"}).
		WithAnnotations(map[string]string{contract.AnnotationTimelineNode: node, contract.AnnotationTimelineReason: reason, contract.AnnotationTimelineEnded: s.clock.Now().UTC().Format(time.RFC3339)}).
		WithData(map[string]string{DataKey: string(data)})
	if _, err := s.client.CoreV1().ConfigMaps(s.namespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("keeping the drain timeline of %s in ConfigMap %s/%s: %w", node, s.namespace, ConfigMapName(node), err)
	}
	return nil
}

// encodeBounded encodes tl, without its messages if it would not fit.
func encodeBounded(tl Timeline) ([]byte, error) {
	data, err := json.Marshal(tl)
	if err != nil || len(data) <= maxBytes {
		return data, err
	}
	tl.Lanes = slices.Clone(tl.Lanes) // the caller's stay as they are
	for i := range tl.Lanes {
		tl.Lanes[i].Message = ""
		pods := make([]Bar, len(tl.Lanes[i].Pods))
		for j, b := range tl.Lanes[i].Pods {
			b.Message = ""
			pods[j] = b
		}
		tl.Lanes[i].Pods = pods
	}
	if data, err = json.Marshal(tl); err != nil || len(data) <= maxBytes {
		return data, err
	}
	return nil, fmt.Errorf("the timeline takes %d KiB even without its messages; a ConfigMap holds 1 MiB", len(data)>>10)
}

// Kept is a timeline read back, with what its ConfigMap says of it.
type Kept struct {
	Timeline Timeline
	Node     string
	Reason   string
	Ended    time.Time
}

// Load reads node's kept timeline from namespace; ErrNotFound when there is
// none.
func Load(ctx context.Context, client kubernetes.Interface, namespace, node string) (*Kept, error) {
	name := ConfigMapName(node)
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w for node %s: no ConfigMap %s/%s", ErrNotFound, node, namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, name, err)
	}
	if cm.Labels[contract.LabelTimeline] != "true" || cm.Annotations[contract.AnnotationTimelineNode] != node {
		return nil, fmt.Errorf("ConfigMap %s/%s is not sluice's timeline of node %s (label %s, annotation %s=%q)",
			namespace, name, node, contract.LabelTimeline, contract.AnnotationTimelineNode, cm.Annotations[contract.AnnotationTimelineNode])
	}
	k := &Kept{Node: node, Reason: cm.Annotations[contract.AnnotationTimelineReason]}
	if err := json.Unmarshal([]byte(cm.Data[DataKey]), &k.Timeline); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: reading %s: %w", namespace, name, DataKey, err)
	}
	k.Ended, _ = time.Parse(time.RFC3339, cm.Annotations[contract.AnnotationTimelineEnded]) // zero when unreadable: only shown
	return k, nil
}

// Prune deletes the timelines whose drain ended more than the retention ago
// (or whose end cannot be read), and returns how many it deleted.
func (s *Store) Prune(ctx context.Context) (int, error) {
	list, err := s.client.CoreV1().ConfigMaps(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelTimeline + "=true"})
	if err != nil {
		return 0, fmt.Errorf("listing the kept drain timelines in %s: %w", s.namespace, err)
	}
	cutoff := s.clock.Now().Add(-s.retention)
	deleted := 0
	for _, cm := range list.Items {
		ended, err := time.Parse(time.RFC3339, cm.Annotations[contract.AnnotationTimelineEnded])
		if err == nil && ended.After(cutoff) {
			continue
		}
		err = s.client.CoreV1().ConfigMaps(s.namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &cm.ResourceVersion}}) // not one a drain just replaced
		switch {
		case err == nil:
			deleted++
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			return deleted, fmt.Errorf("deleting the drain timeline %s/%s: %w", s.namespace, cm.Name, err)
		}
	}
	return deleted, nil
}

// Start prunes once an hour until ctx ends. It is a controller-runtime
// Runnable that runs on the leader.
func (s *Store) Start(ctx context.Context) error {
	t := s.clock.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		if n, err := s.Prune(ctx); err != nil {
			s.log.Warn("pruning drain timelines", "err", err)
		} else if n > 0 {
			s.log.Info("pruned drain timelines", "deleted", n, "retention", s.retention)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// NeedLeaderElection says only the leader prunes.
func (s *Store) NeedLeaderElection() bool { return true }
