package clusterapi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// fieldManager owns what the provider writes.
const fieldManager = "sluice"

// conflictRetries is how many times a write of replicas refused for a
// target changed since it was read (Cluster API writes its status often)
// is tried again from a fresh read.
const conflictRetries = 3

// Create makes the machine named name in the pool's target, or returns it as
// its claim has it. Once replicas are raised the machine is returned even
// when Cluster API has not made its Machine yet (Launching, no providerID):
// Get names it later.
func (p *Provider) Create(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error) {
	spec := pool.Spec.Provider.ClusterAPI
	if spec == nil {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: "provider.clusterAPI is empty: name the pool's namespace and MachineDeployment or MachineSet"}
	}
	if name == "" {
		name = provider.NewName(pool.Name)
	}
	t := targetOf(spec)
	if c, err := p.claims.Get(ctx, name); err != nil {
		return nil, err
	} else if c != nil {
		t = c.target()
	}
	unlock, err := p.lock(ctx, t)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := p.claims.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if c != nil {
		m, err := p.resume(ctx, c)
		if err != nil || m != nil {
			return m, err
		}
		// The claimed Machine is gone: the machine is made anew.
	}
	c = &Claim{Machine: name, Pool: pool.Name, Namespace: t.Namespace, Created: p.clock.Now().UTC()}
	if t.Kind == KindMachineSet {
		c.MachineSet = t.Name
	} else {
		c.MachineDeployment = t.Name
	}
	return p.raise(ctx, c)
}

// resume finishes a claim found stored: the machine, or nil when its
// Machine is gone (the claim is dropped).
func (p *Provider) resume(ctx context.Context, c *Claim) (*provider.Machine, error) {
	if !c.settled() {
		return p.pending(ctx, c, true)
	}
	m, err := get[machine](ctx, p, Machines, c.Namespace, c.CAPIMachine)
	if apierrors.IsNotFound(err) {
		p.index.forget(c)
		return nil, p.claims.Delete(ctx, c.Machine)
	}
	if err != nil {
		return nil, refusal("reading Machine "+c.Namespace+"/"+c.CAPIMachine, err)
	}
	return describe(c.Machine, c.Pool, c.Created, m), nil
}

// pending settles a claim whose Machine is not known yet; the target's lock
// is held. Only once the target's replicas reached the claim's count were
// its new Machines made for it: before, they are another change's. Then
// the oldest new Machine no other claim holds is the machine; none means
// Cluster API has not made it yet (Launching). Replicas never raised (or
// lowered since) are raised now when mayRaise (Create), and the machine is
// NotFound otherwise (Get: the controller asks again by the same name).
func (p *Provider) pending(ctx context.Context, c *Claim, mayRaise bool) (*provider.Machine, error) {
	t := c.target()
	obj, err := p.read(ctx, t)
	if err != nil {
		return nil, err
	}
	if obj.replicas() < c.Replicas {
		if !mayRaise {
			return nil, fmt.Errorf("machine %s: %s's replicas were never raised for it: %w", c.Machine, t, provider.ErrNotFound)
		}
		return p.raise(ctx, c)
	}
	fresh, err := p.fresh(ctx, c)
	if err != nil {
		return nil, err
	}
	if len(fresh) == 0 {
		return launching(c), nil
	}
	return p.settle(ctx, c, fresh[0])
}

