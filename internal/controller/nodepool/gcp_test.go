package nodepool_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	pools "github.com/sluice-dev/sluice/internal/nodepool"
	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig/gcptest"
	"github.com/sluice-dev/sluice/internal/sandbox/fixture"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// A pool of a regional managed instance group (gcptest's Compute Engine
// behind an httptest server) drifts on its template's labels and then
// expires, 6 nodes, through the gcp-mig provider: each replacement is an
// instance created by name in the group, each old node's instance is
// deleted from the group after its drain (the group's own first instances
// too, found by their created-by metadata), lowering its target size. The
// group ends with 6 instances, none of the first, and a target size of 6.
func TestAManagedInstanceGroupPoolDriftsAndExpires(t *testing.T) {
	s := baseScene(t)
	cloud := gcptest.New(t, clock.RealClock{})
	group := s.name + "-mig"
	cloud.AddGroup(gcptest.Group{Name: group, Region: "europe-west1", Size: rollSize, Template: gcptest.Template{
		MachineType: "n2-standard-4", NodeLabels: s.selector, NodeTaints: []corev1.Taint{provider.Unregistered}}})
	first := cloud.Instances(group)
	s.instanceGroupPool(t, cloud, group)
	before := s.waitNodes(t, rollSize, time.Minute)

	s.driftAndExpire(t, before, func(context.Context) (int, error) { return len(cloud.Instances(group)), nil })
	for _, name := range cloud.Instances(group) {
		if slices.Contains(first, name) {
			t.Errorf("group %s still holds its first instance %s after the drift and the expiry", group, name)
		}
	}
	if n := cloud.TargetSize(group); n != rollSize {
		t.Errorf("group %s's target size is %d after the drift and the expiry; want %d", group, n, rollSize)
	}
	s.wantRegistration(t, metav1.ConditionTrue, pools.ReasonTainted)
}

// instanceGroupPool makes the scene's pool of the regional group in cloud,
// made by the gcp-mig provider, and plays the group's kubelets (and lets
// the group finish what it started) until the test ends.
func (s *scene) instanceGroupPool(t *testing.T, cloud *gcptest.Server, group string) {
	t.Helper()
	p, err := gcpmig.New(context.Background(), clock.RealClock{}, gcpmig.Options{ClientOptions: cloud.ClientOptions(),
		Pools: provider.ClusterPool(s.env.Client), ListPools: provider.ClusterPoolList(s.env.Client), PollEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	s.machines = provider.NewMachines(provider.Set{v1alpha1.ProviderGCPMIG: p}, clock.RealClock{})
	ctx := s.cloudPool(t, v1alpha1.ProviderSpec{Name: v1alpha1.ProviderGCPMIG, GCP: &v1alpha1.GCPProviderSpec{
		Project: gcptest.Project, InstanceGroups: []v1alpha1.InstanceGroup{{Name: group, Region: "europe-west1"}}}})
	go s.kubelet(ctx, t, "gce", func(ctx context.Context, reg map[string]bool) error {
		cloud.Settle()
		return s.registerInstanceGroup(ctx, cloud, group, reg)
	})
}

// registerInstanceGroup plays the kubelets of the group's instances: each
// running instance registers a Node named after it (GCE's hostname), with
// the providerID cloud-provider-gcp writes, its zone, and the labels and
// taints the kubelet flags in its template's startup script give it, never
// the pool's. kwok keeps it Ready.
func (s *scene) registerInstanceGroup(ctx context.Context, cloud *gcptest.Server, group string, registered map[string]bool) error {
	for _, name := range cloud.Instances(group) {
		if registered[name] {
			continue
		}
		labels, taints, providerID, zone, ok := cloud.Kubelet(name)
		if !ok {
			continue // not running yet, or deleted meanwhile
		}
		n := fixture.EKSNodeGroup(s.name, 1, fixture.WithLabels(labels), fixture.WithTaints(taints...)).Nodes()[0]
		n.Name = name
		n.Labels[corev1.LabelHostname] = name
		n.Labels[corev1.LabelTopologyZone] = zone
		n.Labels[corev1.LabelTopologyRegion] = zone[:len(zone)-2]
		n.Labels[corev1.LabelInstanceTypeStable] = "n2-standard-4"
		n.Spec.ProviderID = providerID
		if _, err := s.env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering instance %s: %w", name, err)
		}
		registered[name] = true
	}
	return nil
}
