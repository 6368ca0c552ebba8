package nodepool_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/awsasg"
	"github.com/sluice-dev/sluice/internal/provider/awsasg/mototest"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// A pool of an EC2 Auto Scaling group (moto) drifts: the controller
// launches each replacement through the aws-asg provider, finds its Node
// (named by its "kubelet", ip-…) by providerID, deletes the old Node (drained
// first) and terminates its instance in the group, which the group launched
// itself before sluice: the group ends with desired 2, holding only the
// replacements.
func TestAnAutoScalingGroupPoolDriftsThroughTheProvider(t *testing.T) {
	m := mototest.Start(t)
	s := baseScene(t)
	group := strings.ReplaceAll(s.name, "pool", "asg-")
	// The group's launch template registers its nodes with the pool's
	// selector (an EKS user data's --node-labels); nothing else of the pool.
	m.Group(t, group, "m5.large", 4, mototest.WithNodeLabels(s.selector))
	before := s.groupPool(t, m, group, 2)
	_, launched := m.Desired(t, group)
	s.start(t)

	ids := s.driftMidRollout(t, before)
	s.wantRegistration(t, metav1.ConditionTrue, pools.ReasonTainted) // AL2023: sluice adds the taint
	desired, members := m.Desired(t, group)
	slices.Sort(members)
	if desired != 2 || !slices.Equal(ids, members) {
		t.Errorf("group %s: desired %d, instances %v; want 2 holding the replacements %v", group, desired, members, ids)
	}
	out, err := m.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: launched})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if i.State.Name != "terminated" && i.State.Name != "shutting-down" {
				t.Errorf("the group's first instance %s is %s; want terminated", aws.ToString(i.InstanceId), i.State.Name)
			}
		}
	}
}

// driftMidRollout adds a label to the pool's template, then a second one
// once the first replacement has joined, and waits until every node before
// is replaced by one carrying both (4 minutes at most): the replacements that
// join after it get both at registration and are not drifted at birth, the
// first is replaced once more, and the pool settles at its size with
// nothing drifted and no machine asked for in the 10 s after.
func (s *scene) driftMidRollout(t *testing.T, before []string) []string {
	t.Helper()
	s.edit(t, func(p *v1alpha1.NodePool) {
		p.Spec.Template.Labels = mergeLabels(p.Spec.Template.Labels, "sluice.dev/test-rev", "2")
	})
	s.env.WaitFor(t, 2*time.Minute, "a first replacement joined", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(nodes, func(n *corev1.Node) bool { return !slices.Contains(before, n.Name) }), nil
	})
	s.edit(t, func(p *v1alpha1.NodePool) {
		p.Spec.Template.Labels = mergeLabels(p.Spec.Template.Labels, "sluice.dev/test-tier", "gold")
	})
	s.env.WaitFor(t, 4*time.Minute, "every node replaced, with both labels", func(ctx context.Context) (bool, error) {
		nodes, err := s.nodes(ctx)
		if err != nil || len(nodes) != len(before) {
			return false, err
		}
		for _, n := range nodes {
			if slices.Contains(before, n.Name) || n.Labels["sluice.dev/test-rev"] != "2" || n.Labels["sluice.dev/test-tier"] != "gold" ||
				!n.DeletionTimestamp.IsZero() || !ready(n) || provider.Tainted(n) {
				return false, nil
			}
		}
		return true, nil
	})
	// Settled means it stays so: for 10 s no machine may be asked for,
	// looked at every 200 ms so that the first request fails the test.
	asked := s.creates.Load()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if now := s.creates.Load(); now != asked {
			t.Fatalf("%d machine(s) asked for after the pool settled: replacements are drifted at birth", now-asked)
		}
	}
	if p := s.pool(t); p.Status.Drifted != 0 {
		t.Errorf("status.drifted = %d after the rollout, want 0", p.Status.Drifted)
	}
	nodes, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != len(before) {
		t.Errorf("%d nodes after the rollout, want %d", len(nodes), len(before))
	}
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:])
		if _, ok := provider.Registered(n); !ok {
			t.Errorf("replacement %s carries no %s annotation", n.Name, contract.AnnotationRegistered)
		}
	}
	slices.Sort(ids)
	return ids
}

func mergeLabels(l map[string]string, k, v string) map[string]string {
	out := maps.Clone(l)
	out[k] = v
	return out
}