// raise writes the claim with the replicas it asks for (one more than the
// target has) and the target's Machines, then sets the scale subresource to
// that count at the resourceVersion read: a target changed since is
// refused, not overwritten, and read again. The count is absolute, so a
// request repeated after a lost answer asks for nothing more.
func (p *Provider) raise(ctx context.Context, c *Claim) (*provider.Machine, error) {
	t := c.target()
	for attempt := 1; ; attempt++ {
		obj, err := p.read(ctx, t)
		if err != nil {
			return nil, err
		}
		if err := p.refuse(ctx, t, obj); err != nil {
			return nil, err
		}
		machines, err := p.machinesOf(ctx, t)
		if err != nil {
			return nil, err
		}
		if err := p.explained(ctx, t, obj, machines); err != nil {
			return nil, err
		}
		for _, m := range machines {
			if err := p.sweep(ctx, m, obj.replicas()); err != nil {
				return nil, err
			}
		}
		if err := decrementPending(t, obj.replicas(), machines); err != nil {
			return nil, err
		}
		c.Before, c.Replicas = names(machines), obj.replicas()+1
		if err := p.claims.Put(ctx, c); err != nil {
			return nil, err
		}
		err = p.scale(ctx, t, obj.ResourceVersion, c.Replicas)
		switch {
		case err == nil:
			p.opts.Log.Info("replicas raised", "machine", c.Machine, "target", t.String(), "replicas", c.Replicas)
			return p.await(ctx, c)
		case !answered(err):
			// Cut short (a lost connection, a deadline): whether the
			// replicas were raised is unknown, and the claim says what to
			// look for.
			p.opts.Log.Info("raising replicas cut short; the machine is settled when it is next read", "machine", c.Machine, "target", t.String(), "err", err)
			return launching(c), nil
		case apierrors.IsConflict(err) && attempt < conflictRetries:
			continue
		}
		why := refusal(fmt.Sprintf("raising the replicas of %s to %d", t, c.Replicas), err)
		if derr := p.claims.Delete(ctx, c.Machine); derr != nil {
			return nil, fmt.Errorf("%w; then dropping the claim: %w", why, derr)
		}
		return nil, why
	}
}

// await waits up to Options.SettleWithin for Cluster API to make the
// claim's Machine, and names it; the machine is Launching until then.
func (p *Provider) await(ctx context.Context, c *Claim) (*provider.Machine, error) {
	deadline := p.clock.Now().Add(p.opts.SettleWithin)
	for {
		fresh, err := p.fresh(ctx, c)
		if err != nil {
			return nil, err
		}
		if len(fresh) > 0 {
			return p.settle(ctx, c, fresh[0])
		}
		if !p.clock.Now().Before(deadline) {
			return launching(c), nil
		}
		select {
		case <-ctx.Done():
			return launching(c), nil
		case <-p.clock.After(p.opts.PollEvery):
		}
	}
}

// settle makes the Machine the claim's.
func (p *Provider) settle(ctx context.Context, c *Claim, m *machine) (*provider.Machine, error) {
	c.CAPIMachine, c.Before = m.Name, nil
	if err := p.claims.Put(ctx, c); err != nil {
		return nil, err
	}
	p.index.remember(c, m)
	p.opts.Log.Info("machine made", "machine", c.Machine, "target", c.target().String(), "capiMachine", m.Name)
	return describe(c.Machine, c.Pool, c.Created, m), nil
}

// fresh are the target's Machines that were not there when the claim was
// written and that no other claim holds, oldest first. If Cluster API made
// one of its own meanwhile (a remediation's replacement), it is a Machine of
// the same template: which one the claim names does not matter, the count
// does.
func (p *Provider) fresh(ctx context.Context, c *Claim) ([]*machine, error) {
	machines, err := p.machinesOf(ctx, c.target())
	if err != nil {
		return nil, err
	}
	claims, err := p.claims.List(ctx)
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, o := range claims {
		if o.Machine != c.Machine && o.Namespace == c.Namespace && o.settled() {
			held[o.CAPIMachine] = true
		}
	}
	var out []*machine
	for _, m := range machines {
		if !slices.Contains(c.Before, m.Name) && !held[m.Name] {
			out = append(out, m)
		}
	}
	oldestFirst(out)
	return out, nil
}

// explained refuses a target whose replicas exceed its Machines by more
// than sluice's own claims waiting for theirs: someone else raised them,
// and until Cluster API has made those Machines a new one could be theirs
// or sluice's.
func (p *Provider) explained(ctx context.Context, t target, obj *scalable, machines []*machine) error {
	unmade := int(obj.replicas()) - len(machines)
	if unmade <= 0 {
		return nil
	}
	claims, err := p.claims.List(ctx)
	if err != nil {
		return err
	}
	waiting := 0
	for _, c := range claims {
		if !c.settled() && c.target() == t && c.Replicas <= obj.replicas() {
			waiting++
		}
	}
	if unmade <= waiting {
		return nil
	}
	return &provider.Error{Code: CodeCapacityChangedElsewhere, Retryable: true, Message: fmt.Sprintf(
		"%s asks for %d replicas and has %d Machines, of which sluice's claims explain %d: something else raised its replicas "+
			"(kubectl scale, an autoscaler?), and until Cluster API has made those Machines sluice cannot tell its new machine from theirs; "+
			"sluice must be the only writer of its replicas", t, obj.replicas(), len(machines), waiting)}
}

