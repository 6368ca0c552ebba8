package awsasg_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/awsasg"
	"github.com/sluice-dev/sluice/internal/provider/awsasg/mototest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Machines of a group over three zones are launched into the zone holding
// fewest of the group's instances, so six make two in each.
func TestLaunchesSpreadOverTheGroupsZones(t *testing.T) {
	m := mototest.Start(t)
	group := unique("asg-")
	m.Group(t, group, "m5.large", 6, mototest.WithSubnets(3))
	np := pool(unique("web-"), v1alpha1.AutoScalingGroup{Name: group})
	p := awsasg.New(m.EC2, m.ASG, clocktesting.NewFakeClock(time.Now()))
	zones := map[string]int{}
	for range 6 {
		machine, err := p.Create(context.Background(), np, provider.NewName(np.Name))
		if err != nil {
			t.Fatal(err)
		}
		zones[machine.Zone]++
	}
	if len(zones) != 3 || zones["us-east-1a"] != 2 || zones["us-east-1b"] != 2 || zones["us-east-1c"] != 2 {
		t.Errorf("machines by zone %v; want two in each of us-east-1a, b and c", zones)
	}
}

// When a zone has no capacity for the type, the same Create launches in the
// group's next zone, and later ones pass the zone over until the remembered
// refusal expires.
func TestAZoneWithoutCapacityIsPassedOver(t *testing.T) {
	m := mototest.Start(t)
	group := unique("asg-")
	m.Group(t, group, "m5.large", 6, mototest.WithSubnets(2))
	subnets, err := m.EC2.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	ec := &noCapacityIn{EC2: m.EC2, subnet: aws.ToString(subnets.Subnets[1].SubnetId)}
	clk := clocktesting.NewFakeClock(time.Now())
	p := awsasg.New(ec, m.ASG, clk)
	np := pool(unique("web-"), v1alpha1.AutoScalingGroup{Name: group})
	ctx := context.Background()

	// The first goes to the first subnet (both zones empty), the second to
	// the second, which refuses: it goes to the first too.
	for i := range 3 {
		machine, err := p.Create(ctx, np, provider.NewName(np.Name))
		if err != nil {
			t.Fatalf("Create %d: %v", i, err)
		}
		if machine.Zone != aws.ToString(subnets.Subnets[0].AvailabilityZone) {
			t.Errorf("machine %d in %s; want %s, the zone with capacity", i, machine.Zone, aws.ToString(subnets.Subnets[0].AvailabilityZone))
		}
	}
	if got := ec.count(); got != 1 {
		t.Errorf("the zone without capacity was asked %d times; want once, then passed over", got)
	}
	clk.Step(4 * time.Minute)
	if _, err := p.Create(ctx, np, provider.NewName(np.Name)); err != nil {
		t.Fatal(err)
	}
	if got := ec.count(); got != 2 {
		t.Errorf("the zone without capacity was asked %d times after the refusal expired; want 2", got)
	}
}

// noCapacityIn refuses every launch into one subnet as EC2 does when the
// zone has no capacity for the type: InsufficientInstanceCapacity (EC2 API
// reference, "Error codes for the Amazon EC2 API"; moto never runs out).
type noCapacityIn struct {
	awsasg.EC2
	subnet string

	mu      sync.Mutex
	refused int
}

func (n *noCapacityIn) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, opts ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	if aws.ToString(in.SubnetId) == n.subnet {
		n.mu.Lock()
		n.refused++
		n.mu.Unlock()
		return nil, &smithy.GenericAPIError{Code: "InsufficientInstanceCapacity", Fault: smithy.FaultServer,
			Message: "We currently do not have sufficient " + string(in.InstanceType) + " capacity in the Availability Zone you requested. Our system will be working on provisioning additional capacity."}
	}
	return n.EC2.RunInstances(ctx, in, opts...)
}

func (n *noCapacityIn) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.refused
}
