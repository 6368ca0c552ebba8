package cli

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// `sluice upgrade pool` asks the pool's provider about the image before it
// changes anything: every provider sluice has sets images, in its own form.
func TestUpgradeAsksTheProviderAboutTheImage(t *testing.T) {
	tests := []struct {
		provider v1alpha1.ProviderName
		image    string
		refusal  string // "" when accepted
	}{
		{v1alpha1.ProviderKwok, "img-2", ""},
		{v1alpha1.ProviderAWSASG, "ami-0123456789abcdef0", ""},
		{v1alpha1.ProviderAWSASG, "AKSUbuntu-2204gen2containerd-202612.01.0", "ami-"},
		{v1alpha1.ProviderAzureVMSS, "Canonical:ubuntu-24_04-lts:server:24.04.202411120", ""},
		{v1alpha1.ProviderAzureVMSS, "/subscriptions/109a5e88-712a-48ae-9078-9ca8b3c81345/resourceGroups/AKS-Ubuntu/providers/Microsoft.Compute/galleries/AKSUbuntu/images/2204gen2containerd/versions/202412.03.0", ""},
		{v1alpha1.ProviderAzureVMSS, "Canonical:ubuntu-24_04-lts:server:latest", "latest"},
		{v1alpha1.ProviderNone, "img-2", "cannot set a machine's image"},
	}
	for _, tt := range tests {
		t.Run(string(tt.provider)+" "+tt.image, func(t *testing.T) {
			pool := &v1alpha1.NodePool{Spec: v1alpha1.NodePoolSpec{Provider: v1alpha1.ProviderSpec{Name: tt.provider}}}
			pool.Name = "web"
			err := checkImage(pool, tt.image)
			switch {
			case tt.refusal == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.refusal != "" && (err == nil || !strings.Contains(err.Error(), tt.refusal)):
				t.Errorf("checkImage = %v, want a refusal naming %q", err, tt.refusal)
			}
		})
	}
}
