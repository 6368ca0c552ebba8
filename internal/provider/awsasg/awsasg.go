// Package awsasg is the aws-asg provider: a pool's machines are EC2
// instances in the pool's Auto Scaling groups, made, found and removed
// through the EC2 and Auto Scaling APIs with the AWS SDK for Go v2.
//
// A machine is named by sluice before it is asked for (see
// provider.Provider.Create) and the name is written on the instance as the
// tag sluice.dev/machine, which is how every later call finds it: Create
// first looks the name up and launches nothing when the instance is there,
// so a controller killed between its request and its record asks again
// without making a second machine. (EC2's ClientToken gives the same promise
// for 24 h; moto does not keep it, and the tag lookup does not depend on it.)
// A new instance is launched from the group's own launch template into one of
// its subnets, then attached to the group once it is running (by the Create
// or Get that first sees it so), which raises the group's desired capacity
// by one; deleting it terminates it in the group with the desired
// capacity lowered by one, so the group never replaces what sluice removed.
package awsasg

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Namer    = (*Provider)(nil)
	_ provider.Rebooter = (*Provider)(nil)
)

// EC2 is the part of the EC2 API the provider calls (*ec2.Client has it).
type EC2 interface {
	RunInstances(context.Context, *ec2.RunInstancesInput, ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	RebootInstances(context.Context, *ec2.RebootInstancesInput, ...func(*ec2.Options)) (*ec2.RebootInstancesOutput, error)
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeLaunchTemplateVersions(context.Context, *ec2.DescribeLaunchTemplateVersionsInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error)
}

// AutoScaling is the part of the Auto Scaling API the provider calls
// (*autoscaling.Client has it).
type AutoScaling interface {
	DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
	DescribeAutoScalingInstances(context.Context, *autoscaling.DescribeAutoScalingInstancesInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingInstancesOutput, error)
	AttachInstances(context.Context, *autoscaling.AttachInstancesInput, ...func(*autoscaling.Options)) (*autoscaling.AttachInstancesOutput, error)
	TerminateInstanceInAutoScalingGroup(context.Context, *autoscaling.TerminateInstanceInAutoScalingGroupInput, ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error)
}

// unavailableFor is how long an instance type in a zone the cloud had no
// capacity for is passed over (as Karpenter's ICE cache does).
const unavailableFor = 3 * time.Minute

// Provider makes a pool's machines in its Auto Scaling groups. Build it
// with New.
type Provider struct {
	ec2   EC2
	asg   AutoScaling
	clock clock.PassiveClock

	mu          sync.Mutex
	unavailable map[string]time.Time // instance type/zone -> until
}

// New returns a provider calling the two APIs (clients built from the SDK's
// default configuration chain in a cluster: IRSA or Pod Identity).
func New(ec2c EC2, asg AutoScaling, clk clock.PassiveClock) *Provider {
	return &Provider{ec2: ec2c, asg: asg, clock: clk, unavailable: map[string]time.Time{}}
}

// Create launches the machine named name in one of the pool's groups, or
// returns it when it is already there. Auto Scaling attaches only a running
// instance, so a machine still pending is returned Launching and attached by
// a later Create or Get of the same name (see settle).
func (p *Provider) Create(ctx context.Context, pool *v1alpha1.NodePool, name string) (*provider.Machine, error) {
	spec := pool.Spec.Provider.AWS
	if spec == nil || len(spec.AutoScalingGroups) == 0 {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: "provider.aws.autoScalingGroups is empty: name the pool's Auto Scaling groups"}
	}
	if name == "" {
		name = provider.NewName(pool.Name)
	}
	inst, err := p.find(ctx, name)
	if err != nil {
		return nil, err
	}
	if inst == nil {
		if inst, err = p.launch(ctx, pool, name); err != nil {
			return nil, err
		}
		// RunInstances answers "pending"; the instance may be running by now.
		if again, err := p.find(ctx, name); err == nil && again != nil {
			inst = again
		}
	}
	return p.settle(ctx, inst)
}