// cloudPool creates the scene's pool made by provider (a budget of one
// node, no consolidation); it returns a context that ends with the test,
// for the cloud's kubelets.
func (s *scene) cloudPool(t *testing.T, provider v1alpha1.ProviderSpec) context.Context {
	t.Helper()
	pool := &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: s.name},
		Spec: v1alpha1.NodePoolSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: s.selector},
			Provider:     provider,
			Template:     &v1alpha1.NodeTemplate{Labels: s.selector},
			Disruption:   &v1alpha1.DisruptionSpec{Budgets: []v1alpha1.Budget{{Nodes: "1"}}, ConsolidateAfter: v1alpha1.Never},
		},
	}
	if err := s.kube.Create(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.cleanup)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// kubelet plays a cloud's kubelets until ctx ends: every 300 ms, register
// registers a Node for each machine that is running and not yet in
// registered (the machines it has registered).
func (s *scene) kubelet(ctx context.Context, t *testing.T, cloud string, register func(context.Context, map[string]bool) error) {
	registered := map[string]bool{}
	for ctx.Err() == nil {
		if err := register(ctx, registered); err != nil && ctx.Err() == nil {
			t.Logf("%s kubelet: %v", cloud, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// groupPool makes the scene's pool of the Auto Scaling group in moto, made
// by the aws-asg provider, plays the group's kubelets until the test ends,
// has the group launch n instances of its own, and returns their Nodes.
func (s *scene) groupPool(t *testing.T, m *mototest.Server, group string, n int32) []string {
	t.Helper()
	s.machines = provider.NewMachines(provider.Set{v1alpha1.ProviderAWSASG: awsasg.New(m.EC2, m.ASG, clock.RealClock{})}, clock.RealClock{})
	ctx := s.cloudPool(t, v1alpha1.ProviderSpec{Name: v1alpha1.ProviderAWSASG,
		AWS: &v1alpha1.AWSProviderSpec{AutoScalingGroups: []v1alpha1.AutoScalingGroup{{Name: group}}}})
	go s.kubelet(ctx, t, "ec2", func(ctx context.Context, reg map[string]bool) error { return s.registerInstances(ctx, m, group, reg) })
	if _, err := m.ASG.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(n)}); err != nil {
		t.Fatal(err)
	}
	return s.waitNodes(t, int(n), time.Minute)
}

// registerInstances plays the kubelets of the group's instances: each
// running instance registers a Node named as EKS names it, with the
// providerID aws:///<zone>/<id>, and the labels and taints its user data
// gives its kubelet (mototest.Kubelet reads them as nodeadm and the kubelet
// do), never the pool's: sluice's registration gives it the template. The
// sandbox's kwok then keeps it Ready.
func (s *scene) registerInstances(ctx context.Context, m *mototest.Server, group string, registered map[string]bool) error {
	g, err := m.ASG.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{group}})
	if err != nil || len(g.AutoScalingGroups) == 0 {
		return err
	}
	var ids []string
	for _, i := range g.AutoScalingGroups[0].Instances {
		if id := aws.ToString(i.InstanceId); !registered[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	out, err := m.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return err
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			if inst.State == nil || inst.State.Name != "running" {
				continue
			}
			id, zone := aws.ToString(inst.InstanceId), aws.ToString(inst.Placement.AvailabilityZone)
			labels, taints, err := m.Kubelet(ctx, id)
			if err != nil {
				return err
			}
			n := fixture.EKSNodeGroup(s.name, 1, fixture.WithLabels(labels), fixture.WithTaints(taints...)).Nodes()[0]
			n.Name = cloudNodeName(id)
			n.Labels[corev1.LabelHostname] = n.Name
			n.Labels[corev1.LabelTopologyZone] = zone
			n.Labels[corev1.LabelInstanceTypeStable] = string(inst.InstanceType)
			n.Spec.ProviderID = "aws:///" + zone + "/" + id
			if _, err := s.env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("registering %s: %w", id, err)
			}
			registered[id] = true
		}
	}
	return nil
}

// wantRegistration checks the pool's Registration condition.
func (s *scene) wantRegistration(t *testing.T, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(s.pool(t).Status.Conditions, pools.ConditionRegistration)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Errorf("condition Registration = %+v, want %s %s", c, status, reason)
	}
}
