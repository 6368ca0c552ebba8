package awsasg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/awsasg"
	"github.com/sluice-dev/sluice/internal/provider/awsasg/mototest"
	"github.com/sluice-dev/sluice/internal/provider/providertest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// The aws-asg provider passes the suite every provider must, against moto.
// moto cannot be told to refuse a launch or to lose an answer, so a wrapper
// of the EC2 API does both in front of it.
func TestConformance(t *testing.T) {
	m := mototest.Start(t)
	images, err := m.EC2.DescribeImages(context.Background(), &ec2.DescribeImagesInput{})
	if err != nil || len(images.Images) < 2 {
		t.Fatalf("moto's images: %v", err)
	}
	providertest.Run(t, providertest.Harness{
		Registration: awsasg.Registration,
		New:          func(t *testing.T) *providertest.Cloud { return conformanceCloud(t, m) },
		NoToken: "moto 5.2.1 keeps a RunInstances ClientToken on the instance (moto/ec2/models/instances.py) but launches again when it is repeated; " +
			"aws-asg finds a machine by its sluice.dev/machine tag instead",
		// The first is mototest.Group's launch template's.
		Images:   [2]string{aws.ToString(images.Images[0].ImageId), aws.ToString(images.Images[1].ImageId)},
		BadImage: "AKSUbuntu-2204gen2containerd-202611.01.0",
	})
}

// ec2Refusals are EC2's refusals of RunInstances as its API reference's
// error codes page names them
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html),
// with the messages EC2 sends.
var ec2Refusals = map[string]*smithy.GenericAPIError{
	provider.CodeInsufficientCapacity: {Code: "InsufficientInstanceCapacity", Fault: smithy.FaultServer,
		Message: "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a). " +
			"Our system will be working on provisioning additional capacity. You can currently get m5.large capacity by not specifying an Availability Zone in your request or choosing us-east-1b, us-east-1c."},
	provider.CodeQuotaExceeded: {Code: "VcpuLimitExceeded", Fault: smithy.FaultClient,
		Message: "You have requested more vCPU capacity than your current vCPU limit of 32 allows for the instance bucket that the specified instance type belongs to. " +
			"Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."},
	provider.CodeThrottled: {Code: "RequestLimitExceeded", Fault: smithy.FaultServer, Message: "Request limit exceeded."},
}

// conformanceCloud is a group of moto's (AL2023 user data, so that the
// kubelet's flags can be read back) and two pools over it.
func conformanceCloud(t *testing.T, m *mototest.Server) *providertest.Cloud {
	group := unique("asg-")
	m.Group(t, group, "m5.large", 10, mototest.WithNodeLabels(map[string]string{"team": "conformance"}))
	ec := &conformanceEC2{EC2: m.EC2}
	np := pool(unique("web-"), v1alpha1.AutoScalingGroup{Name: group})
	return &providertest.Cloud{
		Provider: awsasg.New(ec, m.ASG, clocktesting.NewFakeClock(time.Now())),
		Pool:     np,
		Other:    pool(unique("batch-"), v1alpha1.AutoScalingGroup{Name: group}),
		Foreign: func(t *testing.T) {
			desired, _ := m.Desired(t, group)
			if _, err := m.ASG.SetDesiredCapacity(context.Background(), &autoscaling.SetDesiredCapacityInput{
				AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(desired + 1)}); err != nil {
				t.Fatal(err)
			}
		},
		Refuse: func(t *testing.T, code string) *v1alpha1.NodePool {
			refusal, ok := ec2Refusals[code]
			if !ok {
				t.Fatalf("no EC2 refusal for %s", code)
			}
			ec.next(func(c *conformanceEC2) { c.refuse = refusal })
			return np
		},
		LoseAnswer: func(*testing.T) { ec.next(func(c *conformanceEC2) { c.lose = true }) },
		TokenOnly:  func(*testing.T) { ec.next(func(c *conformanceEC2) { c.hideNames = true }) },
		Taints: func(t *testing.T, machine *provider.Machine) []corev1.Taint {
			id := machine.ProviderID[strings.LastIndex(machine.ProviderID, "/")+1:]
			_, taints, err := m.Kubelet(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			return taints
		},
		Count: func(t *testing.T) int { return len(groupInstances(t, m, group)) },
		// moto keeps no record of a reboot (it sets the instance's state
		// to running, which it is), so the wrapper counts the reboots moto
		// accepted.
		Restarts: func(_ *testing.T, machine *provider.Machine) int {
			return ec.rebooted(machine.ProviderID[strings.LastIndex(machine.ProviderID, "/")+1:])
		},
	}
}

// groupInstances are the instances, not terminated, that the group holds
// or that were launched for it (an instance is attached once running).
func groupInstances(t *testing.T, m *mototest.Server, group string) map[string]bool {
	t.Helper()
	_, members := m.Desired(t, group)
	ids := map[string]bool{}
	for _, id := range members {
		ids[id] = true
	}
	out, err := m.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + contract.TagAutoscalingGroup), Values: []string{group}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			ids[aws.ToString(i.InstanceId)] = true
		}
	}
	return ids
}

// conformanceEC2 is moto's EC2 with what moto cannot be told to do: refuse
// the next launch, carry it out and lose its answer, or find no instance by
// its machine tag; and what it does not keep: the reboots it accepted.
type conformanceEC2 struct {
	awsasg.EC2
	mu        sync.Mutex
	refuse    error
	lose      bool
	hideNames bool
	reboots   map[string]int // by instance ID
}

func (c *conformanceEC2) next(change func(*conformanceEC2)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	change(c)
}

func (c *conformanceEC2) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, opts ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	c.mu.Lock()
	refuse, lose := c.refuse, c.lose
	c.refuse, c.lose = nil, false
	c.mu.Unlock()
	if refuse != nil {
		return nil, refuse
	}
	out, err := c.EC2.RunInstances(ctx, in, opts...)
	if lose && err == nil {
		return nil, errors.New("read tcp 127.0.0.1:41234->127.0.0.1:5000: read: connection reset by peer")
	}
	return out, err
}

func (c *conformanceEC2) RebootInstances(ctx context.Context, in *ec2.RebootInstancesInput, opts ...func(*ec2.Options)) (*ec2.RebootInstancesOutput, error) {
	out, err := c.EC2.RebootInstances(ctx, in, opts...)
	if err == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.reboots == nil {
			c.reboots = map[string]int{}
		}
		for _, id := range in.InstanceIds {
			c.reboots[id]++
		}
	}
	return out, err
}

func (c *conformanceEC2) rebooted(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reboots[id]
}

func (c *conformanceEC2) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	c.mu.Lock()
	hide := c.hideNames
	c.mu.Unlock()
	for _, f := range in.Filters {
		if hide && aws.ToString(f.Name) == "tag:"+contract.TagMachine {
			return &ec2.DescribeInstancesOutput{}, nil
		}
	}
	return c.EC2.DescribeInstances(ctx, in, opts...)
}