// launch runs one instance in the first of the pool's groups that can take
// it, trying each group's offers in turn (see offers): a type and zone the
// cloud had no capacity for is passed over for unavailableFor, and the next
// offer is tried in the same call.
func (p *Provider) launch(ctx context.Context, pool *v1alpha1.NodePool, name string) (*ec2types.Instance, error) {
	var lastRefusal error
	attempt := 0
	for _, g := range p.candidates(pool) {
		group, err := p.group(ctx, g.Name)
		if err != nil {
			return nil, err
		}
		offers, err := p.offers(ctx, pool, g, group)
		if err != nil {
			return nil, err
		}
		for _, o := range offers {
			if p.unavailableNow(o.key) {
				continue
			}
			inst, err := p.run(ctx, pool, name, attempt, g, o)
			attempt++
			if err == nil {
				return inst, nil
			}
			if perr, ok := provider.AsError(err); !ok || perr.Code != provider.CodeInsufficientCapacity {
				return nil, err
			}
			p.markUnavailable(o.key)
			lastRefusal = err
		}
	}
	if lastRefusal != nil {
		return nil, lastRefusal
	}
	return nil, &provider.Error{Code: provider.CodeInsufficientCapacity, Retryable: true,
		Message: "every instance type and zone of the pool's Auto Scaling groups had no capacity in the last " + unavailableFor.String()}
}

// candidates are the pool's groups whose instance type the template allows,
// in the pool's order.
func (p *Provider) candidates(pool *v1alpha1.NodePool) []v1alpha1.AutoScalingGroup {
	allowed := allowedTypes(pool)
	var out []v1alpha1.AutoScalingGroup
	for _, g := range pool.Spec.Provider.AWS.AutoScalingGroups {
		if g.InstanceType != "" && len(allowed) > 0 && !slices.Contains(allowed, g.InstanceType) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func allowedTypes(pool *v1alpha1.NodePool) []string {
	if pool.Spec.Template == nil {
		return nil
	}
	return pool.Spec.Template.InstanceTypes
}

func (p *Provider) unavailableNow(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.unavailable[key]
	return ok && p.clock.Now().Before(until)
}

func (p *Provider) markUnavailable(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unavailable[key] = p.clock.Now().Add(unavailableFor)
}

// group reads an Auto Scaling group.
func (p *Provider) group(ctx context.Context, name string) (*astypes.AutoScalingGroup, error) {
	out, err := p.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		return nil, refusal(fmt.Sprintf("reading Auto Scaling group %s", name), err)
	}
	if len(out.AutoScalingGroups) == 0 {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf("Auto Scaling group %s does not exist in this account and region", name)}
	}
	return &out.AutoScalingGroups[0], nil
}

// offer is one way to launch a group's instance: a launch template's
// version, an instance type ("" for the template's own) and a subnet.
type offer struct {
	template     *astypes.LaunchTemplateSpecification
	version      *ec2types.LaunchTemplateVersion
	instanceType string
	subnet, zone string
	key          string // in the unavailable map: instance type/zone
}

// offers are the ways to launch the group's instance, in the order to try
// them: its instance types (the pool's group's own; else a mixed instances
// policy's overrides, in their order, that the pool's template allows; else
// the launch template's), each in its subnets from the zone with the fewest
// of the group's instances to the most, which is the balance the group's
// AZRebalance keeps (the group's own launches would go there too).
func (p *Provider) offers(ctx context.Context, pool *v1alpha1.NodePool, g v1alpha1.AutoScalingGroup, group *astypes.AutoScalingGroup) ([]offer, error) {
	base := group.LaunchTemplate
	var overrides []astypes.LaunchTemplateOverrides
	if mip := group.MixedInstancesPolicy; mip != nil && mip.LaunchTemplate != nil {
		if base == nil {
			base = mip.LaunchTemplate.LaunchTemplateSpecification
		}
		overrides = mip.LaunchTemplate.Overrides
	}
	if base == nil {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate,
			Message: fmt.Sprintf("Auto Scaling group %s has no launch template (launch configurations are not supported)", g.Name)}
	}
	choices, err := launchChoices(pool, g, base, overrides)
	if err != nil {
		return nil, err
	}
	subnets, err := p.subnets(ctx, group)
	if err != nil {
		return nil, err
	}
	versions := map[string]*ec2types.LaunchTemplateVersion{}
	var out []offer
	for _, c := range choices {
		id := aws.ToString(c.template.LaunchTemplateId) + "|" + aws.ToString(c.template.LaunchTemplateName) + "|" + aws.ToString(c.template.Version)
		if versions[id] == nil {
			if versions[id], err = p.templateVersion(ctx, c.template); err != nil {
				return nil, err
			}
		}
		v := versions[id]
		typ := c.instanceType
		if typ == "" && v.LaunchTemplateData != nil {
			typ = string(v.LaunchTemplateData.InstanceType)
		}
		if typ == "" {
			typ = "group/" + g.Name
		}
		for _, sn := range subnets {
			out = append(out, offer{template: c.template, version: v, instanceType: c.instanceType, subnet: sn.id, zone: sn.zone, key: typ + "/" + sn.zone})
		}
	}
	return out, nil
}

