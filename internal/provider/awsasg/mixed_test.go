package awsasg_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/awsasg"
	"github.com/sluice-dev/sluice/internal/provider/awsasg/mototest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A group with a mixed instances policy launches the overrides' instance
// types, in their order, that the pool's template allows, each from its own
// launch template when it names one; a type without capacity is passed
// over for the next.
func TestAMixedInstancesGroupLaunchesItsOverrides(t *testing.T) {
	m := mototest.Start(t)
	ctx := context.Background()
	base, gpu := unique("lt-"), unique("lt-")
	ids := map[string]string{}
	for _, lt := range []string{base, gpu} {
		out, err := m.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(lt),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-03cf127a"), InstanceType: ec2types.InstanceTypeM5Large}})
		if err != nil {
			t.Fatal(err)
		}
		ids[lt] = aws.ToString(out.LaunchTemplate.LaunchTemplateId)
	}
	subnets, err := m.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	group := unique("asg-")
	if _, err := m.ASG.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(group), MinSize: aws.Int32(0), MaxSize: aws.Int32(5), DesiredCapacity: aws.Int32(0),
		VPCZoneIdentifier: subnets.Subnets[0].SubnetId,
		MixedInstancesPolicy: &astypes.MixedInstancesPolicy{LaunchTemplate: &astypes.LaunchTemplate{
			LaunchTemplateSpecification: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String(base), Version: aws.String("$Latest")},
			Overrides: []astypes.LaunchTemplateOverrides{
				{InstanceType: aws.String("r5.large")},
				{InstanceType: aws.String("g5.xlarge"), LaunchTemplateSpecification: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String(gpu), Version: aws.String("$Latest")}},
				{InstanceType: aws.String("m5.xlarge")},
			},
		}},
	}); err != nil {
		t.Fatal(err)
	}
	ec := &noCapacityFor{EC2: m.EC2}
	p := awsasg.New(ec, m.ASG, clocktesting.NewFakeClock(time.Now()))
	np := pool(unique("web-"), v1alpha1.AutoScalingGroup{Name: group})
	np.Spec.Template = &v1alpha1.NodeTemplate{InstanceTypes: []string{"m5.xlarge", "g5.xlarge"}}

	launch := func(wantType, wantTemplate string) {
		t.Helper()
		name := provider.NewName(np.Name)
		machine, err := p.Create(ctx, np, name)
		if err != nil {
			t.Fatal(err)
		}
		insts := m.Tagged(t, name)
		if machine.InstanceType != wantType || len(insts) != 1 || tagOf(insts[0], "aws:ec2launchtemplate:id") != ids[wantTemplate] {
			t.Errorf("machine %s of %s (launch template %s); want %s of %s", name, machine.InstanceType, tagOf(insts[0], "aws:ec2launchtemplate:id"), wantType, ids[wantTemplate])
		}
	}
	// r5.large is the group's but not the pool's; g5.xlarge comes first.
	launch("g5.xlarge", gpu)
	ec.instanceType = "g5.xlarge"
	launch("m5.xlarge", base)
	if ec.refused.Load() != 1 {
		t.Errorf("g5.xlarge refused %d times; want once", ec.refused.Load())
	}

	np.Spec.Template.InstanceTypes = []string{"c5.large"}
	_, err = p.Create(ctx, np, provider.NewName(np.Name))
	if perr, ok := provider.AsError(err); !ok || perr.Code != provider.CodeInvalidTemplate {
		t.Errorf("Create with none of the group's types allowed: %v; want InvalidTemplate", err)
	}
}

func tagOf(inst ec2types.Instance, key string) string {
	for _, t := range inst.Tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
