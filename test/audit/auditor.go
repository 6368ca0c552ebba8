package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Invariant names one promise the auditor checks.
type Invariant string

// The invariants, in the order the summary prints them
// (docs/design/fault-proof.md).
const (
	PDBFloor         Invariant = "pdb-floor"
	Budget           Invariant = "budget"
	PersonCordon     Invariant = "person-cordon"
	DoNotDisrupt     Invariant = "do-not-disrupt"
	MachineAfterPods Invariant = "machine-after-pods"
	OneReplacement   Invariant = "one-replacement"
	Undisturbed      Invariant = "undisturbed"
	// RepairBreaker: no repair starts while more of the pool (or of one
	// zone) is unhealthy than spec.repair's maxUnhealthy allows.
	RepairBreaker Invariant = "repair-breaker"
	// RebootHeld: no reboot starts outside the pool's reboot windows or on
	// a node a blocking pod runs on.
	RebootHeld Invariant = "reboot-held"
	// RebootUncordon: a node back from its reboot is not left cordoned by
	// the reboot.
	RebootUncordon Invariant = "reboot-uncordon"
)

var invariants = []Invariant{PDBFloor, Budget, PersonCordon, DoNotDisrupt, MachineAfterPods, OneReplacement, Undisturbed,
	RepairBreaker, RebootHeld, RebootUncordon}

// settle is how long a check that needs a second watch stream waits for it.
const settle = 4 * time.Second

// Auditor watches one cluster; see the package comment.
type Auditor struct {
	logf   func(string, ...any)
	clock  clock.PassiveClock
	cancel context.CancelFunc
	done   chan struct{}

	mu            sync.Mutex
	nodes         map[string]*nodeState
	pods          map[string]*podState // namespace/name
	pdbs          map[string]*policyv1.PodDisruptionBudget
	pools         map[string]*v1alpha1.NodePool
	forced        map[string]bool   // pods a DeadlineForced Event names
	undisturbed   map[string]string // node -> why it must not be touched
	mayUncordon   map[string]bool
	personCordon  map[string]string // node -> who cordoned it
	replacementOf map[string]string // replacement -> the node it replaces
	pending       []deferred
	rows          map[Invariant]*Row
	seen          map[string]int
}

type nodeState struct {
	node      *corev1.Node
	record    *record
	finalizer bool // carried sluice's termination finalizer at some point
	goneRV    int64
}

type podState struct {
	pod        *corev1.Pod
	boundRV    int64 // when the auditor first saw it on its node (0: before it started)
	deletingRV int64
	goneRV     int64
}

// record is the part of sluice's disruption record the auditor reads.
type record struct {
	Reason      string `json:"reason"`
	Phase       string `json:"phase"`
	Replacement string `json:"replacement"`
	// Since is when the controller chose the node: the moment its budget
	// is judged at.
	Since time.Time `json:"since"`
}

type deferred struct {
	due time.Time
	run func()
}

// Start watches the cluster cfg reaches until Finish, and returns once its
// caches hold the cluster as it is: what already happened is the baseline,
// only what happens next is judged. logf reports each breach as it is found.
func Start(ctx context.Context, cfg *rest.Config, logf func(string, ...any)) (*Auditor, error) {
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &Auditor{logf: logf, clock: clock.RealClock{}, cancel: cancel, done: make(chan struct{}),
		nodes: map[string]*nodeState{}, pods: map[string]*podState{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		pools: map[string]*v1alpha1.NodePool{}, forced: map[string]bool{}, undisturbed: map[string]string{},
		mayUncordon: map[string]bool{}, personCordon: map[string]string{}, replacementOf: map[string]string{},
		rows: map[Invariant]*Row{}, seen: map[string]int{}}
	for _, inv := range invariants {
		a.rows[inv] = &Row{Invariant: inv}
	}
	factory := informers.NewSharedInformerFactory(clientset, 0)
	dfactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{dfactory.ForResource(v1alpha1.NodePoolResource).Informer(), a.poolHandler()},
		{factory.Policy().V1().PodDisruptionBudgets().Informer(), a.pdbHandler()},
		{factory.Core().V1().Events().Informer(), a.eventHandler()},
		{factory.Core().V1().Nodes().Informer(), a.nodeHandler()},
		{factory.Core().V1().Pods().Informer(), a.podHandler()},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			cancel()
			return nil, err
		}
	}
	factory.Start(ctx.Done())
	dfactory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("auditor: watching %v did not sync", typ)
		}
	}
	for typ, ok := range dfactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("auditor: watching %v did not sync", typ)
		}
	}
	go a.runDeferred(ctx)
	return a, nil
}

// Undisturbed declares that nothing may cordon, delete or evict from node
// from now on, and why (e.g. its metadata carried only rejected entries).
func (a *Auditor) Undisturbed(node, why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.undisturbed[node] = why
}