// choice is a launch template and the instance type to launch it with (""
// for the template's own).
type choice struct {
	template     *astypes.LaunchTemplateSpecification
	instanceType string
}

// launchChoices are the launch templates and instance types the group may
// launch, in order: the pool's group's own type; else a mixed instances
// policy's overrides that the pool's template allows, each with its own
// launch template when it names one; else the launch template as it is.
func launchChoices(pool *v1alpha1.NodePool, g v1alpha1.AutoScalingGroup, base *astypes.LaunchTemplateSpecification, overrides []astypes.LaunchTemplateOverrides) ([]choice, error) {
	if g.InstanceType != "" {
		return []choice{{base, g.InstanceType}}, nil
	}
	if !slices.ContainsFunc(overrides, func(o astypes.LaunchTemplateOverrides) bool { return o.InstanceType != nil }) {
		return []choice{{base, ""}}, nil
	}
	allowed := allowedTypes(pool)
	var choices []choice
	var listed []string
	for _, o := range overrides {
		t := aws.ToString(o.InstanceType)
		if t == "" { // an override by instance requirements: EC2 Fleet's to choose
			continue
		}
		listed = append(listed, t)
		if len(allowed) > 0 && !slices.Contains(allowed, t) {
			continue
		}
		lt := base
		if o.LaunchTemplateSpecification != nil {
			lt = o.LaunchTemplateSpecification
		}
		choices = append(choices, choice{lt, t})
	}
	if len(choices) == 0 {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf(
			"none of Auto Scaling group %s's instance types (%s) is in the pool's template.instanceTypes (%s)", g.Name, strings.Join(listed, ", "), strings.Join(allowed, ", "))}
	}
	return choices, nil
}

type subnet struct{ id, zone string }

// subnets are the group's subnets (VPCZoneIdentifier), those in the zones
// holding fewest of its instances first; one with no ID when it names none
// (EC2 then picks the default subnet).
func (p *Provider) subnets(ctx context.Context, group *astypes.AutoScalingGroup) ([]subnet, error) {
	var ids []string
	for _, id := range strings.Split(aws.ToString(group.VPCZoneIdentifier), ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return []subnet{{}}, nil
	}
	out, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: ids})
	if err != nil {
		return nil, refusal("reading the subnets of Auto Scaling group "+aws.ToString(group.AutoScalingGroupName), err)
	}
	zones := map[string]string{}
	for _, s := range out.Subnets {
		zones[aws.ToString(s.SubnetId)] = aws.ToString(s.AvailabilityZone)
	}
	in := map[string]int{}
	for _, i := range group.Instances {
		if st := string(i.LifecycleState); st == string(astypes.LifecycleStateInService) || strings.HasPrefix(st, "Pending") {
			in[aws.ToString(i.AvailabilityZone)]++
		}
	}
	subnets := make([]subnet, 0, len(ids))
	for _, id := range ids {
		subnets = append(subnets, subnet{id: id, zone: zones[id]})
	}
	slices.SortStableFunc(subnets, func(a, b subnet) int { return in[a.zone] - in[b.zone] })
	return subnets, nil
}

