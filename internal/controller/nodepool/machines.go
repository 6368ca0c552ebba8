package nodepool

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/disruption"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// Indexes of the shared cache's Nodes.
const (
	indexMachine    = "machine-names" // every name a Node is known by as a machine
	indexProviderID = "spec.providerID"
)

// replacementNode finds the Node of the record's replacement machine. The
// kwok provider names a Node after its machine; a cloud's kubelet names it
// itself, so the Node is found by the machine's name (its own, the one noted
// on it, or the one its provider reads from it), else by the providerID the
// record noted at launch, else (a record written before that) by the
// providerID the provider gives the machine now. The machine's name is then
// noted on the Node (contract.AnnotationMachine), so every later look, and
// the pool's accounting of replacements, finds it from the cache alone. A
// replacement that is not a Node yet is a NotFound error.
func (c *Controller) replacementNode(ctx context.Context, pool *v1alpha1.NodePool, rec *disruption.Record) (*corev1.Node, error) {
	n, err := c.nodeBy(ctx, indexMachine, rec.Replacement)
	if err != nil {
		return nil, err
	}
	if n == nil {
		id := rec.ReplacementProviderID
		if id == "" {
			m, err := c.machines.GetMachine(ctx, pool, rec.Replacement)
			if err != nil && !provider.IsNotFound(err) {
				return nil, err
			}
			if err == nil {
				id = m.ProviderID
			}
		}
		if id == "" {
			return nil, notANode(rec.Replacement)
		}
		if n, err = c.nodeBy(ctx, indexProviderID, provider.IDKey(id)); err != nil {
			return nil, err
		}
		if n == nil {
			return nil, notANode(rec.Replacement)
		}
	}
	if provider.MachineName(n) != rec.Replacement && !c.opts.DryRun {
		if err := c.patchNode(ctx, n, func(m *corev1.Node) { setAnnotation(m, contract.AnnotationMachine, rec.Replacement) }); err != nil {
			return nil, err
		}
		setAnnotation(n, contract.AnnotationMachine, rec.Replacement)
	}
	return n, nil
}

// nodeBy returns the cached Node the index maps value to, nil for none.
func (c *Controller) nodeBy(ctx context.Context, index, value string) (*corev1.Node, error) {
	var list corev1.NodeList
	if err := c.kube.List(ctx, &list, client.MatchingFields{index: value}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

func notANode(machine string) error {
	return apierrors.NewNotFound(corev1.Resource("nodes"), "the node of machine "+machine)
}

// noteProviderID writes the replacement's providerID on the record of the
// node it replaces when its Node will not carry the machine's name, so the
// pool's accounting knows the Node from the moment it registers. Best
// effort: without it the Node is found through the provider, a little later.
func (c *Controller) noteProviderID(ctx context.Context, n *corev1.Node, rec disruption.Record, m *provider.Machine) {
	if m == nil || m.ProviderID == "" || m.NodeName == rec.Replacement || rec.ReplacementProviderID == m.ProviderID {
		return
	}
	rec.ReplacementProviderID = m.ProviderID
	if err := c.setRecord(ctx, n, &rec); err != nil {
		c.opts.Log.Info("could not note a replacement's providerID", "node", n.Name, "replacement", rec.Replacement, "err", err)
	}
}
