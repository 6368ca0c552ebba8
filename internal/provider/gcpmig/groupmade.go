package gcpmig

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

var _ provider.Namer = (*Provider)(nil)

// instancePrefix begins the machine name NameOf gives a Node sluice did not
// name (one its group made by a resize): the rest says where the instance
// is, so Get and Delete find it, and its group, without a pool. A pool's
// name holds no "/", so no sluice name begins so.
const instancePrefix = "gce-instance/"

// providerIDPattern is a Compute Engine Node's spec.providerID, as
// cloud-provider-gcp writes it: gce://<project>/<zone>/<instance>.
var providerIDPattern = regexp.MustCompile(`^gce://([^/]+)/([a-z0-9-]+)/([a-z0-9-]+)$`)

// NameOf is the machine name of a Node on Compute Engine that sluice did
// not name: "gce-instance/<project>/<zone>/<instance>" from its providerID,
// so that a Node the pool had before sluice (named <base>-<4 characters>
// by its group) can be deleted through its group too. "" for a Node named
// as sluice names machines (its own name is the machine's), or whose
// providerID is not a Compute Engine instance's.
func (p *Provider) NameOf(n *corev1.Node) string {
	m := providerIDPattern.FindStringSubmatch(n.Spec.ProviderID)
	if m == nil || isNewName(m[3]) {
		return ""
	}
	return instancePrefix + m[1] + "/" + m[2] + "/" + m[3]
}

// createdByPattern is the created-by metadata item Compute Engine sets on
// every instance a managed instance group creates: the group's partial URL,
// projects/<project number>/zones/<zone>/instanceGroupManagers/<name>, or
// regions/<region> for a regional group (compute docs, "Getting info about
// MIGs": checking if a VM instance is part of a MIG). An instance made
// otherwise has no such item, or one that names no group.
var createdByPattern = regexp.MustCompile(`(?:^|/)projects/[^/]+/(zones|regions)/([^/]+)/instanceGroupManagers/([^/]+)$`)

// groupMade is the instance a NameOf name gives, and the group that made it.
type groupMade struct {
	zone, instance string
	group          ref
	// pools are the gcp-mig pools that list the group.
	pools []string
	// mi is the group's managed instance; nil when the group does not
	// list the instance (it was abandoned from the group).
	mi *computepb.ManagedInstance
}

