package maintenance

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	s.keep(node, strandedNode{event: event, deadline: deadline, pods: pods})
}

func (s *stranded) keep(node string, sn strandedNode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(sn.pods) == 0 {
		delete(s.nodes, node)
		return
	}
	if s.nodes == nil {
		s.nodes = map[string]strandedNode{}
	}
	s.nodes[node] = sn
}

func (s *stranded) has(node, event string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.nodes[node]
	return ok && sn.event == event
}

// forget drops node's entry if it is still the one for event.
func (s *stranded) forget(node, event string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodes[node].event == event {
		delete(s.nodes, node)
	}
}

// recoverStranded rebuilds the entry of a node whose drain ended blocked past
// its deadline when the drain's own report is gone (this controller started
// after it, as a new leader): the pods still on the node that a drain moves,
// read once from the API server, stand in for what the drain left.
func (c *Controller) recoverStranded(ctx context.Context, node *corev1.Node, st state, force bool) error {
	if st.Deadline == nil || c.stranded.has(node.Name, st.Event) {
		return nil
	}
	var pods corev1.PodList
	if err := c.live.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
		return err
	}
	// The drain engine's own verdicts, with the options the drain ran with:
	// pods it skips (DaemonSet, mirror, finished) or refuses by policy
	// (emptyDir data, no controller, when not forced) were never its to move.
	opts := drain.Options{IgnoreDaemonSets: true, DeleteEmptyDirData: force, Force: force}
	sn := strandedNode{event: st.Event, deadline: *st.Deadline}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch drain.Classify(p, opts, c.clock.Now(), func(string, string) bool { return true }).Verdict {
		case drain.VerdictSkip, drain.VerdictRefuse:
		default:
			sn.pods = append(sn.pods, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	c.stranded.keep(node.Name, sn)
	return nil
}

// pastDeadline counts the nodes past their deadline that still hold a pod
// their drain left, reading the shared cache. A node that is gone, or whose
// record is gone or names another event, is forgotten; a node drained again
// (its record no longer Blocked) is kept but not counted until that drain
// has ended.
func (c *Controller) pastDeadline() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.stranded.mu.Lock()
	nodes := make(map[string]strandedNode, len(c.stranded.nodes))
	for name, sn := range c.stranded.nodes {
		nodes[name] = sn
	}
	c.stranded.mu.Unlock()
	now, n := c.clock.Now(), 0
	for name, sn := range nodes {
		var node corev1.Node
		if err := c.kube.Get(ctx, types.NamespacedName{Name: name}, &node); err != nil {
			if apierrors.IsNotFound(err) {
				c.stranded.forget(name, sn.event)
			}
			continue
		}
		st, ok := stateOf(&node)
		if !ok || st.Event != sn.event {
			c.stranded.forget(name, sn.event)
			continue
		}
		if st.Phase != PhaseBlocked || now.Before(sn.deadline) {
			continue
		}
		for _, key := range sn.pods {
			var pod corev1.Pod
			if err := c.kube.Get(ctx, key, &pod); err == nil && pod.Spec.NodeName == name && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				n++
				break
			}
		}
	}
	return float64(n)
}