// run launches the instance as the offer says. Each attempt of one Create
// has a token of its own: EC2 refuses a token used again with other
// parameters (IdempotentParameterMismatch).
func (p *Provider) run(ctx context.Context, pool *v1alpha1.NodePool, name string, attempt int, g v1alpha1.AutoScalingGroup, o offer) (*ec2types.Instance, error) {
	token := clientToken(name)
	if attempt > 0 {
		token = clientToken(fmt.Sprintf("%s-%d", name, attempt))
	}
	lt := o.template
	in := &ec2.RunInstancesInput{
		MinCount:    aws.Int32(1),
		MaxCount:    aws.Int32(1),
		ClientToken: aws.String(token),
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{
			LaunchTemplateId: lt.LaunchTemplateId, LaunchTemplateName: lt.LaunchTemplateName, Version: lt.Version,
		},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String(contract.TagMachine), Value: aws.String(name)},
			{Key: aws.String(contract.TagNodePool), Value: aws.String(pool.Name)},
			{Key: aws.String(contract.TagAutoscalingGroup), Value: aws.String(g.Name)},
		}}},
	}
	if lt.LaunchTemplateId != nil {
		in.LaunchTemplate.LaunchTemplateName = nil // EC2 takes one of the two
	}
	if v := o.version; v.VersionNumber != nil { // the version whose user data is read
		in.LaunchTemplate.Version = aws.String(strconv.FormatInt(*v.VersionNumber, 10))
	}
	if tainted, ok := withUnregisteredTaint(userDataOf(o.version.LaunchTemplateData)); ok {
		in.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(tainted)))
	}
	if o.instanceType != "" {
		in.InstanceType = ec2types.InstanceType(o.instanceType)
	}
	if o.subnet != "" {
		in.SubnetId = aws.String(o.subnet)
	}
	if pool.Spec.Template != nil && pool.Spec.Template.Image != "" {
		in.ImageId = aws.String(pool.Spec.Template.Image) // overrides the launch template's
	}
	if pool.Spec.Template != nil && pool.Spec.Template.Capacity == v1alpha1.CapacitySpot {
		in.InstanceMarketOptions = &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeSpot}
	}
	out, err := p.ec2.RunInstances(ctx, in)
	if err != nil {
		return nil, refusal(fmt.Sprintf("launching %s in Auto Scaling group %s (%s in %s)", name, g.Name, o.key[:strings.LastIndex(o.key, "/")], o.zone), err)
	}
	if len(out.Instances) != 1 {
		return nil, fmt.Errorf("launching %s: EC2 answered with %d instances, want 1", name, len(out.Instances))
	}
	return &out.Instances[0], nil
}

// settle describes the instance as a machine, attaching it first to the
// group it was launched for when it is running and in no group yet: the
// second half of a Create, done by whichever Create or Get first sees the
// instance running. Until then the machine is Launching.
func (p *Provider) settle(ctx context.Context, inst *ec2types.Instance) (*provider.Machine, error) {
	m := machineOf(inst)
	attached, err := p.attach(ctx, inst)
	if err != nil {
		return nil, err
	}
	if !attached && m.State == provider.StateRunning {
		m.State = provider.StateLaunching
	}
	return m, nil
}

// tagGroupName is the tag Auto Scaling puts on every instance of a group,
// the ones attached to it included.
const tagGroupName = "aws:autoscaling:groupName"

// maxClientToken is the longest ClientToken EC2 takes: "Constraints:
// Maximum 64 ASCII characters" (RunInstances, API reference).
const maxClientToken = 64

// clientToken is the launch's idempotency token, one per machine name: the
// name when it fits, else the name's beginning and a hash of all of it,
// which keeps two long names of one pool apart.
func clientToken(name string) string {
	if len(name) <= maxClientToken {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	const hashLen = 16
	return name[:maxClientToken-hashLen-1] + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// templateVersion reads the version of the launch template a group names
// ($Default when it names none), for its user data.
func (p *Provider) templateVersion(ctx context.Context, lt *astypes.LaunchTemplateSpecification) (*ec2types.LaunchTemplateVersion, error) {
	in := &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: lt.LaunchTemplateId, Versions: []string{"$Default"}}
	if lt.LaunchTemplateId == nil {
		in.LaunchTemplateName = lt.LaunchTemplateName
	}
	if v := aws.ToString(lt.Version); v != "" {
		in.Versions = []string{v}
	}
	what := aws.ToString(lt.LaunchTemplateId) + aws.ToString(in.LaunchTemplateName)
	out, err := p.ec2.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil {
		return nil, refusal(fmt.Sprintf("reading launch template %s version %s", what, in.Versions[0]), err)
	}
	if len(out.LaunchTemplateVersions) == 0 {
		return nil, &provider.Error{Code: provider.CodeInvalidTemplate, Message: fmt.Sprintf("launch template %s has no version %s", what, in.Versions[0])}
	}
	return &out.LaunchTemplateVersions[0], nil
}

// attach puts the instance in the group it was launched for, when it is
// running and in no group yet, and says whether it is in its group. Auto
// Scaling refuses to attach an instance that is not running (ValidationError;
// the user guide's "Attach EC2 instances to your Auto Scaling group" lists
// the running state among the requirements). Attaching raises the group's
// desired capacity by one. An instance sluice did not launch (no
// sluice.dev/asg tag) is left as it is.
func (p *Provider) attach(ctx context.Context, inst *ec2types.Instance) (bool, error) {
	want := tag(inst, contract.TagAutoscalingGroup)
	if want == "" || tag(inst, tagGroupName) != "" {
		return true, nil
	}
	if inst.State == nil || inst.State.Name != ec2types.InstanceStateNameRunning {
		return false, nil
	}
	id := aws.ToString(inst.InstanceId)
	out, err := p.asg.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return false, refusal("reading the group of instance "+id, err)
	}
	if len(out.AutoScalingInstances) > 0 {
		return true, nil
	}
	if _, err := p.asg.AttachInstances(ctx, &autoscaling.AttachInstancesInput{AutoScalingGroupName: aws.String(want), InstanceIds: []string{id}}); err != nil {
		return false, refusal(fmt.Sprintf("attaching instance %s (machine %s) to Auto Scaling group %s", id, tag(inst, contract.TagMachine), want), err)
	}
	return true, nil
}

