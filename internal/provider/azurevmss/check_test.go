package azurevmss_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss/azuretest"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// CheckRegistration reads the models' user data: a set whose kubelet
// registers with the unregistered taint is fine, one that does not is named,
// and an AKS node pool's set, whose model shows no user data, cannot be told.
func TestCheckRegistrationReadsTheModels(t *testing.T) {
	for _, tc := range []struct {
		name    string
		model   azuretest.Model
		named   bool
		unknown bool
	}{
		{"the model registers it", azuretest.Model{NodeTaints: []corev1.Taint{provider.Unregistered}}, false, false},
		{"the model does not", azuretest.Model{NodeLabels: map[string]string{"tier": "web"}}, true, false},
		{"an AKS node pool's set", azuretest.Model{AKSManaged: true, NodeTaints: []corev1.Taint{provider.Unregistered}}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.cloud.AddSetWithModel("aks-web-vmss", "Standard_D4s_v5", 1, tc.model)
			why, err := w.provider(3).CheckRegistration(ctx(t), pool("web", "aks-web-vmss"))
			if unknown := errors.Is(err, provider.ErrCannotTell); unknown != tc.unknown || err != nil && !unknown {
				t.Fatalf("CheckRegistration error %v; want cannot-tell %v", err, tc.unknown)
			}
			if tc.unknown && !strings.Contains(err.Error(), string(v1alpha1.ProviderAKS)) {
				t.Errorf("%v does not point AKS users to the aks-agentpool provider", err)
			}
			if named := strings.Contains(why, "aks-web-vmss"); named != tc.named {
				t.Errorf("CheckRegistration = %q; want the set named: %v", why, tc.named)
			}
		})
	}
}
