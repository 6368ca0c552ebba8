package azurevmss_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss/azuretest"
	"github.com/sluice-dev/sluice/internal/provider/providertest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// The azure-vmss provider passes the suite every provider must, against
// azuretest's scale sets.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		Registration: azurevmss.Registration,
		New:          conformanceCloud,
		NoToken: "Azure Resource Manager takes no idempotency token for a scale-out: azure-vmss writes a claim before it raises the set's capacity " +
			"to an absolute number, and finds its machine by the claim",
		Images:   [2]string{jammyOld, jammyNew},
		BadImage: "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest",
		TaintsFromUser: "azure-vmss never writes a scale set's model; the unregistered taint is the user's to put in the model's user data " +
			"(an AKS node pool's --node-initialization-taints), as this set's model does",
	})
}

// conformanceCloud is one scale set whose model's kubelet registers with
// the unregistered taint, two pools over it, and a provider that does not
// retry, so that a refusal reaches it at once.
func conformanceCloud(*testing.T) *providertest.Cloud {
	w := newWorld()
	const set = "aks-web-vmss"
	w.cloud.AddSetWithModel(set, "Standard_D4s_v5", 1, azuretest.Model{
		NodeLabels: map[string]string{"kubernetes.azure.com/agentpool": "web"},
		NodeTaints: []corev1.Taint{provider.Unregistered},
	})
	var drop atomic.Bool
	w.cloud.DropAnswer = func(r azuretest.Request) bool {
		return r.Method == http.MethodPatch && drop.CompareAndSwap(true, false)
	}
	np := pool("web", set)
	return &providertest.Cloud{
		Provider: w.provider(-1),
		Pool:     np,
		Other:    pool("batch", set),
		Foreign:  func(*testing.T) { w.cloud.AddInstance(set) },
		Refuse: func(t *testing.T, code string) *v1alpha1.NodePool {
			switch code {
			case provider.CodeInsufficientCapacity:
				w.cloud.RefuseScaleOut(azuretest.SkuNotAvailable(set))
			case provider.CodeQuotaExceeded:
				w.cloud.RefuseScaleOut(azuretest.CoreQuotaExceeded())
			case provider.CodeThrottled:
				w.cloud.Throttle(1, 1)
			default:
				t.Fatalf("azuretest makes no refusal %s", code)
			}
			return np
		},
		// The set's PATCH of its capacity: Azure scales out, its answer is
		// lost.
		LoseAnswer: func(*testing.T) { drop.Store(true) },
		Taints: func(t *testing.T, m *provider.Machine) []corev1.Taint {
			_, taints, ok := w.cloud.Kubelet(set, instance(t, m))
			if !ok {
				t.Fatalf("machine %s's instance has no kubelet", m.Name)
			}
			return taints
		},
		Count:    func(*testing.T) int { return len(w.cloud.Instances(set)) },
		Restarts: func(t *testing.T, m *provider.Machine) int { return w.cloud.Restarts(set, instance(t, m)) },
	}
}

// The provider passes the same suite on a Flexible set, whose machines are
// VMs it makes by name.
func TestConformanceFlexible(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		Registration: azurevmss.Registration,
		New:          flexibleConformanceCloud,
		NoToken: "Azure Resource Manager takes no idempotency token for a VM's PUT, but the PUT names the VM: a second Create of the " +
			"name finds the VM by that name (its record says where), so no token is needed",
		Images:   [2]string{jammyOld, jammyNew},
		BadImage: "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest",
		TaintsFromUser: "azure-vmss copies a Flexible set's model into each VM it makes and writes no kubelet flags; the unregistered taint is " +
			"the user's to put in the model's user data, as this set's model does",
	})
}

// flexibleConformanceCloud is one zonal Flexible set whose model's kubelet
// registers with the unregistered taint, two pools over it, and a provider
// that does not retry.
func flexibleConformanceCloud(*testing.T) *providertest.Cloud {
	w := newWorld()
	const set = "web-flex"
	w.cloud.AddSetWithModel(set, "Standard_D4s_v5", 0, azuretest.Model{
		Flexible:   true,
		Zones:      []string{"1", "2", "3"},
		NodeLabels: map[string]string{"tier": "web"},
		NodeTaints: []corev1.Taint{provider.Unregistered},
	})
	var drop atomic.Bool
	w.cloud.DropAnswer = func(r azuretest.Request) bool {
		return r.Method == http.MethodPut && drop.CompareAndSwap(true, false)
	}
	np := pool("web", set)
	return &providertest.Cloud{
		Provider: w.provider(-1),
		Pool:     np,
		Other:    pool("batch", set),
		Foreign:  func(*testing.T) { w.cloud.AddInstance(set) },
		Refuse: func(t *testing.T, code string) *v1alpha1.NodePool {
			switch code {
			case provider.CodeInsufficientCapacity:
				w.cloud.RefuseScaleOut(azuretest.SkuNotAvailable(set))
			case provider.CodeQuotaExceeded:
				w.cloud.RefuseScaleOut(azuretest.CoreQuotaExceeded())
			case provider.CodeThrottled:
				w.cloud.Throttle(1, 1)
			default:
				t.Fatalf("azuretest makes no refusal %s", code)
			}
			return np
		},
		// The VM's PUT: Azure makes it, its answer is lost.
		LoseAnswer: func(*testing.T) { drop.Store(true) },
		Taints: func(t *testing.T, m *provider.Machine) []corev1.Taint {
			_, taints, ok := w.cloud.Kubelet(set, m.Name)
			if !ok {
				t.Fatalf("machine %s has no VM with a kubelet", m.Name)
			}
			return taints
		},
		Count:    func(*testing.T) int { return len(w.cloud.Instances(set)) },
		Restarts: func(_ *testing.T, m *provider.Machine) int { return w.cloud.Restarts(set, m.Name) },
	}
}
