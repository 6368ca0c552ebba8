package maintenance

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/pkg/drain"
)

// stranded remembers, per node, the pods a maintenance drain had to move and
// could not (a budget after the deadline's forced deletion still failed, a
// pod stuck terminating, an API error). Drains end by their deadline, so a
// drain is never what runs late: what is late is the pods it leaves. Once the
// deadline has passed they go with the machine, and
// sluice_maintenance_past_deadline_nodes counts the nodes that still hold
// any. Pods left on purpose (emptyDir data and pods without a controller,
// when the pool's forceEvict leaves them) are not counted.
type stranded struct {
	mu    sync.Mutex
	nodes map[string]strandedNode
}

type strandedNode struct {
	event    string
	deadline time.Time
	pods     []types.NamespacedName
}

// record keeps what a drain for event left on node, or forgets the node when
// it left nothing it had to move.
func (s *stranded) record(node, event string, deadline time.Time, left []drain.PodReport) {
	var pods []types.NamespacedName
	for _, p := range left {
		if p.Reason == drain.ReasonLocalStorage || p.Reason == drain.ReasonUnreplicated {
			continue
		}
		pods = append(pods, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(pods) == 0 {
		delete(s.nodes, node)
		return
	}
	if s.nodes == nil {
		s.nodes = map[string]strandedNode{}
	}
	s.nodes[node] = strandedNode{event: event, deadline: deadline, pods: pods}
}

// pastDeadline counts the nodes past their deadline that still hold a pod
// their drain left, reading the shared cache. A node that is gone, or whose
// record no longer says its drain for that event is blocked (the event
// ended, moved, or a new drain runs), is forgotten.
func (c *Controller) pastDeadline() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := &c.stranded
	s.mu.Lock()
	defer s.mu.Unlock()
	now, n := c.clock.Now(), 0
	for name, sn := range s.nodes {
		var node corev1.Node
		if err := c.kube.Get(ctx, types.NamespacedName{Name: name}, &node); err != nil {
			if apierrors.IsNotFound(err) {
				delete(s.nodes, name)
			}
			continue
		}
		if st, ok := stateOf(&node); !ok || st.Event != sn.event || st.Phase != PhaseBlocked {
			delete(s.nodes, name)
			continue
		}
		if now.Before(sn.deadline) {
			continue
		}
		for _, key := range sn.pods {
			var pod corev1.Pod
			if err := c.kube.Get(ctx, key, &pod); err == nil && pod.Spec.NodeName == name {
				n++
				break
			}
		}
	}
	return float64(n)
}
