package clusterapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/internal/provider"
)

// Delete removes the machine: it marks its Machine with
// cluster.x-k8s.io/delete-machine ("sluice:<N>") and lowers the target's
// replicas from N to N-1 at the resourceVersion read, so the MachineSet
// deletes that Machine first. A Machine gone or deleting already is no
// error, nor is a name that leads to no Machine. A lower replicas count
// that fails takes the mark off again; a mark whose removal failed too is
// found by a later Delete or Create (replicas not lowered, the Machine
// alive) and removed. Where Cluster API would take another Machine, Delete
// is refused (retryable): RolloutInProgress, DeletionInProgress,
// AnotherMachineMarked.
func (p *Provider) Delete(ctx context.Context, name string) error {
	loc, err := p.locate(ctx, name)
	if err != nil || loc == nil {
		return err
	}
	c := loc.claim
	var t target
	if c != nil {
		t = c.target()
	} else {
		m, err := get[machine](ctx, p, Machines, loc.namespace, loc.machine)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return refusal("reading Machine "+loc.namespace+"/"+loc.machine, err)
		}
		if t, err = targetOfMachine(m); err != nil {
			return err
		}
	}
	unlock, err := p.lock(ctx, t)
	if err != nil {
		return err
	}
	defer unlock()
	capiName := loc.machine
	if c != nil && !c.settled() {
		if capiName, err = p.pendingOf(ctx, c); err != nil || capiName == "" {
			return err
		}
	}
	m, err := get[machine](ctx, p, Machines, loc.namespace, capiName)
	if apierrors.IsNotFound(err) {
		if c != nil {
			p.drop(ctx, c)
		}
		return nil
	}
	if err != nil {
		return refusal("reading Machine "+loc.namespace+"/"+capiName, err)
	}
	if m.deleting() {
		return nil
	}
	return p.remove(ctx, t, m)
}

// targetOfMachine is the target a Machine no claim holds is counted in: its
// MachineDeployment, or its standalone MachineSet.
func targetOfMachine(m *machine) (target, error) {
	if md := m.Labels[LabelDeploymentName]; md != "" {
		return target{m.Namespace, KindMachineDeployment, md}, nil
	}
	if ms := m.set(); ms != "" {
		return target{m.Namespace, KindMachineSet, ms}, nil
	}
	return target{}, fmt.Errorf("machine %s/%s belongs to no MachineDeployment or MachineSet: sluice removes only Machines whose replicas it can lower", m.Namespace, m.Name)
}

