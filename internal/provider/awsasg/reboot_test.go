package awsasg_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/awsasg"
)

// A Node the group launched itself (no machine tag) is rebooted by the
// name NameOf gives it: RebootInstances of its instance, and of no other.
func TestANodeTheGroupLaunchedIsRebootedByItsProviderID(t *testing.T) {
	m, group, _ := oneGroup(t)
	if _, err := m.ASG.SetDesiredCapacity(context.Background(), &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	_, members := m.Desired(t, group)
	if len(members) != 2 {
		t.Fatalf("the group launched %v; want 2 instances", members)
	}
	rec := &recordingReboot{EC2: m.EC2}
	p := awsasg.New(rec, m.ASG, clocktesting.NewFakeClock(time.Now()))
	name := p.NameOf(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + members[1]}})

	if err := p.Reboot(context.Background(), name); err != nil {
		t.Fatalf("Reboot(%s): %v", name, err)
	}
	if got := rec.asked(); len(got) != 1 || !slices.Equal(got[0], []string{members[1]}) {
		t.Errorf("RebootInstances asked for %v; want once, for %s only", got, members[1])
	}
	if desired, after := m.Desired(t, group); desired != 2 || !slices.Equal(after, members) {
		t.Errorf("after the reboot the group holds %v (desired %d); want %v as before", after, desired, members)
	}
}

// An instance that DescribeInstances still lists but EC2 no longer knows
// when asked to reboot it (a read racing a termination) is not found:
// moto answers RebootInstances of an unknown ID InvalidInstanceID.NotFound,
// as EC2 does ("The specified instance does not exist", error codes).
func TestAnInstanceEC2NoLongerKnowsIsNotFound(t *testing.T) {
	m, _, np := oneGroup(t)
	name := provider.NewName(np.Name)
	if _, err := awsasg.New(m.EC2, m.ASG, clocktesting.NewFakeClock(time.Now())).Create(context.Background(), np, name); err != nil {
		t.Fatal(err)
	}
	stale := &staleDescribe{EC2: m.EC2, id: "i-0000000000000dead"}
	err := awsasg.New(stale, m.ASG, clocktesting.NewFakeClock(time.Now())).Reboot(context.Background(), name)
	if !provider.IsNotFound(err) {
		t.Fatalf("Reboot(%s) of an instance EC2 does not know = %v; want an error for which provider.IsNotFound is true", name, err)
	}
	if _, ok := provider.AsError(err); ok {
		t.Errorf("Reboot(%s) = %v; want not found, not a refusal", name, err)
	}
}

// A reboot EC2 refuses is the provider's refusal, with EC2's code read as
// for every other call: throttled past the SDK's retries is Throttled,
// retryable.
func TestARefusedRebootIsARefusal(t *testing.T) {
	m, _, np := oneGroup(t)
	name := provider.NewName(np.Name)
	if _, err := awsasg.New(m.EC2, m.ASG, clocktesting.NewFakeClock(time.Now())).Create(context.Background(), np, name); err != nil {
		t.Fatal(err)
	}
	throttled := &refusingReboot{EC2: m.EC2, err: &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded.", Fault: smithy.FaultServer}}
	err := awsasg.New(throttled, m.ASG, clocktesting.NewFakeClock(time.Now())).Reboot(context.Background(), name)
	if e, ok := provider.AsError(err); !ok || e.Code != provider.CodeThrottled || !e.Retryable {
		t.Errorf("Reboot(%s) refused for the request rate = %v; want a retryable provider.Error %s", name, err, provider.CodeThrottled)
	}
}

// recordingReboot is moto's EC2, noting the instance IDs of each
// RebootInstances.
type recordingReboot struct {
	awsasg.EC2
	mu  sync.Mutex
	ids [][]string
}

func (r *recordingReboot) RebootInstances(ctx context.Context, in *ec2.RebootInstancesInput, opts ...func(*ec2.Options)) (*ec2.RebootInstancesOutput, error) {
	r.mu.Lock()
	r.ids = append(r.ids, slices.Clone(in.InstanceIds))
	r.mu.Unlock()
	return r.EC2.RebootInstances(ctx, in, opts...)
}

func (r *recordingReboot) asked() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

// staleDescribe is moto's EC2 whose DescribeInstances answers each
// instance with the ID id, one moto never gave.
type staleDescribe struct {
	awsasg.EC2
	id string
}

func (s *staleDescribe) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	out, err := s.EC2.DescribeInstances(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	for i := range out.Reservations {
		for j := range out.Reservations[i].Instances {
			out.Reservations[i].Instances[j].InstanceId = aws.String(s.id)
		}
	}
	return out, nil
}

// refusingReboot is moto's EC2 refusing every RebootInstances with err.
type refusingReboot struct {
	awsasg.EC2
	err error
}

func (r *refusingReboot) RebootInstances(context.Context, *ec2.RebootInstancesInput, ...func(*ec2.Options)) (*ec2.RebootInstancesOutput, error) {
	return nil, r.err
}
