package registry

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// env is what `sluice controller` starts providers with, over a fake
// clientset: starting a provider reads nothing from the cluster.
func env() provider.Env {
	return provider.Env{Client: k8sfake.NewClientset(), Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Namespace: "sluice-system", Clock: clock.RealClock{}, Log: slog.New(slog.DiscardHandler)}
}

// credentials are what a cloud's default credential chain finds on a
// machine of that cloud, with nothing that reaches a network when read
// (no instance metadata service, no token endpoint): the providers start
// without asking their clouds anything.
func credentials(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join("testdata", "gcp-authorized-user.json"))
}

// `sluice controller --providers` with every provider the registry lists
// starts each of them, as the chart's controller.providers runs them.
func TestEveryProviderStarts(t *testing.T) {
	credentials(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	set, err := Start(ctx, Names(), env())
	if err != nil {
		t.Fatalf("Start(%v): %v", Names(), err)
	}
	for _, name := range Names() {
		if set[name] == nil {
			t.Errorf("Start(%v) started no %s", Names(), name)
		}
	}
	for _, want := range []v1alpha1.ProviderName{v1alpha1.ProviderAKS, v1alpha1.ProviderGCPMIG, v1alpha1.ProviderClusterAPI} {
		if _, ok := Lookup(want); !ok {
			t.Errorf("the registry lists no %s", want)
		}
	}
}

// A provider that cannot start says which and why, and starts nothing.
// (gcp-mig reads its credentials at start; azidentity's chain, aks-agentpool's
// and azure-vmss's, and the AWS SDK's are read at the first request, so
// those providers start and their pools say what is missing.)
func TestAProviderWithoutCredentialsSaysSo(t *testing.T) {
	credentials(t)
	missing := filepath.Join(t.TempDir(), "missing.json")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", missing)
	_, err := Start(context.Background(), []v1alpha1.ProviderName{v1alpha1.ProviderAKS, v1alpha1.ProviderGCPMIG}, env())
	if err == nil || !strings.Contains(err.Error(), "--providers gcp-mig") || !strings.Contains(err.Error(), missing) {
		t.Errorf("Start with GOOGLE_APPLICATION_CREDENTIALS naming no file: %v; want an error naming --providers gcp-mig and the file", err)
	}
	if _, err := Start(context.Background(), []v1alpha1.ProviderName{"gce"}, env()); err == nil || !strings.Contains(err.Error(), "sluice knows") {
		t.Errorf("Start(gce): %v; want it refused, naming the providers sluice knows", err)
	}
}