// pendingOf is the Machine to delete for a claim whose Machine is not known:
// "" when replicas were never raised for it (the claim is dropped: nothing
// was made); an error while they are raised and Cluster API has not made
// the Machine yet, so the claim stays until it has and it is deleted then,
// never left running.
func (p *Provider) pendingOf(ctx context.Context, c *Claim) (string, error) {
	m, err := p.pending(ctx, c, false)
	if provider.IsNotFound(err) {
		p.drop(ctx, c)
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if c.settled() {
		return c.CAPIMachine, nil
	}
	return "", &provider.Error{Code: CodeMachineNotListed, Retryable: true, Message: fmt.Sprintf(
		"%s's replicas were raised for machine %s and Cluster API has not made its Machine yet; it is deleted once it has (%s)", c.target(), c.Machine, m.State)}
}

// remove marks the Machine and lowers the target's replicas by one; the
// target's lock is held.
func (p *Provider) remove(ctx context.Context, t target, m *machine) error {
	obj, err := p.read(ctx, t)
	if err != nil {
		return err
	}
	if err := p.refuse(ctx, t, obj); err != nil {
		return err
	}
	n := obj.replicas()
	marked, from, ours := markOf(m)
	if ours && from == n+1 {
		// A Delete before this one lowered the replicas; Cluster API has
		// not acted on them yet.
		return nil
	}
	if err := p.removable(ctx, t, m, n); err != nil {
		return err
	}
	machines, err := p.machinesOf(ctx, t)
	if err != nil {
		return err
	}
	if err := raisePending(t, n, machines); err != nil {
		return err
	}
	if n <= 0 {
		return &provider.Error{Code: CodeDeletionInProgress, Retryable: true, Message: fmt.Sprintf(
			"%s has 0 replicas: Cluster API is deleting its Machines, Machine %s/%s among them", t, m.Namespace, m.Name)}
	}
	// A person's mark stays as it is, and is never taken off.
	ownMark := !marked || ours
	if ownMark {
		if err := p.setMark(ctx, m, n); err != nil {
			return err
		}
	}
	if err = p.lower(ctx, t, obj, n); err == nil {
		p.opts.Log.Info("replicas lowered", "target", t.String(), "machine", m.Namespace+"/"+m.Name, "replicas", n-1)
		return nil
	}
	why := refusal(fmt.Sprintf("lowering the replicas of %s to %d", t, n-1), err)
	if !answered(err) || !ownMark {
		// Whether the replicas were lowered is unknown: the mark stays, and
		// the next Delete finds it with replicas at N-1 (done) or N (lowered
		// then).
		return why
	}
	if rerr := p.unmark(ctx, m.Namespace, m.Name, mark(n)); rerr != nil {
		p.opts.Log.Info("taking a mark off after a refused decrement; a later change of the target removes it", "machine", m.Namespace+"/"+m.Name, "err", rerr)
		return fmt.Errorf("%w; then taking the mark off Machine %s/%s: %w", why, m.Namespace, m.Name, rerr)
	}
	return why
}

// lower sets the target's replicas from n to n-1 at the resourceVersion
// read. A target changed since (Cluster API writes its status often) is read
// again, and lowered at its new resourceVersion while it still has n
// replicas and nothing refuses it.
func (p *Provider) lower(ctx context.Context, t target, obj *scalable, n int32) error {
	for attempt := 1; ; attempt++ {
		err := p.scale(ctx, t, obj.ResourceVersion, n-1)
		if err == nil || !apierrors.IsConflict(err) || attempt >= conflictRetries {
			return err
		}
		again, rerr := p.read(ctx, t)
		if rerr != nil || again.replicas() != n || p.refuse(ctx, t, again) != nil {
			return err
		}
		obj = again
	}
}

// removable says why lowering the target's replicas (n now) would take
// another Machine than m, and takes off the marks sluice left behind (a
// mark whose decrement never happened: replicas are not one below what
// it was written at).
func (p *Provider) removable(ctx context.Context, t target, m *machine, n int32) error {
	set := m.set()
	if set == "" {
		return fmt.Errorf("machine %s/%s belongs to no MachineSet: sluice removes only Machines whose replicas it can lower", m.Namespace, m.Name)
	}
	if t.Kind == KindMachineDeployment {
		if err := p.rollout(ctx, t, set); err != nil {
			return err
		}
	}
	machines, err := p.machinesOf(ctx, t)
	if err != nil {
		return err
	}
	for _, o := range machines {
		if o.Name == m.Name || o.set() != set {
			continue
		}
		if o.deleting() {
			return &provider.Error{Code: CodeDeletionInProgress, Retryable: true, Message: fmt.Sprintf(
				"Machine %s/%s of MachineSet %s is deleting, and Cluster API would count a lower replicas count against it, not remove Machine %s "+
					"(nor replace the one deleting); sluice waits until it is gone", o.Namespace, o.Name, set, m.Name)}
		}
		if marked, _, ours := markOf(o); marked && !ours {
			return &provider.Error{Code: CodeAnotherMachineMarked, Retryable: true, Message: fmt.Sprintf(
				"Machine %s/%s of MachineSet %s carries %s=%q, which sluice did not write: a lower replicas count could remove it instead of Machine %s; "+
					"take the annotation off, or lower the replicas yourself", o.Namespace, o.Name, set, AnnotationDeleteMachine, o.Annotations[AnnotationDeleteMachine], m.Name)}
		}
		if err := p.sweep(ctx, o, n); err != nil {
			return err
		}
	}
	return nil
}

// sweep takes sluice's mark off a Machine alive whose decrement never
// happened: the target's replicas (n) are not one below what the mark was
// written at. (One below, the decrement happened and Cluster API has yet to
// act on it.) Left on, the mark would make the next scale-down take that
// Machine.
func (p *Provider) sweep(ctx context.Context, m *machine, n int32) error {
	marked, from, ours := markOf(m)
	if !marked || !ours || from == n+1 || m.deleting() {
		return nil
	}
	if err := p.unmark(ctx, m.Namespace, m.Name, mark(from)); err != nil {
		return err
	}
	p.opts.Log.Info("took off a mark whose decrement never happened", "machine", m.Namespace+"/"+m.Name, "mark", mark(from), "replicas", n)
	return nil
}

// rollout refuses a MachineDeployment more than one of whose MachineSets
// holds replicas: a lower count is then the rollout planner's to place (the
// newest MachineSet when it holds more than the new count, else an old one
// as maxUnavailable allows; a paused MachineDeployment spreads it over them
// all), so it need not take the marked Machine of set.
func (p *Provider) rollout(ctx context.Context, t target, set string) error {
	sets, err := list[scalable](ctx, p, MachineSets, t.Namespace, LabelDeploymentName+"="+t.Name)
	if err != nil {
		return refusal("listing the MachineSets of "+t.String(), err)
	}
	var active []string
	for _, s := range sets {
		if controller(&s.ObjectMeta, KindMachineDeployment) == t.Name && s.replicas() > 0 {
			active = append(active, fmt.Sprintf("%s: %d", s.Name, s.replicas()))
		}
	}
	if len(active) < 2 {
		return nil
	}
	return &provider.Error{Code: CodeRolloutInProgress, Retryable: true, Message: fmt.Sprintf(
		"%s is rolling out (MachineSets %s): a lower replicas count would be Cluster API's rollout planner's to place, and need not remove "+
			"the Machine of %s. The rollout replaces it", t, strings.Join(active, ", "), set)}
}

// setMark writes sluice's delete-machine mark on the Machine.
func (p *Provider) setMark(ctx context.Context, m *machine, n int32) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationDeleteMachine: mark(n)}}})
	if err != nil {
		return err
	}
	_, err = p.dyn.Resource(Machines).Namespace(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return refusal("marking Machine "+m.Namespace+"/"+m.Name+" for deletion", err)
	}
	return nil
}

// unmark takes the mark off the Machine if it still reads value. The
// patch tests the value, so a mark changed meanwhile is left; a patch the
// API server refuses is no error only when the Machine, read again, no
// longer has that mark (gone, or changed).
func (p *Provider) unmark(ctx context.Context, namespace, name, value string) error {
	path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(AnnotationDeleteMachine, "~", "~0"), "/", "~1")
	patch, err := json.Marshal([]map[string]any{{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}})
	if err != nil {
		return err
	}
	_, err = p.dyn.Resource(Machines).Namespace(namespace).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	m, gerr := get[machine](ctx, p, Machines, namespace, name)
	if apierrors.IsNotFound(gerr) || gerr == nil && m.Annotations[AnnotationDeleteMachine] != value {
		return nil
	}
	return fmt.Errorf("taking the mark off Machine %s/%s: %w", namespace, name, err)
}