// WillUncordon tells the auditor that the test itself, as the person who
// cordoned node, is about to uncordon it.
func (a *Auditor) WillUncordon(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mayUncordon[node] = true
}

// Finish lets the checks that wait for a second stream conclude, stops
// watching, and returns the tally.
func (a *Auditor) Finish() Summary {
	// What was just committed reaches the watches within moments; the
	// checks it starts conclude settle after that.
	time.Sleep(time.Second)
	for {
		a.mu.Lock()
		var last time.Time
		for _, d := range a.pending {
			if d.due.After(last) {
				last = d.due
			}
		}
		a.mu.Unlock()
		wait := last.Sub(a.clock.Now())
		if wait <= 0 {
			break
		}
		time.Sleep(wait + 300*time.Millisecond)
	}
	a.cancel()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range a.pending {
		d.run()
	}
	a.pending = nil
	// A person's cordon still in place, an undisturbed node still alone:
	// each is a promise kept to the end.
	for range a.personCordon {
		a.pass(PersonCordon)
	}
	for range a.undisturbed {
		if a.rows[Undisturbed].Violated == 0 {
			a.pass(Undisturbed)
		}
	}
	s := Summary{Seen: map[string]int{}}
	for _, inv := range invariants {
		s.Rows = append(s.Rows, *a.rows[inv])
	}
	for k, v := range a.seen {
		s.Seen[k] = v
	}
	return s
}

// runDeferred runs the checks whose second stream has had time to arrive.
func (a *Auditor) runDeferred(ctx context.Context) {
	defer close(a.done)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			a.mu.Lock()
			keep := a.pending[:0]
			var due []deferred
			for _, d := range a.pending {
				if now.Before(d.due) {
					keep = append(keep, d)
				} else {
					due = append(due, d)
				}
			}
			a.pending = keep
			for _, d := range due {
				d.run()
			}
			a.mu.Unlock()
		}
	}
}

// later runs check once the other streams have caught up; a.mu is held.
func (a *Auditor) later(check func()) {
	a.pending = append(a.pending, deferred{due: a.clock.Now().Add(settle), run: check})
}

func (a *Auditor) pass(inv Invariant) { a.rows[inv].Checked++ }

func (a *Auditor) violate(inv Invariant, format string, args ...any) {
	r := a.rows[inv]
	r.Checked++
	r.Violated++
	msg := fmt.Sprintf(format, args...)
	if len(r.Examples) < 5 {
		r.Examples = append(r.Examples, msg)
	}
	if a.logf != nil {
		a.logf("audit: %s violated: %s", inv, msg)
	}
}

func rv(obj metav1.Object) int64 {
	v, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	return v
}

func recordOf(n *corev1.Node) *record {
	raw, ok := n.Annotations[annotationRecord]
	if !ok {
		return nil
	}
	var r record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return &record{Reason: "unreadable"}
	}
	return &r
}

func hasFinalizer(n *corev1.Node) bool {
	for _, f := range n.Finalizers {
		if f == finalizerTermination {
			return true
		}
	}
	return false
}

// poolOf is the pool whose selector takes the node, nil when none does.
func (a *Auditor) poolOf(n *corev1.Node) *v1alpha1.NodePool {
	for _, p := range a.pools {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(n.Labels)) {
			return p
		}
	}
	return nil
}

func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (a *Auditor) poolHandler() cache.ResourceEventHandler {
	set := func(obj any) {
		u, ok := unwrap(obj).(*unstructured.Unstructured)
		if !ok {
			return
		}
		var p v1alpha1.NodePool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.pools[p.Name] = &p
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if u, ok := unwrap(obj).(*unstructured.Unstructured); ok {
				a.mu.Lock()
				defer a.mu.Unlock()
				delete(a.pools, u.GetName())
			}
		},
	}
}

func (a *Auditor) pdbHandler() cache.ResourceEventHandler {
	set := func(obj any) {
		if p, ok := unwrap(obj).(*policyv1.PodDisruptionBudget); ok {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.pdbs[p.Namespace+"/"+p.Name] = p
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if p, ok := unwrap(obj).(*policyv1.PodDisruptionBudget); ok {
				a.mu.Lock()
				defer a.mu.Unlock()
				delete(a.pdbs, p.Namespace+"/"+p.Name)
			}
		},
	}
}

func (a *Auditor) eventHandler() cache.ResourceEventHandler {
	set := func(obj any) {
		e, ok := unwrap(obj).(*corev1.Event)
		if !ok || e.Reason != reasonForced || e.InvolvedObject.Kind != "Pod" {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.forced[e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name] = true
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: set, UpdateFunc: func(_, obj any) { set(obj) }}
}
