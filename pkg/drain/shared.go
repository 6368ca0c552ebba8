package drain

import (
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
)

// Shared is what many drains run by one process hold in common: one watch of
// PodDisruptionBudgets feeding one ledger, one watch of pods indexed by node,
// and one limit on evictions in flight. A controller draining many nodes for
// many reasons gives every Drainer the same Shared (Options.Shared), so two of
// its drains never both spend the same disruption, and the API server sees two
// watches however many nodes drain, instead of two per drain.
//
// Without a Shared, each Drain call watches for itself, which suits a command
// a person runs once.
type Shared struct {
	ledger    *ledger
	inFlight  chan struct{}
	pdbs      policylisters.PodDisruptionBudgetLister
	pods      cache.Indexer
	nodeIndex string

	mu     sync.Mutex
	byNode map[string]map[*nodeDrain]struct{} // drains to tell of pod deletions
}

// NewShared builds a Shared on informers its caller runs: pdbs watches every
// PodDisruptionBudget; pods watches the pods of the nodes to drain and carries
// an index named nodeIndex from spec.nodeName to pods (and the namespace index
// client-go informers carry by default). maxInFlight bounds the evictions
// outstanding at once across every drain (0: 50).
func NewShared(pdbs, pods cache.SharedIndexInformer, nodeIndex string, maxInFlight int) (*Shared, error) {
	if maxInFlight == 0 {
		maxInFlight = 50
	}
	if maxInFlight < 0 {
		return nil, fmt.Errorf("max in flight %d: must be at least 1", maxInFlight)
	}
	if _, ok := pods.GetIndexer().GetIndexers()[nodeIndex]; !ok {
		return nil, fmt.Errorf("the pod informer has no index %q from spec.nodeName", nodeIndex)
	}
	s := &Shared{
		ledger:    newLedger(),
		inFlight:  make(chan struct{}, maxInFlight),
		pdbs:      policylisters.NewPodDisruptionBudgetLister(pdbs.GetIndexer()),
		pods:      pods.GetIndexer(),
		nodeIndex: nodeIndex,
		byNode:    map[string]map[*nodeDrain]struct{}{},
	}
	observe := func(obj any) {
		if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			s.ledger.observe(pdb)
		}
	}
	forget := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			s.ledger.forget(pdb.UID)
		}
	}
	if _, err := pdbs.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, obj any) { observe(obj) }, DeleteFunc: forget}); err != nil {
		return nil, fmt.Errorf("watching PodDisruptionBudgets: %w", err)
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: s.podDeleted}); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	return s, nil
}

// PodNodeIndexFunc indexes pods by spec.nodeName, for the pod informer given
// to NewShared.
func PodNodeIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

func (s *Shared) podDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s.mu.Lock()
	drains := make([]*nodeDrain, 0, len(s.byNode[pod.Spec.NodeName]))
	for nd := range s.byNode[pod.Spec.NodeName] {
		drains = append(drains, nd)
	}
	s.mu.Unlock()
	for _, nd := range drains {
		nd.podDeleted(pod)
	}
}

// follow tells nd of deletions of its node's pods until the returned function
// is called.
func (s *Shared) follow(nd *nodeDrain) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byNode[nd.name] == nil {
		s.byNode[nd.name] = map[*nodeDrain]struct{}{}
	}
	s.byNode[nd.name][nd] = struct{}{}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.byNode[nd.name], nd)
		if len(s.byNode[nd.name]) == 0 {
			delete(s.byNode, nd.name)
		}
	}
}

// podSource is a node's pods as watched.
type podSource interface {
	// list returns the node's pods the selector picks.
	list(sel labels.Selector) ([]*corev1.Pod, error)
	// get returns the pod of that name, on any node.
	get(namespace, name string) (*corev1.Pod, error)
}

// PodsOn returns the pods bound to node, from the shared pod informer. They
// are the cache's own objects: read them, never change them.
func (s *Shared) PodsOn(node string) ([]*corev1.Pod, error) {
	return sharedPods{s: s, node: node}.list(labels.Everything())
}

// sharedPods reads one node's pods from the shared pod informer.
type sharedPods struct {
	s    *Shared
	node string
}

func (p sharedPods) list(sel labels.Selector) ([]*corev1.Pod, error) {
	objs, err := p.s.pods.ByIndex(p.s.nodeIndex, p.node)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok && sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, pod)
		}
	}
	return out, nil
}

func (p sharedPods) get(namespace, name string) (*corev1.Pod, error) {
	obj, ok, err := p.s.pods.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	pod, isPod := obj.(*corev1.Pod)
	if !ok || !isPod {
		return nil, errNoPod
	}
	return pod, nil
}

var errNoPod = errors.New("no such pod")

// podsSelected returns the pods of a namespace the selector picks, from the
// shared pod informer.
func (s *Shared) podsSelected(namespace string, sel labels.Selector) ([]corev1.Pod, error) {
	objs, err := s.pods.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok && sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, *pod)
		}
	}
	return out, nil
}

// listerPods reads one node's pods from a watch of that node alone.
type listerPods struct{ lister corelisters.PodLister }

func (p listerPods) list(sel labels.Selector) ([]*corev1.Pod, error) { return p.lister.List(sel) }

func (p listerPods) get(namespace, name string) (*corev1.Pod, error) {
	return p.lister.Pods(namespace).Get(name)
}
