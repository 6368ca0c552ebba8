package audit

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func (a *Auditor) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			n, ok := obj.(*corev1.Node)
			if !ok {
				return
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			st := &nodeState{node: n, record: recordOf(n), finalizer: hasFinalizer(n)}
			a.nodes[n.Name] = st
			if st.record != nil && st.record.Replacement != "" {
				a.replacementOf[st.record.Replacement] = n.Name
			}
			if !initial {
				a.seen["nodes created"]++
				a.nodeCreated(n)
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			old, ok1 := oldObj.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if !ok1 || !ok2 {
				return
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			st := a.nodes[n.Name]
			if st == nil {
				st = &nodeState{}
				a.nodes[n.Name] = st
			}
			st.node, st.record = n, recordOf(n)
			st.finalizer = st.finalizer || hasFinalizer(n)
			a.nodeChanged(old, n, st)
		},
		DeleteFunc: func(obj any) {
			n, ok := unwrap(obj).(*corev1.Node)
			if !ok {
				return
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			a.nodeGone(n)
		},
	}
}

// nodeCreated: a node that appears in a pool sluice makes machines for must
// be the named replacement of a node being taken away. Cluster API makes
// machines of its own in cluster-api pools (its rollouts, remediations, a
// person's scale), so there only the records' replacements are checked
// (replacementNamed).
func (a *Auditor) nodeCreated(n *corev1.Node) {
	pool := a.poolOf(n)
	if pool == nil || pool.Spec.Provider.Name == "" || pool.Spec.Provider.Name == v1alpha1.ProviderNone ||
		pool.Spec.Provider.Name == v1alpha1.ProviderClusterAPI {
		return
	}
	name := n.Name
	a.later(func() {
		if a.replacementOf[name] == "" {
			a.violate(OneReplacement, "node %s appeared in pool %s and no node's record names it as its replacement", name, pool.Name)
			return
		}
		a.pass(OneReplacement)
	})
}

func (a *Auditor) nodeChanged(old, n *corev1.Node, st *nodeState) {
	at := rv(n)
	if why, ok := a.undisturbed[n.Name]; ok && (n.Spec.Unschedulable && !old.Spec.Unschedulable || n.DeletionTimestamp != nil && old.DeletionTimestamp == nil) {
		a.violate(Undisturbed, "node %s (%s) was cordoned or deleted", n.Name, why)
	}
	oldRec := recordOf(old)
	if st.record != nil && (oldRec == nil || oldRec.Reason != st.record.Reason) {
		a.seen["disruption records"]++
		a.recordAppeared(n, st.record, at)
		a.healthRecordAppeared(n, st.record)
	}
	if oldRec != nil && st.record == nil {
		a.rebootEnded(n, oldRec)
	}
	if st.record != nil && st.record.Replacement != "" && (oldRec == nil || oldRec.Replacement != st.record.Replacement) {
		a.replacementNamed(n.Name, oldRec, st.record.Replacement)
	}
	a.cordonChanged(old, n)
}

// cordonChanged notes a person's cordon, and judges its undoing.
func (a *Auditor) cordonChanged(old, n *corev1.Node) {
	by := n.Annotations[annotationCordonedBy]
	switch {
	case n.Spec.Unschedulable && !old.Spec.Unschedulable:
		a.seen["cordons"]++
		if by == "" || by == ownerCLI {
			a.personCordon[n.Name] = personOf(by)
		}
	case n.Spec.Unschedulable && by == ownerCLI && old.Annotations[annotationCordonedBy] != ownerCLI:
		// A person's `sluice drain` took over a cordon sluice placed.
		a.personCordon[n.Name] = personOf(by)
	case !n.Spec.Unschedulable && old.Spec.Unschedulable:
		a.seen["uncordons"]++
		who, ok := a.personCordon[n.Name]
		if !ok {
			break
		}
		delete(a.personCordon, n.Name)
		if a.mayUncordon[n.Name] {
			delete(a.mayUncordon, n.Name)
			a.pass(PersonCordon)
			break
		}
		a.violate(PersonCordon, "node %s, cordoned by %s, was uncordoned (now %s=%q)", n.Name, who, annotationCordonedBy, by)
	}
}

func personOf(by string) string {
	if by == ownerCLI {
		return "a person's sluice drain"
	}
	return "a person (no " + annotationCordonedBy + ")"
}

// replacementNamed: one node, one replacement at a time; one replacement,
// one node.
func (a *Auditor) replacementNamed(node string, oldRec *record, replacement string) {
	if oldRec != nil && oldRec.Replacement != "" {
		if prev := a.nodes[oldRec.Replacement]; prev != nil && prev.goneRV == 0 {
			a.violate(OneReplacement, "node %s named replacement %s while its replacement %s still exists", node, replacement, oldRec.Replacement)
			a.replacementOf[replacement] = node
			return
		}
	}
	if other := a.replacementOf[replacement]; other != "" && other != node {
		// One consolidation may replace several underutilized nodes with
		// one cheaper node: every record naming it says Underutilized.
		if o := a.nodes[other]; o != nil && o.goneRV == 0 && (!underutilized(o.record) || !underutilized(a.recordOf(node))) {
			a.violate(OneReplacement, "nodes %s and %s both name %s as their replacement", other, node, replacement)
			return
		}
	}
	a.replacementOf[replacement] = node
	a.pass(OneReplacement)
}

// recordAppeared judges the moment sluice marks a node for disruption: the
// pool's budget must allow it, and nothing on it may say do-not-disrupt.
func (a *Auditor) recordAppeared(n *corev1.Node, rec *record, at int64) {
	if why, ok := a.undisturbed[n.Name]; ok {
		a.violate(Undisturbed, "node %s (%s) was marked for disruption (%s)", n.Name, why, rec.Reason)
	}
	pool := a.poolOf(n)
	if pool == nil || !voluntary(rec.Reason) && rec.Reason != reasonDeleted {
		return
	}
	a.checkBudget(n, pool, rec.Reason, rec.Since)
	if !voluntary(rec.Reason) {
		return
	}
	now := a.clock.Now()
	if why := protected(n.Annotations, n.CreationTimestamp.Time, now); why != "" {
		a.violate(DoNotDisrupt, "node %s was marked %s although it carries %s", n.Name, rec.Reason, why)
	} else if why := protected(pool.Annotations, now.Add(-1000*time.Hour), now); why != "" {
		a.violate(DoNotDisrupt, "node %s was marked %s although its pool %s carries %s", n.Name, rec.Reason, pool.Name, why)
	} else {
		a.pass(DoNotDisrupt)
	}
	name := n.Name
	a.later(func() {
		for _, ps := range a.pods {
			p := ps.pod
			if p.Spec.NodeName != name || ps.boundRV > at || ps.deletingRV != 0 && ps.deletingRV <= at || exempt(p) {
				continue
			}
			if why := protected(p.Annotations, p.CreationTimestamp.Time, now); why != "" {
				a.violate(DoNotDisrupt, "node %s was marked %s although its pod %s/%s carries %s", name, rec.Reason, p.Namespace, p.Name, why)
			}
		}
	})
}

// checkBudget counts the pool's nodes out of service with n just marked,
// as of when the controller chose it (decided, its record's since): a node
// that fell NotReady after that, which no controller could have seen,
// counts for the marks that follow, not for this one (docs/pools.md).
func (a *Auditor) checkBudget(n *corev1.Node, pool *v1alpha1.NodePool, reason string, decided time.Time) {
	var members []*corev1.Node
	for _, st := range a.nodes {
		if st.goneRV == 0 && st.node != nil && a.poolOf(st.node) == pool {
			members = append(members, st.node)
		}
	}
	replacements := map[string]bool{}
	for _, m := range members {
		if r := recordOf(m); r != nil && r.Replacement != "" {
			replacements[r.Replacement] = true
		}
	}
	size, out := 0, 0
	var names []string
	for _, m := range members {
		if !replacements[m.Name] {
			size++
		}
		if outOfService(m) && (!replacements[m.Name] || nodeReady(m)) && !fellNotReadyAfter(m, decided) {
			out++
			names = append(names, m.Name+" "+whyOut(m))
		}
	}
	var budgets []v1alpha1.Budget
	if pool.Spec.Disruption != nil {
		budgets = pool.Spec.Disruption.Budgets
	}
	limit, why, ok := budgetLimit(budgets, size, reason, a.clock.Now())
	if !ok {
		if a.logf != nil {
			a.logf("audit: pool %s: cannot read its budgets (%s); not judged", pool.Name, why)
		}
		return
	}
	if out > limit {
		a.violate(Budget, "pool %s: node %s marked %s with %d nodes out of service (%s); %s allows %d",
			pool.Name, n.Name, reason, out, strings.Join(names, ","), why, limit)
		return
	}
	a.pass(Budget)
}

// nodeGone: a node sluice held with its finalizer may go only once its pods
// have (or its pool's terminationGracePeriod has passed).
func (a *Auditor) nodeGone(n *corev1.Node) {
	st := a.nodes[n.Name]
	if st == nil {
		st = &nodeState{node: n}
		a.nodes[n.Name] = st
	}
	st.goneRV = rv(n)
	a.seen["nodes deleted"]++
	if why, ok := a.undisturbed[n.Name]; ok {
		a.violate(Undisturbed, "node %s (%s) was deleted", n.Name, why)
	}
	if !st.finalizer || st.goneRV == 0 {
		return
	}
	var grace time.Duration = -1
	if pool := a.poolOf(n); pool != nil && pool.Spec.Disruption != nil && pool.Spec.Disruption.TerminationGracePeriod != nil {
		grace = pool.Spec.Disruption.TerminationGracePeriod.Duration
	}
	deleting := n.DeletionTimestamp
	gone, name, at := a.clock.Now(), n.Name, st.goneRV
	a.later(func() {
		var left []string
		for key, ps := range a.pods {
			if ps.pod.Spec.NodeName == name && !exempt(ps.pod) && (ps.goneRV == 0 || ps.goneRV > at) {
				left = append(left, key)
			}
		}
		switch {
		case len(left) == 0:
			a.pass(MachineAfterPods)
		case grace >= 0 && deleting != nil && !gone.Before(deleting.Add(grace)):
			a.pass(MachineAfterPods) // terminationGracePeriod had passed
		default:
			a.violate(MachineAfterPods, "node %s went while pods were still on it: %s", name, strings.Join(left[:min(5, len(left))], ", "))
		}
	})
}

func underutilized(r *record) bool { return r != nil && r.Reason == "Underutilized" }

// recordOf is the node's record as last seen.
func (a *Auditor) recordOf(node string) *record {
	if st := a.nodes[node]; st != nil {
		return st.record
	}
	return nil
}
