package awsasg

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/sluice-dev/sluice/internal/awsclient"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Registration is the aws-asg provider as the registry lists it.
var Registration = provider.Registration{
	Name: v1alpha1.ProviderAWSASG,
	// A pool's image is launched in place of the launch template's
	// (RunInstances' ImageId overrides the template's).
	Images: provider.Images{Check: checkImage},
	Start:  start,
}

// start builds the provider on the SDK's default chain (IRSA or EKS Pod
// Identity in a cluster, the environment or a profile outside one), the
// region from AWS_REGION, the profile, or the instance's metadata (IMDSv2). No
// credential is ever logged.
func start(ctx context.Context, env provider.Env) (provider.Provider, error) {
	cfg, err := awsclient.Process(ctx, "")
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: none in AWS_REGION or the profile, nor from the instance metadata (IMDSv2; a pod reaches it only with a hop limit of 2): set AWS_REGION (in the chart: controller.env)")
	}
	return New(ec2.NewFromConfig(cfg), autoscaling.NewFromConfig(cfg), env.Clock), nil
}

// amiID is an AMI's ID as EC2 gives them: "ami-" and 8 hexadecimal digits,
// or 17 for the IDs made since 2016.
var amiID = regexp.MustCompile(`^ami-([0-9a-f]{8}|[0-9a-f]{17})$`)

// checkImage says whether image is an AMI ID; whether the account may launch
// it is EC2's to say at the first launch (InvalidAMIID.*: InvalidTemplate).
func checkImage(image string) error {
	if !amiID.MatchString(image) {
		return fmt.Errorf("image %q is not an AMI ID: aws-asg launches an AMI named by its ID, ami- and 8 or 17 hexadecimal digits (ami-0abc1234def567890)", image)
	}
	return nil
}
