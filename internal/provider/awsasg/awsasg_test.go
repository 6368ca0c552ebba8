package awsasg_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/awsasg"
	"github.com/sluice-dev/sluice/internal/provider/awsasg/mototest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func pool(name string, groups ...v1alpha1.AutoScalingGroup) *v1alpha1.NodePool {
	return &v1alpha1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodePoolSpec{
		Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderAWSASG, AWS: &v1alpha1.AWSProviderSpec{AutoScalingGroups: groups}},
	}}
}

var seq atomic.Int64

// unique is a name no other test of this run uses.
func unique(prefix string) string {
	return fmt.Sprintf("%s%d-%d", prefix, time.Now().Unix(), seq.Add(1))
}

// oneGroup is the package's moto with a new group of m5.large (max 3) and a
// pool of its own over it.
func oneGroup(t *testing.T) (m *mototest.Server, group string, np *v1alpha1.NodePool) {
	t.Helper()
	m = mototest.Start(t)
	group = unique("asg-")
	m.Group(t, group, "m5.large", 3)
	return m, group, pool(unique("web-"), v1alpha1.AutoScalingGroup{Name: group})
}

var providerID = regexp.MustCompile(`^aws:///us-east-1[a-f]/i-[0-9a-f]+$`)

// Create launches one instance from the group's launch template, tags it
// with the machine's name, attaches it (desired 0 -> 1), and asking again by
// the same name returns the same machine: no second instance, desired 1.
func TestCreateIsIdempotentByName(t *testing.T) {
	m, group, np := oneGroup(t)
	p := awsasg.New(m.EC2, m.ASG, clocktesting.NewFakeClock(time.Now()))
	web := np.Name
	name := provider.NewName(web)

	first, err := p.Create(context.Background(), np, name)
	if err != nil {
		t.Fatal(err)
	}
	if first.Name != name || first.Pool != web || first.InstanceType != "m5.large" || !providerID.MatchString(first.ProviderID) {
		t.Errorf("machine %+v; want %s of pool %s, m5.large, a providerID like aws:///us-east-1a/i-…", first, name, web)
	}
	again, err := p.Create(context.Background(), np, name)
	if err != nil {
		t.Fatal(err)
	}
	if again.ProviderID != first.ProviderID {
		t.Errorf("asked again by name: %s; want the same machine %s", again.ProviderID, first.ProviderID)
	}
	if insts := m.Tagged(t, name); len(insts) != 1 {
		t.Errorf("%d instances named %s; want 1", len(insts), name)
	}
	desired, members := m.Desired(t, group)
	if desired != 1 || len(members) != 1 || !strings.HasSuffix(first.ProviderID, "/"+members[0]) {
		t.Errorf("group %s: desired %d, instances %v; want desired 1 holding %s", group, desired, members, first.ProviderID)
	}
	got, err := p.Get(context.Background(), name)
	if err != nil || got.ProviderID != first.ProviderID {
		t.Errorf("Get(%s) = %+v, %v; want %s", name, got, err, first.ProviderID)
	}
	list, err := p.List(context.Background(), web)
	if err != nil || len(list) != 1 || list[0].Name != name {
		t.Errorf("List(%s) = %v, %v; want the one machine", web, list, err)
	}
}

// A controller killed after the launch and before the attach asks again by
// the same name: the instance is found by its tag and attached, once.
func TestCreateFinishesAnAttachCutShort(t *testing.T) {
	m, group, np := oneGroup(t)
	asg := &failingAttach{AutoScaling: m.ASG}
	asg.fail.Store(1)
	p := awsasg.New(m.EC2, asg, clocktesting.NewFakeClock(time.Now()))
	name := provider.NewName("web")

	if _, err := p.Create(context.Background(), np, name); err == nil {
		t.Fatal("Create succeeded with the attach failing")
	}
	if desired, members := m.Desired(t, group); desired != 0 || len(members) != 0 {
		t.Fatalf("after a failed attach: desired %d, instances %v; want 0 and none", desired, members)
	}
	machine, err := p.Create(context.Background(), np, name)
	if err != nil {
		t.Fatal(err)
	}
	if insts := m.Tagged(t, name); len(insts) != 1 {
		t.Errorf("%d instances named %s; want 1 (the first launch, attached now)", len(insts), name)
	}
	if desired, members := m.Desired(t, group); desired != 1 || len(members) != 1 || !strings.HasSuffix(machine.ProviderID, "/"+members[0]) {
		t.Errorf("group: desired %d, instances %v; want desired 1 holding %s", desired, members, machine.ProviderID)
	}
}

