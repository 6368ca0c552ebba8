package nodepool_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"

	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/awsasg/mototest"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss/azuretest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// An Auto Scaling group pool is upgraded to another AMI with a surge of
// one: every replacement is launched with the AMI over the launch
// template's, says so on its Node (read back from EC2 at registration), the
// workload's PDB holds throughout, and the group ends with its three
// instances, all on the new AMI.
func TestAnAutoScalingGroupPoolUpgradesItsImage(t *testing.T) {
	m := mototest.Start(t)
	s := baseScene(t)
	group := strings.ReplaceAll(s.name, "pool", "asg-")
	m.Group(t, group, "m5.large", 6, mototest.WithNodeLabels(s.selector))
	images, err := m.EC2.DescribeImages(context.Background(), &ec2.DescribeImagesInput{})
	if err != nil || len(images.Images) < 2 {
		t.Fatalf("moto's images: %v", err)
	}
	next := aws.ToString(images.Images[1].ImageId) // the launch template boots the first
	before := s.groupPool(t, m, group, 3)

	s.upgradeCloudPool(t, before, next)
	desired, members := m.Desired(t, group)
	if desired != 3 || len(members) != 3 {
		t.Errorf("group %s: desired %d, %d instances; want 3 and 3", group, desired, len(members))
	}
	out, err := m.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: members})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if got := aws.ToString(i.ImageId); got != next {
				t.Errorf("instance %s runs %s, want %s", aws.ToString(i.InstanceId), got, next)
			}
		}
	}
}

// A scale set pool is upgraded to another gallery image version with a
// surge of one: the set's model is changed before the first scale-out,
// every replacement boots it and says so on its Node (the instance's own
// image, read back from Azure), the PDB holds, and the set ends with its
// three instances on the new version. The model registers its kubelets
// with sluice.dev/unregistered, as an AKS pool's initialization taints do.
func TestAScaleSetPoolUpgradesItsImage(t *testing.T) {
	s := baseScene(t)
	cloud := azuretest.NewCloud(clock.RealClock{})
	set := "aks-" + strings.ReplaceAll(s.name, "pool", "") + "-12345678-vmss"
	cloud.AddSetWithModel(set, "Standard_D4s_v5", 3, azuretest.Model{NodeLabels: s.selector, NodeTaints: []corev1.Taint{provider.Unregistered}})
	next := strings.Replace(azuretest.AKSImage, "/versions/202411.12.0", "/versions/202412.03.0", 1)
	s.scaleSetPool(t, cloud, set)
	before := s.waitNodes(t, 3, time.Minute)

	s.upgradeCloudPool(t, before, next)
	s.wantRegistration(t, metav1.ConditionTrue, pools.ReasonTainted) // the model registers it
	if got := slices.Sorted(maps.Keys(cloud.Instances(set))); len(got) != 3 || slices.ContainsFunc(got, func(id string) bool { return id == "0" || id == "1" || id == "2" }) {
		t.Errorf("scale set %s holds instances %v; want three replacements, the first three (0, 1, 2) deleted", set, got)
	}
}

// upgradeCloudPool upgrades the scene's cloud pool to image with a surge of
// one under a workload whose PDB allows one pod out, and checks the
// rollout: the PDB held, at most one node out at once, every node replaced
// by one that says it runs image, registered.
func (s *scene) upgradeCloudPool(t *testing.T, before []string, image string) {
	t.Helper()
	s.start(t) // first: it registers the nodes a tainted model made
	s.workload(t, 6, "5")
	a := s.audit(t)
	s.upgrade(t, image, v1alpha1.UpgradeSpec{MaxSurge: surge(intstr.FromInt32(1))})
	st := s.waitUpgrade(t, image, v1alpha1.UpgradeSucceeded, 4*time.Minute)
	a.check(t, 1)
	if st.Upgraded != 3 || st.Nodes != 3 {
		t.Errorf("status.upgrade %+v; want 3 of 3 upgraded", st)
	}
	nodes, err := s.nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Errorf("%d nodes after the upgrade, want 3", len(nodes))
	}
	for _, n := range nodes {
		if _, registered := provider.Registered(n); slices.Contains(before, n.Name) || n.Annotations[contract.AnnotationImage] != image || !registered {
			t.Errorf("node %s (image %q, registered %v) after the upgrade; want a registered replacement on %s", n.Name, n.Annotations[contract.AnnotationImage], registered, image)
		}
	}
	s.env.WaitForPods(t, "app=web", 6)
}
