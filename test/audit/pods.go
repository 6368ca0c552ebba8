package audit

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

func (a *Auditor) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			ps := &podState{pod: p}
			if !initial && p.Spec.NodeName != "" {
				ps.boundRV = rv(p)
			}
			if p.DeletionTimestamp != nil {
				ps.deletingRV = rv(p)
			}
			a.pods[p.Namespace+"/"+p.Name] = ps
		},
		UpdateFunc: func(oldObj, obj any) {
			old, ok1 := oldObj.(*corev1.Pod)
			p, ok2 := obj.(*corev1.Pod)
			if !ok1 || !ok2 {
				return
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			key := p.Namespace + "/" + p.Name
			ps := a.pods[key]
			if ps == nil {
				ps = &podState{}
				a.pods[key] = ps
			}
			if ps.boundRV == 0 && old.Spec.NodeName == "" && p.Spec.NodeName != "" {
				ps.boundRV = rv(p)
			}
			if p.DeletionTimestamp != nil && old.DeletionTimestamp == nil {
				a.deletionStarted(old, ps, rv(p))
			}
			ps.pod = p
		},
		DeleteFunc: func(obj any) {
			p, ok := unwrap(obj).(*corev1.Pod)
			if !ok {
				return
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			key := p.Namespace + "/" + p.Name
			ps := a.pods[key]
			if ps == nil {
				ps = &podState{pod: p}
				a.pods[key] = ps
			}
			if ps.deletingRV == 0 {
				// Deleted at once (grace period 0): no update came first.
				a.deletionStarted(ps.pod, ps, rv(p))
			}
			ps.goneRV = rv(p)
			if ps.goneRV == 0 {
				ps.goneRV = -1 // the auditor missed the deletion's revision
			}
		},
	}
}

// deletionStarted judges a pod starting to terminate; before is its last
// state, still Ready if it was.
func (a *Auditor) deletionStarted(before *corev1.Pod, ps *podState, at int64) {
	ps.deletingRV = at
	a.seen["pods deleted or evicted"]++
	node := a.nodes[before.Spec.NodeName]
	if why, ok := a.undisturbed[before.Spec.NodeName]; ok {
		a.violate(Undisturbed, "pod %s/%s on node %s (%s) was deleted", before.Namespace, before.Name, before.Spec.NodeName, why)
	}
	if node == nil || node.goneRV != 0 {
		return // its node is gone: machine-after-pods judges that
	}
	if node.record != nil && voluntary(node.record.Reason) && !exempt(before) {
		if why := protected(before.Annotations, before.CreationTimestamp.Time, a.clock.Now()); why != "" {
			a.violate(DoNotDisrupt, "pod %s/%s carrying %s was evicted from node %s, marked %s", before.Namespace, before.Name, why, node.node.Name, node.record.Reason)
		} else {
			a.pass(DoNotDisrupt)
		}
	}
	if ready(before) {
		a.checkFloor(before)
	}
}

// checkFloor: with the pod gone from the healthy set, every PDB that covers
// it keeps its floor, or sluice said it forced the pod out at a deadline.
func (a *Auditor) checkFloor(p *corev1.Pod) {
	for _, pdb := range a.pdbs {
		if pdb.Namespace != p.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		floor, ok := pdbFloor(pdb)
		if !ok {
			continue
		}
		healthy := 0
		for _, other := range a.pods {
			q := other.pod
			if q.Namespace == p.Namespace && other.deletingRV == 0 && other.goneRV == 0 && ready(q) && sel.Matches(labels.Set(q.Labels)) {
				healthy++
			}
		}
		if healthy >= floor {
			a.pass(PDBFloor)
			continue
		}
		key, name := p.Namespace+"/"+p.Name, pdb.Name
		a.later(func() {
			if a.forced[key] {
				a.seen["deadline escalations reported"]++
				a.pass(PDBFloor)
				return
			}
			a.violate(PDBFloor, "evicting %s left PDB %s with %d healthy pods; its floor is %d, and no %s Event reports an escalation", key, name, healthy, floor, reasonForced)
		})
	}
}
