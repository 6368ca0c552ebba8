package catalog

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

func TestCatalogueIsSane(t *testing.T) {
	all := All()
	if len(all) < 20 {
		t.Fatalf("catalogue has %d types, want about a dozen per cloud", len(all))
	}
	seen := map[string]bool{}
	for _, typ := range all {
		t.Run(typ.Name, func(t *testing.T) {
			if seen[typ.Name] {
				t.Errorf("listed twice")
			}
			seen[typ.Name] = true
			if typ.Cloud != Azure && typ.Cloud != AWS {
				t.Errorf("cloud %q", typ.Cloud)
			}
			if typ.Region == "" {
				t.Errorf("no region")
			}
			for _, r := range []struct {
				name     corev1.ResourceName
				capacity resource.Quantity
			}{{corev1.ResourceCPU, typ.CPU}, {corev1.ResourceMemory, typ.Memory}} {
				alloc, ok := typ.Allocatable[r.name]
				if !ok {
					t.Errorf("no allocatable %s", r.name)
					continue
				}
				if alloc.Sign() <= 0 || alloc.Cmp(r.capacity) >= 0 {
					t.Errorf("allocatable %s %s, want above 0 and below capacity %s", r.name, alloc.String(), r.capacity.String())
				}
				// What a managed service reserves is a sliver, never most of the machine.
				if alloc.AsApproximateFloat64() < 0.7*r.capacity.AsApproximateFloat64() {
					t.Errorf("allocatable %s %s is under 70%% of capacity %s", r.name, alloc.String(), r.capacity.String())
				}
			}
			if typ.OnDemand <= 0 {
				t.Errorf("on-demand price %v", typ.OnDemand)
			}
			if typ.Spot < 0 || typ.Spot >= typ.OnDemand {
				t.Errorf("spot price %v, want 0 (not sold as spot) or below on-demand %v", typ.Spot, typ.OnDemand)
			}
			if got := typ.Price(v1alpha1.CapacitySpot); got != typ.Spot {
				t.Errorf("Price(spot) = %v, want %v", got, typ.Spot)
			}
			for _, c := range []v1alpha1.CapacityType{"", v1alpha1.CapacityOnDemand} {
				if got := typ.Price(c); got != typ.OnDemand {
					t.Errorf("Price(%q) = %v, want %v", c, got, typ.OnDemand)
				}
			}
		})
	}
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		name               string
		ok                 bool
		cloud, cpu, memory string
		allocCPU, allocMem string
		spotOffered        bool
	}{
		// What AKS and EKS report for these sizes, give or take the memory the
		// kernel keeps.
		{name: "Standard_D4s_v5", ok: true, cloud: Azure, cpu: "4", memory: "16Gi", allocCPU: "3860m", allocMem: "14034Mi", spotOffered: true},
		{name: "m6i.xlarge", ok: true, cloud: AWS, cpu: "4", memory: "16Gi", allocCPU: "3920m", allocMem: "15391Mi", spotOffered: true},
		{name: "c6i.2xlarge", ok: true, cloud: AWS, cpu: "8", memory: "16Gi", allocCPU: "7910m", allocMem: "15391Mi", spotOffered: true},
		{name: "Standard_B2s", ok: true, cloud: Azure, cpu: "2", memory: "4Gi", allocCPU: "1900m", allocMem: "2972Mi"},
		{name: "standard_d4s_v5"},
		{name: "m6i.huge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, ok := Lookup(tc.name)
			if ok != tc.ok {
				t.Fatalf("Lookup ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if typ.Cloud != tc.cloud {
				t.Errorf("cloud %q, want %q", typ.Cloud, tc.cloud)
			}
			for _, q := range []struct {
				what string
				got  resource.Quantity
				want string
			}{
				{"cpu", typ.CPU, tc.cpu},
				{"memory", typ.Memory, tc.memory},
				{"allocatable cpu", typ.Allocatable[corev1.ResourceCPU], tc.allocCPU},
				{"allocatable memory", typ.Allocatable[corev1.ResourceMemory], tc.allocMem},
			} {
				if q.got.Cmp(resource.MustParse(q.want)) != 0 {
					t.Errorf("%s %s, want %s", q.what, q.got.String(), q.want)
				}
			}
			if got := typ.Offers(v1alpha1.CapacitySpot); got != tc.spotOffered {
				t.Errorf("Offers(spot) = %v, want %v", got, tc.spotOffered)
			}
			if !typ.Offers(v1alpha1.CapacityOnDemand) {
				t.Errorf("not offered on-demand")
			}
		})
	}
}

func TestLookupReturnsACopy(t *testing.T) {
	typ, _ := Lookup("Standard_D4s_v5")
	typ.Allocatable[corev1.ResourceCPU] = resource.MustParse("1")
	again, _ := Lookup("Standard_D4s_v5")
	if got := again.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("3860m")) != 0 {
		t.Errorf("a caller's change reached the catalogue: allocatable cpu %s", got.String())
	}
}
