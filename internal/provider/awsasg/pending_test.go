package awsasg_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/awsasg"
)

// A new instance is pending for a while (moto runs it at once: its
// RunInstances answers "pending" and the next DescribeInstances "running").
// Create returns it Launching without asking Auto Scaling to attach it, Get
// keeps it Launching while it is pending, and the first Get that sees it
// running attaches it, once.
func TestAPendingInstanceIsAttachedOnceRunning(t *testing.T) {
	m, group, np := oneGroup(t)
	ec := &slowToRun{EC2: m.EC2, pendingFor: 2, pending: map[string]int{}}
	asg := &attachRunningOnly{AutoScaling: m.ASG, ec2: ec}
	p := awsasg.New(ec, asg, clocktesting.NewFakeClock(time.Now()))
	ctx := context.Background()
	name := provider.NewName(np.Name)

	created, err := p.Create(ctx, np, name)
	if err != nil {
		t.Fatal(err)
	}
	if created.State != provider.StateLaunching {
		t.Errorf("Create of an instance still pending: state %s; want Launching", created.State)
	}
	got, err := p.Get(ctx, name)
	if err != nil || got.State != provider.StateLaunching {
		t.Errorf("Get while pending = %+v, %v; want Launching", got, err)
	}
	if desired, members := m.Desired(t, group); desired != 0 || len(members) != 0 {
		t.Errorf("while pending: desired %d, instances %v; want 0 and none", desired, members)
	}
	got, err = p.Get(ctx, name)
	if err != nil || got.State != provider.StateRunning {
		t.Fatalf("Get once running = %+v, %v; want Running", got, err)
	}
	if desired, members := m.Desired(t, group); desired != 1 || len(members) != 1 || !strings.HasSuffix(got.ProviderID, "/"+members[0]) {
		t.Errorf("once running: desired %d, instances %v; want 1 holding %s", desired, members, got.ProviderID)
	}
	for range 2 {
		if _, err := p.Get(ctx, name); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Create(ctx, np, name); err != nil {
			t.Fatal(err)
		}
	}
	asg.mu.Lock()
	defer asg.mu.Unlock()
	if asg.attached != 1 || asg.refused != 0 {
		t.Errorf("AttachInstances accepted %d times, refused %d; want once, and never asked while pending", asg.attached, asg.refused)
	}
}

// When Auto Scaling still sees the instance pending (its view can lag
// EC2's), the refusal is retryable and the next Get attaches it.
func TestAnAttachRefusedForTheInstanceStateIsRetried(t *testing.T) {
	m, group, np := oneGroup(t)
	ec := &slowToRun{EC2: m.EC2, pending: map[string]int{}}
	asg := &attachRunningOnly{AutoScaling: m.ASG, ec2: ec, lag: 1}
	p := awsasg.New(ec, asg, clocktesting.NewFakeClock(time.Now()))
	ctx := context.Background()
	name := provider.NewName(np.Name)

	_, err := p.Create(ctx, np, name)
	perr, ok := provider.AsError(err)
	if !ok || perr.Code != awsasg.CodeInstanceNotRunning || !perr.Retryable {
		t.Fatalf("Create with the attach refused for the state: %v; want a retryable %s", err, awsasg.CodeInstanceNotRunning)
	}
	if got, err := p.Get(ctx, name); err != nil || got.State != provider.StateRunning {
		t.Fatalf("Get = %+v, %v; want the machine attached and Running", got, err)
	}
	if desired, members := m.Desired(t, group); desired != 1 || len(members) != 1 {
		t.Errorf("desired %d, instances %v; want 1 and 1", desired, members)
	}
}

// slowToRun reports each instance it launches as pending for its first
// pendingFor descriptions, as EC2 does until the instance has booted (EC2
// User Guide, "Instance state changes": pending, then running).
type slowToRun struct {
	awsasg.EC2
	pendingFor int

	mu      sync.Mutex
	pending map[string]int // instance ID -> descriptions left as pending
}

func (s *slowToRun) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, opts ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	out, err := s.EC2.RunInstances(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range out.Instances {
		s.pending[aws.ToString(out.Instances[i].InstanceId)] = s.pendingFor
		out.Instances[i].State = &ec2types.InstanceState{Name: ec2types.InstanceStateNamePending, Code: aws.Int32(0)}
	}
	return out, nil
}

func (s *slowToRun) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	out, err := s.EC2.DescribeInstances(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range out.Reservations {
		for i := range r.Instances {
			id := aws.ToString(r.Instances[i].InstanceId)
			if s.pending[id] > 0 {
				s.pending[id]--
				r.Instances[i].State = &ec2types.InstanceState{Name: ec2types.InstanceStateNamePending, Code: aws.Int32(0)}
			}
		}
	}
	return out, nil
}

func (s *slowToRun) isPending(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[id] > 0
}

// attachRunningOnly refuses AttachInstances of an instance slowToRun still
// reports pending (and the first lag requests whatever the state), as Auto
// Scaling refuses an instance that is not running: a ValidationError (the
// API reference documents only that AttachInstances fails; the user guide
// lists the running state among its requirements; the message is the one
// Auto Scaling sends).
type attachRunningOnly struct {
	awsasg.AutoScaling
	ec2 *slowToRun
	lag int

	mu                sync.Mutex
	attached, refused int
}

func (a *attachRunningOnly) AttachInstances(ctx context.Context, in *autoscaling.AttachInstancesInput, opts ...func(*autoscaling.Options)) (*autoscaling.AttachInstancesOutput, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range in.InstanceIds {
		if a.lag > 0 || a.ec2.isPending(id) {
			a.lag--
			a.refused++
			return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "Instance " + id + " is not in correct state.", Fault: smithy.FaultClient}
		}
	}
	out, err := a.AutoScaling.AttachInstances(ctx, in, opts...)
	if err == nil {
		a.attached++
	}
	return out, err
}
