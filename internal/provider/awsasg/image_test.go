package awsasg_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/awsasg"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// The pool's image is launched in place of the launch template's, and the
// machine says which AMI it runs; without one the template's AMI is.
func TestThePoolsImageIsLaunched(t *testing.T) {
	m, _, np := oneGroup(t)
	ctx := context.Background()
	images, err := m.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{})
	if err != nil || len(images.Images) < 2 {
		t.Fatalf("moto's images: %v", err)
	}
	templates := aws.ToString(images.Images[0].ImageId) // mototest.Group's launch template's
	pools := aws.ToString(images.Images[1].ImageId)
	p := awsasg.New(m.EC2, m.ASG, clocktesting.NewFakeClock(time.Now()))

	plain, err := p.Create(ctx, np, provider.NewName(np.Name))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Image != templates {
		t.Errorf("machine of a pool without an image runs %q; want the launch template's %s", plain.Image, templates)
	}
	np.Spec.Template = &v1alpha1.NodeTemplate{Image: pools}
	name := provider.NewName(np.Name)
	machine, err := p.Create(ctx, np, name)
	if err != nil {
		t.Fatal(err)
	}
	insts := m.Tagged(t, name)
	if machine.Image != pools || len(insts) != 1 || aws.ToString(insts[0].ImageId) != pools {
		t.Errorf("machine %+v, instances %d; want one instance of the pool's image %s", machine, len(insts), pools)
	}
	if got, err := p.Get(ctx, name); err != nil || got.Image != pools {
		t.Errorf("Get(%s) = %+v, %v; want image %s", name, got, err, pools)
	}
}

// The provider sets images, and takes only AMI IDs.
func TestImagesAreAMIIDs(t *testing.T) {
	images := awsasg.Registration.Images
	if !images.Sets() {
		t.Fatalf("aws-asg says it cannot set images: %s", images.Unsupported)
	}
	for image, ok := range map[string]bool{
		"ami-0abc1234def567890":                    true,
		"ami-12345678":                             true,
		"ami-0ABC1234DEF567890":                    false,
		"ami-0abc1234def56789":                     false, // 16 digits
		"ami-1234567":                              false,
		"0abc1234def567890":                        false,
		"ami-0abc1234def567890 ":                   false,
		"AKSUbuntu-2204gen2containerd-202501.01.0": false,
		"": false,
	} {
		if err := images.Check(image); (err == nil) != ok {
			t.Errorf("Check(%q) = %v; want ok %v", image, err, ok)
		}
	}
}
