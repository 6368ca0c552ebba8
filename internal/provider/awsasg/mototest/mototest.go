// Package mototest runs moto_server (moto 5.2.1, the AWS emulator our
// machines carry) on a free loopback port for tests, with SDK clients for it
// and helpers to make and read Auto Scaling groups.
package mototest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/contract"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Server is one moto_server on a free loopback port, shared by a test
// binary's tests (each makes its own launch templates and groups, so they do
// not meet). It dies with the test binary.
type Server struct {
	URL string
	EC2 *ec2.Client
	ASG *autoscaling.Client
	// Config makes clients of moto's other services (SQS, EventBridge).
	Config aws.Config
}

var (
	once   sync.Once
	server *Server
	errRun error
)

// Start returns the test binary's moto_server, starting it on first use;
// when moto_server is not installed a test fails under make test and is
// skipped under a bare go test, saying how to install it (testenv).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		testenv.Missing(t, "moto_server (the AWS emulator the aws-asg provider's tests run against)", "python3 -m pip install 'moto[server]==5.2.1'")
	}
	once.Do(func() { server, errRun = launch(bin) })
	if errRun != nil {
		t.Fatal(errRun)
	}
	return server
}

func launch(bin string) (*Server, error) {
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
	// It dies with the test binary (the shims that start it exec, so the
	// signal reaches the Python process).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting moto_server: %w", err)
	}
	stop := func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	var lastErr error
	up := func(context.Context) (bool, error) {
		resp, err := http.Get(url + "/moto-api/")
		if err != nil {
			lastErr = err
			return false, nil
		}
		_ = resp.Body.Close()
		return true, nil
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, up); err != nil {
		stop()
		return nil, fmt.Errorf("moto_server did not answer on %s within 30s: %w", url, errors.Join(err, lastErr))
	}
	cfg := aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint: aws.String(url),
	}
	return &Server{URL: url, EC2: ec2.NewFromConfig(cfg), ASG: autoscaling.NewFromConfig(cfg), Config: cfg}, nil
}

// Group makes a launch template and an Auto Scaling group of it, both
// called name (desired 0, max maxSize), in one of the default VPC's subnets.
func (m *Server) Group(t testing.TB, name, instanceType string, maxSize int32) {
	t.Helper()
	ctx := context.Background()
	images, err := m.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("moto's images: %v (%d)", err, len(images.Images))
	}
	subnets, err := m.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("moto's default subnets: %v", err)
	}
	if _, err := m.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: images.Images[0].ImageId, InstanceType: ec2types.InstanceType(instanceType)},
	}); err != nil {
		t.Fatalf("creating launch template %s: %v", name, err)
	}
	if _, err := m.ASG.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
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

// Desired is the group's desired capacity and the instances it holds.
func (m *Server) Desired(t testing.TB, name string) (desired int32, members []string) {
	t.Helper()
	out, err := m.ASG.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("reading group %s: %v", name, err)
	}
	g := out.AutoScalingGroups[0]
	for _, i := range g.Instances {
		members = append(members, aws.ToString(i.InstanceId))
	}
	return aws.ToInt32(g.DesiredCapacity), members
}

// Tagged lists the instances (any state but terminated) tagged with the
// machine's name.
func (m *Server) Tagged(t testing.TB, machine string) []ec2types.Instance {
	t.Helper()
	out, err := m.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + contract.TagMachine), Values: []string{machine}},
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