// Delete terminates the instance in its group and lowers the desired
// capacity, so the group does not replace it; deleting it again, or a
// machine never made, is no error (moto answers a repeated
// TerminateInstanceInAutoScalingGroup with a 500: the provider must not
// send one).
func TestDeleteTerminatesInTheGroupAndLowersDesired(t *testing.T) {
	m, group, np := oneGroup(t)
	p := awsasg.New(m.EC2, m.ASG, clocktesting.NewFakeClock(time.Now()))
	web := np.Name
	keep, gone := provider.NewName(web), provider.NewName(web)
	for _, n := range []string{keep, gone} {
		if _, err := p.Create(context.Background(), np, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	if desired, members := m.Desired(t, group); desired != 1 || len(members) != 1 {
		t.Errorf("after deleting one of two: desired %d, instances %v; want 1 and 1", desired, members)
	}
	if _, err := p.Get(context.Background(), gone); !provider.IsNotFound(err) {
		t.Errorf("Get of a deleted machine: %v; want not found", err)
	}
	for _, n := range []string{gone, provider.NewName("never")} {
		if err := p.Delete(context.Background(), n); err != nil {
			t.Errorf("Delete(%s) of a machine that is not there: %v", n, err)
		}
	}
	if list, err := p.List(context.Background(), web); err != nil || len(list) != 1 || list[0].Name != keep {
		t.Errorf("List(%s) = %v, %v; want only %s", web, list, err, keep)
	}
}

// A machine launched but never attached (its Create cut short) is deleted
// without touching the group's desired capacity.
func TestDeleteOfAnUnattachedMachineLeavesTheGroupAlone(t *testing.T) {
	m, group, np := oneGroup(t)
	asg := &failingAttach{AutoScaling: m.ASG}
	asg.fail.Store(1)
	p := awsasg.New(m.EC2, asg, clocktesting.NewFakeClock(time.Now()))
	name := provider.NewName(np.Name)
	if _, err := p.Create(context.Background(), np, name); err == nil {
		t.Fatal("Create succeeded with the attach failing")
	}
	if err := p.Delete(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if insts := m.Tagged(t, name); len(insts) != 0 && insts[0].State.Name != "shutting-down" {
		t.Errorf("instance %s still %s after Delete", name, insts[0].State.Name)
	}
	if desired, _ := m.Desired(t, group); desired != 0 {
		t.Errorf("desired %d after deleting an unattached machine; want 0", desired)
	}
}

// When the cloud has no capacity for the first group's instance type, the
// machine is made in the next group, and the first type is passed over
// until the remembered refusal expires.
func TestInsufficientCapacityFallsBackToTheNextGroup(t *testing.T) {
	m := mototest.Start(t)
	scarce, plenty := unique("asg-"), unique("asg-")
	m.Group(t, scarce, "m5.large", 3)
	m.Group(t, plenty, "m5.xlarge", 3)
	ec := &noCapacityFor{EC2: m.EC2, instanceType: "c5.large"}
	clk := clocktesting.NewFakeClock(time.Now())
	p := awsasg.New(ec, m.ASG, clk)
	np := pool("web", v1alpha1.AutoScalingGroup{Name: scarce, InstanceType: "c5.large"}, v1alpha1.AutoScalingGroup{Name: plenty, InstanceType: "m5.xlarge"})

	for i := range 2 {
		machine, err := p.Create(context.Background(), np, provider.NewName("web"))
		if err != nil {
			t.Fatal(err)
		}
		if machine.InstanceType != "m5.xlarge" {
			t.Errorf("machine %d is %s; want m5.xlarge from the second group", i, machine.InstanceType)
		}
	}
	if got := ec.refused.Load(); got != 1 {
		t.Errorf("c5.large asked for %d times in a row; want 1 (then remembered as unavailable)", got)
	}
	clk.Step(4 * time.Minute)
	if _, err := p.Create(context.Background(), np, provider.NewName("web")); err != nil {
		t.Fatal(err)
	}
	if got := ec.refused.Load(); got != 2 {
		t.Errorf("c5.large asked for %d times after the refusal expired; want 2", got)
	}

	only := pool("web", v1alpha1.AutoScalingGroup{Name: scarce, InstanceType: "c5.large"})
	clk.Step(4 * time.Minute)
	_, err := p.Create(context.Background(), only, provider.NewName("web"))
	perr, ok := provider.AsError(err)
	if !ok || perr.Code != provider.CodeInsufficientCapacity || !perr.Retryable || !strings.Contains(perr.Message, "InsufficientInstanceCapacity") {
		t.Errorf("Create with no capacity anywhere: %v; want a retryable InsufficientCapacity with the cloud's code", err)
	}
}

// failingAttach fails AttachInstances as often as fail says, as a
// connection lost mid-request would.
type failingAttach struct {
	awsasg.AutoScaling
	fail atomic.Int32
}

func (f *failingAttach) AttachInstances(ctx context.Context, in *autoscaling.AttachInstancesInput, opts ...func(*autoscaling.Options)) (*autoscaling.AttachInstancesOutput, error) {
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("connection reset by peer")
	}
	return f.AutoScaling.AttachInstances(ctx, in, opts...)
}

// noCapacityFor refuses to launch one instance type as EC2 does when a zone
// has none left (moto never runs out).
type noCapacityFor struct {
	awsasg.EC2
	instanceType string
	refused      atomic.Int32
}

func (n *noCapacityFor) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, opts ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	if string(in.InstanceType) == n.instanceType {
		n.refused.Add(1)
		return nil, &smithy.GenericAPIError{Code: "InsufficientInstanceCapacity",
			Message: "We currently do not have sufficient " + n.instanceType + " capacity in the Availability Zone you requested (us-east-1a)."}
	}
	return n.EC2.RunInstances(ctx, in, opts...)
}

// A Node the pool had before sluice (its group launched the instance, no
// machine tag) is named by its providerID, and deleted through its group
// with the desired capacity lowered, like the machines sluice made.
func TestANodeTheGroupLaunchedIsDeletedByItsProviderID(t *testing.T) {
	m, group, _ := oneGroup(t)
	if _, err := m.ASG.SetDesiredCapacity(context.Background(), &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	_, members := m.Desired(t, group)
	if len(members) != 2 {
		t.Fatalf("the group launched %v; want 2 instances", members)
	}
	out, err := m.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: members[:1]})
	if err != nil || len(out.Reservations) == 0 {
		t.Fatalf("describing %s: %v", members[0], err)
	}
	zone := aws.ToString(out.Reservations[0].Instances[0].Placement.AvailabilityZone)
	node := &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///" + zone + "/" + members[0]}}

	p := awsasg.New(m.EC2, m.ASG, clocktesting.NewFakeClock(time.Now()))
	name := p.NameOf(node)
	if name != "aws-instance/"+members[0] {
		t.Fatalf("NameOf(%s) = %q; want aws-instance/%s", node.Spec.ProviderID, name, members[0])
	}
	if got, err := p.Get(context.Background(), name); err != nil || got.ProviderID != node.Spec.ProviderID || got.Name != name {
		t.Errorf("Get(%s) = %+v, %v; want the group's instance", name, got, err)
	}
	if err := p.Delete(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if desired, members := m.Desired(t, group); desired != 1 || len(members) != 1 {
		t.Errorf("after deleting one of the group's own two: desired %d, instances %v; want 1 and 1", desired, members)
	}
}

// Only an EC2 instance's providerID names a machine.
func TestNameOfParsesProviderIDsStrictly(t *testing.T) {
	p := awsasg.New(nil, nil, clocktesting.NewFakeClock(time.Now()))
	for id, want := range map[string]string{
		"aws:///us-east-1a/i-0abc123def4567890":     "aws-instance/i-0abc123def4567890",
		"aws:///eu-central-1b/i-12345678":           "aws-instance/i-12345678",
		"aws:///us-gov-west-1a/i-0123456789abcdef0": "aws-instance/i-0123456789abcdef0",
		"aws://us-east-1a/i-0abc123def4567890":      "",
		"aws:///i-0abc123def4567890":                "",
		"aws:///us-east-1a/i-0ABC123DEF4567890":     "",
		"aws:///us-east-1a/i-0abc/extra":            "",
		"kwok://web-abcde":                          "",
		"azure:///subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/virtualMachineScaleSets/z/virtualMachines/0": "",
		"": "",
	} {
		if got := p.NameOf(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: id}}); got != want {
			t.Errorf("NameOf(%q) = %q; want %q", id, got, want)
		}
	}
}

