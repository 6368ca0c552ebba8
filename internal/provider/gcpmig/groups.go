package gcpmig

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// clients are the Compute Engine REST clients the provider calls.
type clients struct {
	zonal     *compute.InstanceGroupManagersClient
	regional  *compute.RegionInstanceGroupManagersClient
	templates *compute.InstanceTemplatesClient
	instances *compute.InstancesClient
	zoneOps   *compute.ZoneOperationsClient
	regionOps *compute.RegionOperationsClient
	globalOps *compute.GlobalOperationsClient
}

func newClients(ctx context.Context, opts []option.ClientOption) (*clients, error) {
	var c clients
	var err error
	for _, mk := range []func() error{
		func() (e error) { c.zonal, e = compute.NewInstanceGroupManagersRESTClient(ctx, opts...); return },
		func() (e error) {
			c.regional, e = compute.NewRegionInstanceGroupManagersRESTClient(ctx, opts...)
			return
		},
		func() (e error) { c.templates, e = compute.NewInstanceTemplatesRESTClient(ctx, opts...); return },
		func() (e error) { c.instances, e = compute.NewInstancesRESTClient(ctx, opts...); return },
		func() (e error) { c.zoneOps, e = compute.NewZoneOperationsRESTClient(ctx, opts...); return },
		func() (e error) { c.regionOps, e = compute.NewRegionOperationsRESTClient(ctx, opts...); return },
		func() (e error) { c.globalOps, e = compute.NewGlobalOperationsRESTClient(ctx, opts...); return },
	} {
		if err = mk(); err != nil {
			return nil, fmt.Errorf("making the Compute Engine clients: %w", err)
		}
	}
	return &c, nil
}

func (c *clients) close() error {
	return errors.Join(c.zonal.Close(), c.regional.Close(), c.templates.Close(), c.instances.Close(),
		c.zoneOps.Close(), c.regionOps.Close(), c.globalOps.Close())
}

// ref names one managed instance group: zonal (zone) or regional (region).
type ref struct{ project, zone, region, name string }

func (r ref) key() string    { return r.project + "/" + r.location() + "/" + r.name }
func (r ref) String() string { return r.location() + "/" + r.name }

func (r ref) location() string {
	if r.region != "" {
		return "regions/" + r.region
	}
	return "zones/" + r.zone
}

func groupsOf(spec *v1alpha1.GCPProviderSpec) []ref {
	out := make([]ref, 0, len(spec.InstanceGroups))
	for _, g := range spec.InstanceGroups {
		out = append(out, ref{project: spec.Project, zone: g.Zone, region: g.Region, name: g.Name})
	}
	return out
}

func (p *Provider) getGroup(ctx context.Context, g ref) (*computepb.InstanceGroupManager, error) {
	var igm *computepb.InstanceGroupManager
	var err error
	if g.region != "" {
		igm, err = p.clients.regional.Get(ctx, &computepb.GetRegionInstanceGroupManagerRequest{Project: g.project, Region: g.region, InstanceGroupManager: g.name})
	} else {
		igm, err = p.clients.zonal.Get(ctx, &computepb.GetInstanceGroupManagerRequest{Project: g.project, Zone: g.zone, InstanceGroupManager: g.name})
	}
	if err != nil {
		return nil, refusal("reading instance group "+g.String(), err)
	}
	return igm, nil
}

// managedInstances lists the group's instances, those being created or
// deleted included.
func (p *Provider) managedInstances(ctx context.Context, g ref) ([]*computepb.ManagedInstance, error) {
	var it interface {
		Next() (*computepb.ManagedInstance, error)
	}
	if g.region != "" {
		it = p.clients.regional.ListManagedInstances(ctx, &computepb.ListManagedInstancesRegionInstanceGroupManagersRequest{Project: g.project, Region: g.region, InstanceGroupManager: g.name})
	} else {
		it = p.clients.zonal.ListManagedInstances(ctx, &computepb.ListManagedInstancesInstanceGroupManagersRequest{Project: g.project, Zone: g.zone, InstanceGroupManager: g.name})
	}
	var out []*computepb.ManagedInstance
	for {
		mi, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, refusal("listing the instances of group "+g.String(), err)
		}
		out = append(out, mi)
	}
}