// Delete terminates the machine, in its group with the desired capacity
// lowered by one; a machine already gone (or never made) is no error.
func (p *Provider) Delete(ctx context.Context, name string) error {
	inst, err := p.find(ctx, name)
	if err != nil || inst == nil {
		return err
	}
	id := aws.ToString(inst.InstanceId)
	out, err := p.asg.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return refusal("reading the group of instance "+id, err)
	}
	if len(out.AutoScalingInstances) > 0 {
		_, err = p.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(true)})
		if err != nil {
			return refusal(fmt.Sprintf("terminating instance %s (machine %s) in its group", id, name), err)
		}
		return nil
	}
	// Launched but never attached: no group counts it.
	if _, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		return refusal(fmt.Sprintf("terminating instance %s (machine %s)", id, name), err)
	}
	return nil
}

// Get returns the machine named name, attaching it to its group when it has
// become running since its Create (see settle).
func (p *Provider) Get(ctx context.Context, name string) (*provider.Machine, error) {
	inst, err := p.find(ctx, name)
	if err != nil {
		return nil, err
	}
	if inst == nil {
		return nil, fmt.Errorf("machine %s: %w", name, provider.ErrNotFound)
	}
	m, err := p.settle(ctx, inst)
	if perr, ok := provider.AsError(err); ok && !perr.Retryable {
		// The group will never take it (a MaxSize reached, say): the
		// controller deletes a failed machine and says why.
		m = machineOf(inst)
		m.State, m.Message = provider.StateFailed, perr.Error()
		return m, nil
	}
	return m, err
}

// Reboot asks EC2 to reboot the machine's instance in place
// (RebootInstances) and returns once EC2 took the request: "it only queues
// a request to reboot", and an instance that does not shut down cleanly
// within a few minutes is hard-rebooted (EC2 API reference). The instance,
// its volumes and its group membership stay. A machine that is unknown,
// terminated or shutting down, or whose instance EC2 no longer knows
// (InvalidInstanceID.NotFound, a termination between the lookup and the
// request), is provider.ErrNotFound: EC2 ignores a reboot of a terminated
// instance rather than refusing it, so it is never asked for one.
func (p *Provider) Reboot(ctx context.Context, name string) error {
	inst, err := p.find(ctx, name)
	if err != nil {
		return err
	}
	if inst == nil || inst.State != nil && inst.State.Name == ec2types.InstanceStateNameShuttingDown {
		return fmt.Errorf("machine %s: %w", name, provider.ErrNotFound)
	}
	id := aws.ToString(inst.InstanceId)
	if _, err := p.ec2.RebootInstances(ctx, &ec2.RebootInstancesInput{InstanceIds: []string{id}}); err != nil {
		if code, msg, ok := apiError(err); ok && code == codeInstanceNotFound {
			return fmt.Errorf("machine %s (instance %s): %s: %w", name, id, msg, provider.ErrNotFound)
		}
		return refusal(fmt.Sprintf("rebooting instance %s (machine %s)", id, name), err)
	}
	return nil
}

