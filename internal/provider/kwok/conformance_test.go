package kwok

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/providertest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
	"github.com/sluice-dev/sluice/pkg/contract"
)

// The kwok provider passes the suite every provider must: its cloud is the
// API server's Nodes (a fake clientset here) and its refusals are the pool's
// kwok.failure.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		Registration: Registration,
		New:          conformanceCloud,
		NoLostAnswer: "the kwok provider is its own cloud, in the controller's process: no answer travels between them to be lost",
		NoToken:      "the kwok provider's cloud has no API, so no idempotency token: Create finds the machine by its name alone",
		Images:       [2]string{"img-1", "AKSUbuntu-2204gen2containerd-202611.01.0"},
		BadImage:     "ubuntu-latest",
	})
}

// refusals are the kwok.failure that makes each refusal.
var refusals = map[string]v1alpha1.KwokFailure{
	provider.CodeInsufficientCapacity: v1alpha1.KwokFailureInsufficientCapacity,
	provider.CodeQuotaExceeded:        v1alpha1.KwokFailureQuotaExceeded,
	provider.CodeThrottled:            v1alpha1.KwokFailureThrottled,
}

func conformanceCloud(t *testing.T) *providertest.Cloud {
	p, client, _ := newProvider()
	booted := withKwok(v1alpha1.KwokProviderSpec{BootDelay: &metav1.Duration{}})
	web := newPool("web", booted)
	return &providertest.Cloud{
		Provider: p,
		Pool:     web,
		Other:    newPool("batch", booted),
		Foreign: func(t *testing.T) {
			// A Node of the pool sluice did not make: the sandbox's
			// fixture Nodes carry the pool's label and no kwok:// ID.
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fixture-web-0", Labels: map[string]string{provider.LabelNodePool: web.Name}},
				Spec: corev1.NodeSpec{ProviderID: "kind://docker/sluice/fixture-web-0"}}
			if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		Refuse: func(t *testing.T, code string) *v1alpha1.NodePool {
			failure, ok := refusals[code]
			if !ok {
				t.Fatalf("the kwok provider has no kwok.failure for %s", code)
			}
			refusing := web.DeepCopy()
			refusing.Spec.Provider.Kwok.Failure = failure
			return refusing
		},
		Settle: func(*testing.T) { p.register(context.Background()) },
		Taints: func(t *testing.T, m *provider.Machine) []corev1.Taint {
			n, ok := getNode(t, client, m.NodeName)
			if !ok {
				t.Fatalf("machine %s has no Node %s", m.Name, m.NodeName)
			}
			return n.Spec.Taints
		},
		// A reboot notes its time on the Node at once (its new boot ID
		// shows once the downtime is over).
		Restarts: func(t *testing.T, m *provider.Machine) int {
			n, ok := getNode(t, client, m.NodeName)
			if !ok || n.Annotations[contract.SandboxRebootedAt] == "" {
				return 0
			}
			return 1
		},
		Count: func(t *testing.T) int {
			p.mu.Lock()
			booting := len(p.machines)
			p.mu.Unlock()
			return booting + len(nodeNames(t, client))
		},
	}
}