// locate finds the managed instance named name in the spec's groups, or a
// NotFound error. A name is unique in a zone only: an instance being
// deleted (a refused attempt in another group's zone) gives way to one
// that is not.
func (p *Provider) locate(ctx context.Context, spec *v1alpha1.GCPProviderSpec, name string) (ref, *computepb.ManagedInstance, error) {
	var found *computepb.ManagedInstance
	var in ref
	for _, g := range groupsOf(spec) {
		all, err := p.managedInstances(ctx, g)
		if err != nil {
			return ref{}, nil, err
		}
		for _, mi := range all {
			if mi.GetName() == name && (found == nil || leaving(found)) {
				found, in = mi, g
			}
		}
	}
	if found == nil {
		return ref{}, nil, fmt.Errorf("machine %s: %w", name, provider.ErrNotFound)
	}
	return in, found, nil
}

// leaving says whether the group is deleting or abandoning the instance.
func leaving(mi *computepb.ManagedInstance) bool {
	return mi.GetCurrentAction() == "DELETING" || mi.GetCurrentAction() == "ABANDONING"
}

// createInstance asks the group for one instance named name, and waits for
// the request (not the instance) to be done.
func (p *Provider) createInstance(ctx context.Context, g ref, name string) error {
	body := &computepb.InstanceGroupManagersCreateInstancesRequest{Instances: []*computepb.PerInstanceConfig{{Name: proto.String(name)}}}
	var op *compute.Operation
	var err error
	if g.region != "" {
		op, err = p.clients.regional.CreateInstances(ctx, &computepb.CreateInstancesRegionInstanceGroupManagerRequest{Project: g.project, Region: g.region,
			InstanceGroupManager: g.name, RegionInstanceGroupManagersCreateInstancesRequestResource: &computepb.RegionInstanceGroupManagersCreateInstancesRequest{Instances: body.Instances}})
	} else {
		op, err = p.clients.zonal.CreateInstances(ctx, &computepb.CreateInstancesInstanceGroupManagerRequest{Project: g.project, Zone: g.zone,
			InstanceGroupManager: g.name, InstanceGroupManagersCreateInstancesRequestResource: body})
	}
	return p.done(ctx, fmt.Sprintf("creating instance %s in group %s", name, g), g, op, err)
}

// deleteInstance deletes the managed instance from the group, which lowers
// its targetSize; one gone or being deleted already is skipped.
func (p *Provider) deleteInstance(ctx context.Context, g ref, mi *computepb.ManagedInstance) error {
	url := "zones/" + zoneOf(mi) + "/instances/" + mi.GetName()
	var op *compute.Operation
	var err error
	if g.region != "" {
		op, err = p.clients.regional.DeleteInstances(ctx, &computepb.DeleteInstancesRegionInstanceGroupManagerRequest{Project: g.project, Region: g.region, InstanceGroupManager: g.name,
			RegionInstanceGroupManagersDeleteInstancesRequestResource: &computepb.RegionInstanceGroupManagersDeleteInstancesRequest{
				Instances: []string{url}, SkipInstancesOnValidationError: proto.Bool(true)}})
	} else {
		op, err = p.clients.zonal.DeleteInstances(ctx, &computepb.DeleteInstancesInstanceGroupManagerRequest{Project: g.project, Zone: g.zone, InstanceGroupManager: g.name,
			InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{
				Instances: []string{url}, SkipInstancesOnValidationError: proto.Bool(true)}})
	}
	return p.done(ctx, fmt.Sprintf("deleting instance %s of group %s", mi.GetName(), g), g, op, err)
}

// setTemplate makes the group create its new instances from the template.
func (p *Provider) setTemplate(ctx context.Context, g ref, url string) error {
	var op *compute.Operation
	var err error
	if g.region != "" {
		op, err = p.clients.regional.SetInstanceTemplate(ctx, &computepb.SetInstanceTemplateRegionInstanceGroupManagerRequest{Project: g.project, Region: g.region, InstanceGroupManager: g.name,
			RegionInstanceGroupManagersSetTemplateRequestResource: &computepb.RegionInstanceGroupManagersSetTemplateRequest{InstanceTemplate: proto.String(url)}})
	} else {
		op, err = p.clients.zonal.SetInstanceTemplate(ctx, &computepb.SetInstanceTemplateInstanceGroupManagerRequest{Project: g.project, Zone: g.zone, InstanceGroupManager: g.name,
			InstanceGroupManagersSetInstanceTemplateRequestResource: &computepb.InstanceGroupManagersSetInstanceTemplateRequest{InstanceTemplate: proto.String(url)}})
	}
	return p.done(ctx, fmt.Sprintf("setting the instance template of group %s to %s", g, url), g, op, err)
}

