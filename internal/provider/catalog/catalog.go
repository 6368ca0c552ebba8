// Package catalog holds the sizes of real cloud machines and what they cost,
// for the kwok provider to give its Nodes a real machine's capacity and for
// sluice to weigh what a replacement costs.
//
// Prices are public list prices in USD per hour for Linux, as of 2026, in one
// region per cloud: Azure eastus (pay-as-you-go) and AWS us-east-1
// (On-Demand). Spot prices move with demand and differ by zone; the ones here
// are approximate, typical of that region. Allocatable is capacity less what
// the managed Kubernetes service reserves for the kubelet, the system and
// eviction, by that service's published formula (AKS, EKS), roughly: a real
// node reports a little less memory capacity than its size's nominal GiB.
package catalog

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Clouds.
const (
	Azure = "azure"
	AWS   = "aws"
)

// Type is an instance type (a VM size).
type Type struct {
	Name  string
	Cloud string
	// Region is where the prices are from.
	Region string
	// CPU and Memory are the machine's capacity.
	CPU, Memory resource.Quantity
	// Allocatable is the cpu and memory left for pods.
	Allocatable corev1.ResourceList
	// OnDemand and Spot are USD per hour; Spot is 0 when the cloud does not
	// sell the type as spot (Azure's B-series).
	OnDemand, Spot float64
}

// Price returns what the type costs per hour, in USD, bought as c; 0 when it
// is not sold so (see Offers).
func (t Type) Price(c v1alpha1.CapacityType) float64 {
	if c == v1alpha1.CapacitySpot {
		return t.Spot
	}
	return t.OnDemand
}

// Offers says whether the cloud sells the type as c.
func (t Type) Offers(c v1alpha1.CapacityType) bool { return t.Price(c) > 0 }

// Lookup returns the type named name (as the cloud spells it, for example
// Standard_D4s_v5 or m6i.xlarge).
func Lookup(name string) (Type, bool) {
	for _, t := range types {
		if t.Name == name {
			return t.clone(), true
		}
	}
	return Type{}, false
}

// All returns every type, Azure's first, each cloud's by size.
func All() []Type {
	all := make([]Type, len(types))
	for i, t := range types {
		all[i] = t.clone()
	}
	return all
}

// clone keeps callers from writing into the catalogue through the map.
func (t Type) clone() Type {
	t.Allocatable = t.Allocatable.DeepCopy()
	return t
}

var types = []Type{
	azure("Standard_B2s", 2, 4, 0.0416, 0),
	azure("Standard_D2s_v5", 2, 8, 0.096, 0.0192),
	azure("Standard_D4s_v5", 4, 16, 0.192, 0.0384),
	azure("Standard_D8s_v5", 8, 32, 0.384, 0.0768),
	azure("Standard_D16s_v5", 16, 64, 0.768, 0.1536),
	azure("Standard_D4as_v5", 4, 16, 0.172, 0.0344),
	azure("Standard_E4s_v5", 4, 32, 0.252, 0.0504),
	azure("Standard_E8s_v5", 8, 64, 0.504, 0.1008),
	azure("Standard_F4s_v2", 4, 8, 0.169, 0.0338),
	azure("Standard_F8s_v2", 8, 16, 0.338, 0.0676),

	aws("t3.medium", 2, 4, 17, 0.0416, 0.0125),
	aws("m6i.large", 2, 8, 29, 0.096, 0.037),
	aws("m6i.xlarge", 4, 16, 58, 0.192, 0.074),
	aws("m6i.2xlarge", 8, 32, 58, 0.384, 0.151),
	aws("m5.xlarge", 4, 16, 58, 0.192, 0.076),
	aws("m7i.xlarge", 4, 16, 58, 0.2016, 0.081),
	aws("c6i.xlarge", 4, 8, 58, 0.17, 0.066),
	aws("c6i.2xlarge", 8, 16, 58, 0.34, 0.131),
	aws("r6i.large", 2, 16, 29, 0.126, 0.048),
	aws("r6i.xlarge", 4, 32, 58, 0.252, 0.095),
}

// azure is an Azure size, with what AKS reserves: cpu by its table, memory
// 20 MiB per pod (at the default 110 pods) plus 50 MiB, at most a quarter of
// the machine, plus the 100 MiB eviction threshold.
func azure(name string, cpus, memGiB int64, onDemand, spot float64) Type {
	reservedCPU := map[int64]int64{1: 60, 2: 100, 4: 140, 8: 180, 16: 260, 32: 420, 64: 740}[cpus]
	mem := memGiB << 10
	reservedMem := min(20*110+50, mem/4) + 100
	return newType(name, Azure, "eastus", cpus, memGiB, reservedCPU, reservedMem, onDemand, spot)
}

// aws is an EC2 type, with what the EKS AMIs reserve: cpu 6% of the first
// core, 1% of the second, 0.5% of the next two and 0.25% of the rest; memory
// 11 MiB per pod the type's network interfaces allow, plus 255 MiB, plus the
// 100 MiB eviction threshold.
func aws(name string, cpus, memGiB, maxPods int64, onDemand, spot float64) Type {
	reservedCPU := int64(60)
	if cpus >= 2 {
		reservedCPU += 10
	}
	reservedCPU += min(max(cpus-2, 0), 2) * 5
	reservedCPU += max(cpus-4, 0) * 25 / 10
	reservedMem := 11*maxPods + 255 + 100
	return newType(name, AWS, "us-east-1", cpus, memGiB, reservedCPU, reservedMem, onDemand, spot)
}

func newType(name, cloud, region string, cpus, memGiB, reservedMilliCPU, reservedMiB int64, onDemand, spot float64) Type {
	return Type{
		Name: name, Cloud: cloud, Region: region,
		CPU:    *resource.NewQuantity(cpus, resource.DecimalSI),
		Memory: *resource.NewQuantity(memGiB<<30, resource.BinarySI),
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(cpus*1000-reservedMilliCPU, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity((memGiB<<10-reservedMiB)<<20, resource.BinarySI),
		},
		OnDemand: onDemand, Spot: spot,
	}
}
