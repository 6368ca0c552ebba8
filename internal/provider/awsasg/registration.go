package awsasg

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/sluice-dev/sluice/internal/awsclient"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Registration is the aws-asg provider as the registry lists it.
var Registration = provider.Registration{
	Name: v1alpha1.ProviderAWSASG,
	Images: provider.Images{
		Unsupported: "aws-asg launches the AMI of the Auto Scaling group's launch template: change the launch template's version to change the image",
	},
	Start: start,
}

// start builds the provider on the SDK's default chain (IRSA or EKS Pod
// Identity in a cluster, the environment or a profile outside one), the
// region from AWS_REGION, the profile, or the instance's metadata. No
// credential is ever logged.
func start(ctx context.Context, env provider.Env) (provider.Provider, error) {
	cfg, err := awsclient.Process(ctx, "")
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: set AWS_REGION (in the chart: controller.env)")
	}
	return New(ec2.NewFromConfig(cfg), autoscaling.NewFromConfig(cfg), env.Clock), nil
}
