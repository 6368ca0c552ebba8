package gcpmig_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig/gcptest"
	"github.com/sluice-dev/sluice/internal/provider/providertest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// The gcp-mig provider passes the suite every provider must, against
// gcptest's project.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		Registration: gcpmig.Registration,
		New:          conformanceCloud,
		NoToken: "createInstances names the instance, and the name is gcp-mig's idempotency key: it lists the group for the name before it asks. " +
			"It sends no requestId: one derived from the name would make Compute Engine ignore a later create of the same name after a refused attempt was deleted",
		Images:   [2]string{gcptest.ImageDebian, gcptest.ImageUbuntu},
		BadImage: "debian-12",
		TaintsFromUser: "gcp-mig never writes the kubelet's flags; the unregistered taint is the user's to put in the instance template's startup script, " +
			"as this group's template does",
	})
}

// conformanceCloud is one zonal group, named like the pool whose own
// instances are named after it, and two pools over it.
func conformanceCloud(t *testing.T) *providertest.Cloud {
	w := newWorld(t)
	const group, zone = "web", "europe-west1-b"
	w.cloud.AddGroup(gcptest.Group{Name: group, Zone: zone, Size: 1, Template: nodeTemplate("n2-standard-4")})
	var drop atomic.Bool
	w.cloud.DropAnswer = func(r gcptest.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/createInstances") && drop.CompareAndSwap(true, false)
	}
	web := w.pool("web", zonal(group, zone))
	return &providertest.Cloud{
		Provider: w.provider(t),
		Pool:     web,
		Other:    w.pool("batch", zonal(group, zone)),
		Foreign:  func(*testing.T) { w.cloud.AddInstance(group) },
		Refuse: func(t *testing.T, code string) *v1alpha1.NodePool {
			switch code {
			case provider.CodeInsufficientCapacity:
				w.cloud.Exhaust(zone)
			case provider.CodeQuotaExceeded:
				w.cloud.QuotaExceeded()
			case provider.CodeThrottled:
				w.cloud.Throttle(1)
			default:
				t.Fatalf("gcptest makes no refusal %s", code)
			}
			return web
		},
		LoseAnswer: func(*testing.T) { drop.Store(true) },
		Settle:     func(*testing.T) { w.cloud.Settle() },
		Taints: func(t *testing.T, m *provider.Machine) []corev1.Taint {
			_, taints, id, _, ok := w.cloud.Kubelet(m.Name)
			if !ok {
				t.Fatalf("machine %s's instance runs no kubelet", m.Name)
			}
			if id != m.ProviderID {
				t.Errorf("machine %s's kubelet registers providerID %s; the provider says %s", m.Name, id, m.ProviderID)
			}
			return taints
		},
		Count:    func(*testing.T) int { return len(w.cloud.Instances(group)) },
		Restarts: func(_ *testing.T, m *provider.Machine) int { return w.cloud.Resets(m.Name) },
	}
}
