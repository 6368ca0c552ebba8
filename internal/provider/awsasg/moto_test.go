package awsasg_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// moto is one moto_server (moto 5.2.1, the AWS emulator installed on our
// machines) on a free loopback port, shared by the package's tests; each
// test makes its own launch template and group, so they do not meet.
type moto struct {
	url string
	ec2 *ec2.Client
	asg *autoscaling.Client
}

var (
	motoOnce sync.Once
	motoSrv  *moto
	motoErr  error
)

// startMoto returns the package's moto_server, starting it on first use; a
// test is skipped, saying why, when moto_server is not installed.
func startMoto(t *testing.T) *moto {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Skip("moto_server is not installed (pip install 'moto[server]==5.2.1'); the aws-asg provider's tests need it")
	}
	motoOnce.Do(func() { motoSrv, motoErr = launchMoto(bin) })
	if motoErr != nil {
		t.Fatal(motoErr)
	}
	return motoSrv
}

func launchMoto(bin string) (*moto, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Stdout, cmd.Stderr = nil, nil
	if os.Getenv("SLUICE_MOTO_LOG") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting moto_server: %w", err)
	}
	// The test binary's end kills it with the process group; an orphan would
	// only hold a loopback port.
	stopMoto = func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/moto-api/")
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			stopMoto()
			return nil, fmt.Errorf("moto_server did not answer on %s within 30s: %w", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cfg := aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint: aws.String(url),
	}
	return &moto{url: url, ec2: ec2.NewFromConfig(cfg), asg: autoscaling.NewFromConfig(cfg)}, nil
}

var stopMoto = func() {}

func TestMain(m *testing.M) {
	code := m.Run()
	stopMoto()
	os.Exit(code)
}

// group makes a launch template and an Auto Scaling group of it (desired 0,
// max maxSize) in one of the default VPC's subnets, named after the test.
func (m *moto) group(t *testing.T, name, instanceType string, maxSize int32) {
	t.Helper()
	ctx := context.Background()
	images, err := m.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("moto's images: %v (%d)", err, len(images.Images))
	}
	subnets, err := m.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("moto's default subnets: %v", err)
	}
	if _, err := m.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: images.Images[0].ImageId, InstanceType: ec2types.InstanceType(instanceType)},
	}); err != nil {
		t.Fatalf("creating launch template %s: %v", name, err)
	}
	if _, err := m.asg.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name),
		LaunchTemplate:       &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
		MinSize:              aws.Int32(0),
		MaxSize:              aws.Int32(maxSize),
		DesiredCapacity:      aws.Int32(0),
		VPCZoneIdentifier:    subnets.Subnets[0].SubnetId,
	}); err != nil {
		t.Fatalf("creating Auto Scaling group %s: %v", name, err)
	}
}

// desired is the group's desired capacity and the instances it holds.
func (m *moto) desired(t *testing.T, name string) (desired int32, members []string) {
	t.Helper()
	out, err := m.asg.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("reading group %s: %v", name, err)
	}
	g := out.AutoScalingGroups[0]
	for _, i := range g.Instances {
		members = append(members, aws.ToString(i.InstanceId))
	}
	return aws.ToInt32(g.DesiredCapacity), members
}

// tagged lists the instances (any state but terminated) tagged with the
// machine's name.
func (m *moto) tagged(t *testing.T, machine string) []ec2types.Instance {
	t.Helper()
	out, err := m.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:sluice.dev/machine"), Values: []string{machine}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var insts []ec2types.Instance
	for _, r := range out.Reservations {
		insts = append(insts, r.Instances...)
	}
	return insts
}
