package aksagentpool_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool"
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool/akstest"
	"github.com/sluice-dev/sluice/internal/provider/providertest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// The aks-agentpool provider passes the suite every provider must, against
// akstest's agent pools.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		Registration: aksagentpool.Registration,
		New:          conformanceCloud,
		NoToken: "AKS takes no idempotency token for a change of an agent pool's count: aks-agentpool writes a claim before it PUTs the pool " +
			"with an absolute count, and finds its machine by the claim",
		TaintsFromUser: "AKS, not sluice, starts an agent pool's kubelets: the unregistered taint is the user's to put in the pool's " +
			"nodeInitializationTaints, as this pool's are",
	})
}

// conformanceCloud is one agent pool whose nodeInitializationTaints hold the
// unregistered taint, two NodePools over it, and a provider that does not
// retry, so that a refusal reaches it at once.
func conformanceCloud(*testing.T) *providertest.Cloud {
	w := newWorld()
	const ap = "web"
	w.cloud.AddPool(ap, 1, akstest.Pool{NodeLabels: map[string]string{"tier": "web"}, NodeInitializationTaints: []corev1.Taint{provider.Unregistered}})
	var drop atomic.Bool
	w.cloud.DropAnswer = func(r akstest.Request) bool {
		return r.Method == http.MethodPut && drop.CompareAndSwap(true, false)
	}
	np := pool("web", ap)
	return &providertest.Cloud{
		Provider: w.provider(-1),
		Pool:     np,
		Other:    pool("batch", ap),
		Foreign:  func(*testing.T) { w.cloud.AddMachine(ap) },
		Refuse: func(t *testing.T, code string) *v1alpha1.NodePool {
			switch code {
			case provider.CodeInsufficientCapacity:
				w.cloud.FailScale("OverconstrainedZonalAllocationRequest")
			case provider.CodeQuotaExceeded:
				w.cloud.RefuseScale(akstest.VCPUQuota("standardDSv5Family"))
			case provider.CodeThrottled:
				w.cloud.Throttle(1, 1)
			default:
				t.Fatalf("akstest makes no refusal %s", code)
			}
			return np
		},
		// The pool's PUT of its count: AKS scales out, its answer is lost.
		LoseAnswer: func(*testing.T) { drop.Store(true) },
		Settle:     func(*testing.T) { w.cloud.FinishOperations() },
		Taints: func(t *testing.T, m *provider.Machine) []corev1.Taint {
			for name := range w.cloud.Machines(ap) {
				if _, taints, _, id, ok := w.cloud.Kubelet(name); ok && strings.EqualFold(id, m.ProviderID) {
					return taints
				}
			}
			t.Fatalf("machine %s (%s) has no kubelet", m.Name, m.ProviderID)
			return nil
		},
		Count: func(*testing.T) int { return len(w.cloud.Machines(ap)) },
	}
}