// done waits for the operation a request started to be DONE, through the
// operations wait method (Compute Engine answers it when the operation is
// done, or after two minutes), and turns its error into a refusal.
func (p *Provider) done(ctx context.Context, what string, g ref, op *compute.Operation, err error) error {
	if err != nil {
		return refusal(what, err)
	}
	o := op.Proto()
	for o.GetStatus() != computepb.Operation_DONE {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		switch {
		case o.GetZone() != "":
			o, err = p.clients.zoneOps.Wait(ctx, &computepb.WaitZoneOperationRequest{Project: g.project, Zone: lastSegment(o.GetZone()), Operation: o.GetName()})
		case o.GetRegion() != "":
			o, err = p.clients.regionOps.Wait(ctx, &computepb.WaitRegionOperationRequest{Project: g.project, Region: lastSegment(o.GetRegion()), Operation: o.GetName()})
		default:
			o, err = p.clients.globalOps.Wait(ctx, &computepb.WaitGlobalOperationRequest{Project: g.project, Operation: o.GetName()})
		}
		if err != nil {
			return refusal("waiting for "+what, err)
		}
	}
	if errs := o.GetError().GetErrors(); len(errs) > 0 {
		return attemptRefusal(what, errs)
	}
	return nil
}

// instanceURL reads a managed instance's instance URL:
// .../projects/P/zones/Z/instances/NAME.
var instanceURL = regexp.MustCompile(`projects/([^/]+)/zones/([^/]+)/instances/([^/]+)$`)

// zoneOf is the zone of a managed instance (a regional group's instances
// are zonal).
func zoneOf(mi *computepb.ManagedInstance) string {
	if m := instanceURL.FindStringSubmatch(mi.GetInstance()); m != nil {
		return m[2]
	}
	return ""
}

// machineOf describes a managed instance as a machine.
func (p *Provider) machineOf(ctx context.Context, pool string, g ref, mi *computepb.ManagedInstance) (*provider.Machine, error) {
	zone := zoneOf(mi)
	m := &provider.Machine{
		Name:       mi.GetName(),
		Pool:       pool,
		ProviderID: "gce://" + g.project + "/" + zone + "/" + mi.GetName(), // as cloud-provider-gcp writes it
		Zone:       zone,
		Capacity:   v1alpha1.CapacityOnDemand,
		State:      provider.StateLaunching,
	}
	if url := mi.GetVersion().GetInstanceTemplate(); url != "" {
		t, err := p.template(ctx, g.project, url)
		if err != nil {
			return nil, err
		}
		m.InstanceType, m.Image = t.machineType, t.image
		if t.spot {
			m.Capacity = v1alpha1.CapacitySpot
		}
	}
	switch {
	case leaving(mi):
		m.State = provider.StateDeleting
	case mi.GetInstanceStatus() == "" && len(mi.GetLastAttempt().GetErrors().GetErrors()) > 0:
		m.State = provider.StateFailed
		m.Message = attemptRefusal("creating instance "+mi.GetName()+" (the group keeps trying until it is deleted)", mi.GetLastAttempt().GetErrors().GetErrors()).Error()
	case mi.GetInstanceStatus() == "RUNNING":
		m.State = provider.StateRunning
	}
	if mi.GetInstanceStatus() != "" {
		// The managed instance does not say when it was made; the instance does.
		inst, err := p.clients.instances.Get(ctx, &computepb.GetInstanceRequest{Project: g.project, Zone: zone, Instance: mi.GetName()})
		if err != nil && !isNotFound(err) {
			return nil, refusal("reading instance "+mi.GetName(), err)
		}
		if at, perr := time.Parse(time.RFC3339, inst.GetCreationTimestamp()); err == nil && perr == nil {
			m.Created = at
		}
	}
	return m, nil
}

func lastSegment(url string) string {
	for i := len(url) - 1; i >= 0; i-- {
		if url[i] == '/' {
			return url[i+1:]
		}
	}
	return url
}