// Deleting a machine of a group at its MinSize is refused for good, saying
// to lower MinSize: Auto Scaling will not lower the desired capacity below
// it (moto 5.2.1 does not check, so the refusal is the one Auto Scaling
// sends; see errors_test.go).
func TestDeleteAtTheGroupsMinSizeSaysToLowerIt(t *testing.T) {
	m, _, np := oneGroup(t)
	p := awsasg.New(m.EC2, &atMinSize{AutoScaling: m.ASG}, clocktesting.NewFakeClock(time.Now()))
	name := provider.NewName(np.Name)
	if _, err := p.Create(context.Background(), np, name); err != nil {
		t.Fatal(err)
	}
	err := p.Delete(context.Background(), name)
	perr, ok := provider.AsError(err)
	if !ok || perr.Code != awsasg.CodeMinSizeReached || perr.Retryable || !strings.Contains(perr.Message, "lower the Auto Scaling group's MinSize") {
		t.Errorf("Delete at MinSize: %v; want a %s that is not retryable and says to lower MinSize", err, awsasg.CodeMinSizeReached)
	}
	if insts := m.Tagged(t, name); len(insts) != 1 || insts[0].State.Name != "running" {
		t.Errorf("the machine's instance after a refused Delete: %v; want it running", insts)
	}
}

// atMinSize refuses to lower the desired capacity as a group at its
// MinSize does.
type atMinSize struct{ awsasg.AutoScaling }

func (a *atMinSize) TerminateInstanceInAutoScalingGroup(ctx context.Context, in *autoscaling.TerminateInstanceInAutoScalingGroupInput, opts ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error) {
	if aws.ToBool(in.ShouldDecrementDesiredCapacity) {
		return nil, &smithy.GenericAPIError{Code: "ValidationError", Fault: smithy.FaultClient,
			Message: "Currently, desiredSize equals minSize (1). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size."}
	}
	return a.AutoScaling.TerminateInstanceInAutoScalingGroup(ctx, in, opts...)
}