// getGroupMade returns the machine a NameOf name gives. An instance that is
// gone, or that no gcp-mig pool's group made, is not one of gcp-mig's
// machines: a NotFound error saying why.
func (p *Provider) getGroupMade(ctx context.Context, name string) (*provider.Machine, error) {
	gm, err := p.locateGroupMade(ctx, name)
	if e, ok := provider.AsError(err); ok && e.Code == CodeForeignInstance {
		return nil, fmt.Errorf("machine %s: %s: %w", name, e.Message, provider.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if gm.mi == nil {
		return nil, fmt.Errorf("machine %s: group %s made instance %s but lists it no more: %w", name, gm.group, gm.instance, provider.ErrNotFound)
	}
	// Several pools over one group cannot be told apart by the instance:
	// their node selectors say which Node is whose.
	pool := ""
	if len(gm.pools) == 1 {
		pool = gm.pools[0]
	}
	m, err := p.machineOf(ctx, pool, gm.group, gm.mi)
	if err != nil {
		return nil, err
	}
	m.Name = name
	return m, nil
}

// deleteGroupMade deletes the instance a NameOf name gives through the
// group that made it, which lowers the group's targetSize. One gone or
// being deleted already is no error. An instance no gcp-mig pool's group
// made, or that its group no longer lists, is refused: deleting it is not
// gcp-mig's to do, and answering nil would let its Node go while the VM
// runs on.
func (p *Provider) deleteGroupMade(ctx context.Context, name string) error {
	gm, err := p.locateGroupMade(ctx, name)
	if provider.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if gm.mi == nil {
		return &provider.Error{Code: CodeForeignInstance, Message: fmt.Sprintf(
			"instance %s in zone %s was made by group %s, which lists it no more (abandoned?): gcp-mig deletes only instances of its pools' groups; delete it yourself",
			gm.instance, gm.zone, gm.group)}
	}
	if leaving(gm.mi) {
		return nil
	}
	if err := p.deleteInstance(ctx, gm.group, gm.mi); err != nil {
		return err
	}
	p.opts.Log.Info("machine deleted", "machine", name, "pools", gm.pools, "group", gm.group.String())
	return nil
}

// locateGroupMade reads the instance a NameOf name gives and the group that
// made it (its created-by), and finds the instance among the group's. A
// NotFound error when the name is not one NameOf gives or the instance is
// gone; a ForeignInstance refusal when no group made it, or a group of no
// gcp-mig pool did.
func (p *Provider) locateGroupMade(ctx context.Context, name string) (*groupMade, error) {
	project, zone, instance, ok := parseInstanceName(name)
	if !ok {
		return nil, fmt.Errorf("machine %s: not a name gcp-mig gives: %w", name, provider.ErrNotFound)
	}
	inst, err := p.clients.instances.Get(ctx, &computepb.GetInstanceRequest{Project: project, Zone: zone, Instance: instance})
	if isNotFound(err) {
		return nil, fmt.Errorf("machine %s: instance %s is gone: %w", name, instance, provider.ErrNotFound)
	}
	if err != nil {
		return nil, refusal("reading instance "+instance, err)
	}
	g, ok := createdBy(inst, project)
	if !ok {
		return nil, &provider.Error{Code: CodeForeignInstance, Message: fmt.Sprintf(
			"instance %s in zone %s was not made by a managed instance group (its metadata has no created-by naming one): gcp-mig deletes only instances of its pools' groups",
			instance, zone)}
	}
	pools, err := p.poolsWith(ctx, g)
	if err != nil {
		return nil, err
	}
	if len(pools) == 0 {
		return nil, &provider.Error{Code: CodeForeignInstance, Message: fmt.Sprintf(
			"instance %s in zone %s was made by group %s, which is none of a gcp-mig NodePool's provider.gcp.instanceGroups: gcp-mig deletes only instances of its pools' groups",
			instance, zone, g)}
	}
	all, err := p.managedInstances(ctx, g)
	if err != nil {
		return nil, err
	}
	gm := &groupMade{zone: zone, instance: instance, group: g, pools: pools}
	for _, mi := range all {
		if mi.GetName() == instance && zoneOf(mi) == zone && (gm.mi == nil || leaving(gm.mi)) {
			gm.mi = mi
		}
	}
	return gm, nil
}

// parseInstanceName reads a name NameOf gives.
func parseInstanceName(name string) (project, zone, instance string, ok bool) {
	rest, ok := strings.CutPrefix(name, instancePrefix)
	if !ok {
		return "", "", "", false
	}
	f := strings.Split(rest, "/")
	if len(f) != 3 || slices.Contains(f, "") {
		return "", "", "", false
	}
	return f[0], f[1], f[2], true
}

// createdBy is the group that made the instance, from its created-by
// metadata item. The item names the project by its number; a group makes
// its instances in its own project, so the group's project is the
// instance's (as the NodePool names it), as cluster-autoscaler's GCE
// provider reads it too.
func createdBy(inst *computepb.Instance, project string) (ref, bool) {
	for _, it := range inst.GetMetadata().GetItems() {
		if it.GetKey() != "created-by" {
			continue
		}
		m := createdByPattern.FindStringSubmatch(it.GetValue())
		if m == nil {
			return ref{}, false
		}
		g := ref{project: project, name: m[3]}
		if m[1] == "regions" {
			g.region = m[2]
		} else {
			g.zone = m[2]
		}
		return g, true
	}
	return ref{}, false
}

// poolsWith names the gcp-mig pools that list the group, sorted: of the
// cluster's NodePools when Options.ListPools is set, else of the pools the
// provider was handed or found by name since it started.
func (p *Provider) poolsWith(ctx context.Context, g ref) ([]string, error) {
	specs, err := p.allSpecs(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for pool, spec := range specs {
		if slices.ContainsFunc(groupsOf(spec), func(pg ref) bool { return pg.key() == g.key() }) {
			out = append(out, pool)
		}
	}
	slices.Sort(out)
	return out, nil
}

// allSpecs are the gcp-mig pools' specs by pool name (see poolsWith).
func (p *Provider) allSpecs(ctx context.Context) (map[string]*v1alpha1.GCPProviderSpec, error) {
	if p.opts.ListPools == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return maps.Clone(p.pools), nil
	}
	pools, err := p.listPools(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]*v1alpha1.GCPProviderSpec{}
	for i := range pools {
		np := &pools[i]
		if np.Spec.Provider.Name != v1alpha1.ProviderGCPMIG {
			continue
		}
		if spec, err := p.remember(np); err == nil {
			out[np.Name] = spec
		}
	}
	return out, nil
}

// listPools lists the cluster's NodePools through Options.ListPools (Start
// gives it provider.CachedPoolList: Get and Delete of a NameOf name need
// every gcp-mig pool's groups, and the controller asks a Get per Node).
func (p *Provider) listPools(ctx context.Context) ([]v1alpha1.NodePool, error) {
	pools, err := p.opts.ListPools(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	return pools, nil
}
