// Package mototest runs moto_server (moto 5.2.1, the AWS emulator our
// machines carry) on a free loopback port for tests, with SDK clients for it
// and helpers to make and read Auto Scaling groups.
package mototest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/mail"
	"os"
	"os/exec"
	"slices"
	"strings"
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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
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

// GroupOption changes what Group makes.
type GroupOption func(*groupOptions)

type groupOptions struct {
	userData string
	subnets  int
}

// WithSubnets spreads the group over the first n of the default VPC's
// subnets, one per Availability Zone of us-east-1 in moto.
func WithSubnets(n int) GroupOption {
	return func(o *groupOptions) { o.subnets = n }
}

// WithNodeLabels gives the group's launch template the user data of an EKS
// AL2023 node: a MIME multi-part document with one NodeConfig part (a
// cluster, and the kubelet flag --node-labels with labels), as nodeadm reads
// it.
func WithNodeLabels(labels map[string]string) GroupOption {
	return func(o *groupOptions) { o.userData = NodeadmUserData(labels) }
}

// WithUserData gives the group's launch template this user data (decoded).
func WithUserData(userData string) GroupOption {
	return func(o *groupOptions) { o.userData = userData }
}

// NodeadmUserData is AL2023 user data registering the kubelet with labels.
func NodeadmUserData(labels map[string]string) string {
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	return strings.Join([]string{
		"MIME-Version: 1.0",
		`Content-Type: multipart/mixed; boundary="BOUNDARY"`,
		"",
		"--BOUNDARY",
		"Content-Type: application/node.eks.aws",
		"",
		"---",
		"apiVersion: node.eks.aws/v1alpha1",
		"kind: NodeConfig",
		"spec:",
		"  cluster:",
		"    name: sluice-moto",
		"    apiServerEndpoint: https://sluice-moto.example.com",
		"    certificateAuthority: Y2VydGlmaWNhdGVBdXRob3JpdHk=",
		"    cidr: 10.100.0.0/16",
		"  kubelet:",
		"    flags:",
		"      - --node-labels=" + strings.Join(pairs, ","),
		"",
		"--BOUNDARY--",
		"",
	}, "\n")
}

// Group makes a launch template and an Auto Scaling group of it, both
// called name (desired 0, max maxSize), in one of the default VPC's subnets
// (or more: WithSubnets).
func (m *Server) Group(t testing.TB, name, instanceType string, maxSize int32, opts ...GroupOption) {
	t.Helper()
	var o groupOptions
	for _, opt := range opts {
		opt(&o)
	}
	ctx := context.Background()
	images, err := m.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("moto's images: %v (%d)", err, len(images.Images))
	}
	subnets, err := m.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("moto's default subnets: %v", err)
	}
	ids := []string{aws.ToString(subnets.Subnets[0].SubnetId)}
	for _, sn := range subnets.Subnets[1:max(1, min(o.subnets, len(subnets.Subnets)))] {
		ids = append(ids, aws.ToString(sn.SubnetId))
	}
	data := &ec2types.RequestLaunchTemplateData{ImageId: images.Images[0].ImageId, InstanceType: ec2types.InstanceType(instanceType)}
	if o.userData != "" {
		data.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(o.userData)))
	}
	if _, err := m.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: data,
	}); err != nil {
		t.Fatalf("creating launch template %s: %v", name, err)
	}
	if _, err := m.ASG.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name),
		LaunchTemplate:       &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
		MinSize:              aws.Int32(0),
		MaxSize:              aws.Int32(maxSize),
		DesiredCapacity:      aws.Int32(0),
		VPCZoneIdentifier:    aws.String(strings.Join(ids, ",")),
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

// Kubelet is what the kubelet of the instance registers its Node with, read
// from the instance's user data as an EKS AL2023 node reads it: nodeadm
// merges the NodeConfig parts of the MIME document in order, appending
// their spec.kubelet.flags, and the kubelet parses the flags with pflag:
// --node-labels accumulate over every occurrence (a MapStringString),
// --register-with-taints keeps the last (RegisterWithTaintsVar.Set replaces
// the list). Flags are read in their --name=value form, the one NodeConfig
// examples use. This reading is the cloud's side, written apart from the
// aws-asg provider's own, so that the two can disagree.
//
// moto keeps the user data RunInstances was given, or else the launch
// template's, and answers it in DescribeInstanceAttribute (base64), as EC2
// does. An instance without user data registers with neither.
func (m *Server) Kubelet(ctx context.Context, instanceID string) (labels map[string]string, taints []corev1.Taint, err error) {
	out, err := m.EC2.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{
		InstanceId: aws.String(instanceID), Attribute: ec2types.InstanceAttributeNameUserData})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the user data of %s: %w", instanceID, err)
	}
	if out.UserData == nil || aws.ToString(out.UserData.Value) == "" {
		return nil, nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(out.UserData.Value))
	if err != nil {
		return nil, nil, fmt.Errorf("decoding the user data of %s: %w", instanceID, err)
	}
	flags, err := nodeadmFlags(string(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the user data of %s as nodeadm does: %w", instanceID, err)
	}
	for _, f := range flags {
		switch name, value, _ := strings.Cut(f, "="); name {
		case "--node-labels":
			if labels == nil {
				labels = map[string]string{}
			}
			for _, kv := range strings.Split(value, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return nil, nil, fmt.Errorf("--node-labels %q: want key=value pairs", value)
				}
				labels[k] = v
			}
		case "--register-with-taints":
			taints = nil
			for _, s := range strings.Split(value, ",") {
				if s == "" {
					continue
				}
				taint, err := parseTaint(s)
				if err != nil {
					return nil, nil, err
				}
				taints = append(taints, taint)
			}
		}
	}
	return labels, taints, nil
}

// nodeadmFlags are the kubelet flags of a MIME multi-part document's
// NodeConfig parts (application/node.eks.aws), in order.
func nodeadmFlags(userData string) ([]string, error) {
	msg, err := mail.ReadMessage(strings.NewReader(userData))
	if err != nil {
		return nil, fmt.Errorf("not a MIME document: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return nil, fmt.Errorf("not a MIME multi-part document (Content-Type %q)", msg.Header.Get("Content-Type"))
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var flags []string
	for {
		part, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return flags, nil
		}
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(part)
		if err != nil {
			return nil, err
		}
		if mt, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type")); mt != "application/node.eks.aws" {
			continue
		}
		for _, doc := range strings.Split(string(body), "\n---") {
			var nc struct {
				Kind string `json:"kind"`
				Spec struct {
					Kubelet struct {
						Flags []string `json:"flags"`
					} `json:"kubelet"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &nc); err != nil {
				return nil, fmt.Errorf("a NodeConfig part: %w", err)
			}
			if nc.Kind == "NodeConfig" {
				flags = append(flags, nc.Spec.Kubelet.Flags...)
			}
		}
	}
}

// parseTaint reads key[=value]:effect, as the kubelet's taint flags take.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("taint %q has no effect", s)
	}
	switch e := corev1.TaintEffect(effect); e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		k, v, _ := strings.Cut(kv, "=")
		return corev1.Taint{Key: k, Value: v, Effect: e}, nil
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q: unknown effect %q", s, effect)
	}
}