// List returns the pool's machines that are not terminated.
func (p *Provider) List(ctx context.Context, pool string) ([]*provider.Machine, error) {
	insts, err := p.describe(ctx, ec2types.Filter{Name: aws.String("tag:" + contract.TagNodePool), Values: []string{pool}})
	if err != nil {
		return nil, err
	}
	out := make([]*provider.Machine, 0, len(insts))
	for i := range insts {
		out = append(out, machineOf(&insts[i]))
	}
	return out, nil
}

// instancePrefix begins the machine name NameOf gives a Node sluice did not
// make (one its group launched): the provider finds it by instance ID.
const instancePrefix = "aws-instance/"

// providerIDPattern is an EKS Node's spec.providerID: aws:///<zone>/<id>
// (a zone, a Local Zone or a Wavelength Zone).
var providerIDPattern = regexp.MustCompile(`^aws:///([a-z0-9]+(-[a-z0-9]+)+)/(i-[0-9a-f]{8,17})$`)

// NameOf is the machine name of a Node on EC2: "aws-instance/<instance ID>"
// from its providerID, so that a Node the pool had before sluice (no
// machine tag) can be deleted through its group too; "" when the providerID
// is not an EC2 instance's. The controller prefers the machine name it noted
// on a Node it asked for (sluice.dev/machine).
func (p *Provider) NameOf(n *corev1.Node) string {
	m := providerIDPattern.FindStringSubmatch(n.Spec.ProviderID)
	if m == nil {
		return ""
	}
	return instancePrefix + m[3]
}

// find returns the instance tagged with the machine's name that is not
// terminated, or nil; a name NameOf gave is looked up by instance ID. An instance that terminated on its own (a spot
// reclaim, a launch that failed) is gone as one sluice deleted is: the
// controller asks again or gives up by its own rules.
func (p *Provider) find(ctx context.Context, name string) (*ec2types.Instance, error) {
	filter := ec2types.Filter{Name: aws.String("tag:" + contract.TagMachine), Values: []string{name}}
	if id, ok := strings.CutPrefix(name, instancePrefix); ok {
		filter = ec2types.Filter{Name: aws.String("instance-id"), Values: []string{id}}
	}
	insts, err := p.describe(ctx, filter)
	if err != nil || len(insts) == 0 {
		return nil, err
	}
	// Several only if a person launched copies by hand; the oldest is ours.
	slices.SortFunc(insts, func(a, b ec2types.Instance) int { return aws.ToTime(a.LaunchTime).Compare(aws.ToTime(b.LaunchTime)) })
	return &insts[0], nil
}

// describe lists the instances matching the filter that are not
// terminated, page by page.
func (p *Provider) describe(ctx context.Context, filter ec2types.Filter) ([]ec2types.Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter,
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}}}}
	var out []ec2types.Instance
	for {
		page, err := p.ec2.DescribeInstances(ctx, in)
		if err != nil {
			return nil, refusal("listing instances", err)
		}
		for _, r := range page.Reservations {
			out = append(out, r.Instances...)
		}
		if aws.ToString(page.NextToken) == "" {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

// machineOf describes an instance as a machine.
func machineOf(inst *ec2types.Instance) *provider.Machine {
	m := &provider.Machine{
		Name:         tag(inst, contract.TagMachine),
		Pool:         tag(inst, contract.TagNodePool),
		InstanceType: string(inst.InstanceType),
		Image:        aws.ToString(inst.ImageId),
		Capacity:     v1alpha1.CapacityOnDemand,
		Created:      aws.ToTime(inst.LaunchTime),
		State:        provider.StateLaunching,
	}
	if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		m.Capacity = v1alpha1.CapacitySpot
	}
	if inst.Placement != nil {
		m.Zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	m.ProviderID = fmt.Sprintf("aws:///%s/%s", m.Zone, aws.ToString(inst.InstanceId))
	if m.Name == "" { // launched by its group, not by sluice
		m.Name = instancePrefix + aws.ToString(inst.InstanceId)
	}
	if inst.State != nil {
		switch inst.State.Name {
		case ec2types.InstanceStateNameRunning:
			m.State = provider.StateRunning
		case ec2types.InstanceStateNameShuttingDown, ec2types.InstanceStateNameStopping, ec2types.InstanceStateNameStopped:
			m.State = provider.StateDeleting
		}
	}
	return m
}

func tag(inst *ec2types.Instance, key string) string {
	for _, t := range inst.Tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