// read reads the target.
func (p *Provider) read(ctx context.Context, t target) (*scalable, error) {
	obj, err := get[scalable](ctx, p, t.resource(), t.Namespace, t.Name)
	if err != nil {
		return nil, refusal("reading "+t.String(), err)
	}
	return obj, nil
}

// refuse says why the provider may not change the target's replicas: an
// autoscaler or a topology writes them too, or the Cluster is paused.
func (p *Provider) refuse(ctx context.Context, t target, obj *scalable) error {
	var autoscaler []string
	for _, a := range []string{AnnotationAutoscalerMin, AnnotationAutoscalerMax} {
		if _, ok := obj.Annotations[a]; ok {
			autoscaler = append(autoscaler, a)
		}
	}
	if len(autoscaler) > 0 {
		return &provider.Error{Code: CodeAutoscalerEnabled, Message: fmt.Sprintf(
			"%s carries cluster-autoscaler's %s, so the autoscaler writes its replicas too; sluice must be their only writer: "+
				"remove the annotations, or leave the pool's machines to the autoscaler (provider none)", t, strings.Join(autoscaler, " and "))}
	}
	if _, ok := obj.Labels[LabelTopologyOwned]; ok {
		return &provider.Error{Code: CodeTopologyOwned, Message: fmt.Sprintf(
			"%s is owned by its Cluster's ClusterClass topology (label %s), which writes its replicas from the Cluster's spec.topology; "+
				"sluice must be their only writer", t, LabelTopologyOwned)}
	}
	if _, ok := obj.Annotations[AnnotationPaused]; ok {
		return paused(t, fmt.Sprintf("%s carries %s", t, AnnotationPaused))
	}
	if obj.Spec.ClusterName == "" {
		return nil
	}
	cl, err := get[cluster](ctx, p, Clusters, t.Namespace, obj.Spec.ClusterName)
	if err != nil {
		return refusal("reading Cluster "+t.Namespace+"/"+obj.Spec.ClusterName, err)
	}
	if cl.Spec.Paused != nil && *cl.Spec.Paused {
		return paused(t, fmt.Sprintf("Cluster %s/%s is paused (spec.paused)", t.Namespace, cl.Name))
	}
	if _, ok := cl.Annotations[AnnotationPaused]; ok {
		return paused(t, fmt.Sprintf("Cluster %s/%s carries %s", t.Namespace, cl.Name, AnnotationPaused))
	}
	return nil
}

func paused(t target, why string) error {
	return &provider.Error{Code: CodeClusterPaused, Retryable: true, Message: why +
		": Cluster API makes and deletes no Machine of " + t.String() + " until it is resumed"}
}

// machinesOf lists the target's Machines: a MachineDeployment's by its
// label, a MachineSet's by owner reference (its set-name label is a hash
// for names over 63 characters).
func (p *Provider) machinesOf(ctx context.Context, t target) ([]*machine, error) {
	selector := ""
	if t.Kind == KindMachineDeployment {
		selector = LabelDeploymentName + "=" + t.Name
	}
	all, err := list[machine](ctx, p, Machines, t.Namespace, selector)
	if err != nil {
		return nil, refusal("listing the Machines of "+t.String(), err)
	}
	out := all[:0]
	for _, m := range all {
		if t.owns(m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// scale sets the target's replicas through its scale subresource, at the
// resourceVersion read.
func (p *Provider) scale(ctx context.Context, t target, resourceVersion string, replicas int32) error {
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling/v1", "kind": "Scale",
		"metadata": map[string]any{"name": t.Name, "namespace": t.Namespace, "resourceVersion": resourceVersion},
		"spec":     map[string]any{"replicas": int64(replicas)},
	}}
	_, err := p.dyn.Resource(t.resource()).Namespace(t.Namespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: fieldManager}, "scale")
	return err
}

func names(ms []*machine) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}
