package gcpmig_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig/gcptest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// world is a project of gcptest's and a provider over it.
type world struct {
	clock *clocktesting.FakeClock
	cloud *gcptest.Server
	pools map[string]*v1alpha1.NodePool
}

func newWorld(t *testing.T) *world {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	return &world{clock: clk, cloud: gcptest.New(t, clk), pools: map[string]*v1alpha1.NodePool{}}
}

// provider is a gcp-mig provider over the world's project, finding the
// world's pools by name, and listing them, as it would in the cluster.
func (w *world) provider(t *testing.T) *gcpmig.Provider {
	p, err := gcpmig.New(context.Background(), w.clock, gcpmig.Options{
		ClientOptions: w.cloud.ClientOptions(),
		Pools: func(_ context.Context, name string) (*v1alpha1.NodePool, error) {
			return w.pools[name], nil
		},
		ListPools: func(context.Context) ([]v1alpha1.NodePool, error) {
			var out []v1alpha1.NodePool
			for _, name := range slices.Sorted(maps.Keys(w.pools)) {
				out = append(out, *w.pools[name])
			}
			return out, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// pool makes a pool over the groups and adds it to the world.
func (w *world) pool(name string, groups ...v1alpha1.InstanceGroup) *v1alpha1.NodePool {
	np := &v1alpha1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodePoolSpec{
			Provider: v1alpha1.ProviderSpec{Name: v1alpha1.ProviderGCPMIG, GCP: &v1alpha1.GCPProviderSpec{Project: gcptest.Project, InstanceGroups: groups}},
			Template: &v1alpha1.NodeTemplate{},
		},
	}
	w.pools[name] = np
	return np
}

func zonal(name, zone string) v1alpha1.InstanceGroup {
	return v1alpha1.InstanceGroup{Name: name, Zone: zone}
}

func regional(name, region string) v1alpha1.InstanceGroup {
	return v1alpha1.InstanceGroup{Name: name, Region: region}
}

// nodeTemplate is an instance template whose kubelet registers tainted.
func nodeTemplate(machineType string) gcptest.Template {
	return gcptest.Template{MachineType: machineType, NodeLabels: map[string]string{"team": "web"}, NodeTaints: []corev1.Taint{provider.Unregistered}}
}

func mustCreate(t *testing.T, p provider.Provider, pool *v1alpha1.NodePool, name string) *provider.Machine {
	t.Helper()
	m, err := p.Create(context.Background(), pool, name)
	if err != nil {
		t.Fatalf("Create(%s, %s): %v", pool.Name, name, err)
	}
	return m
}
