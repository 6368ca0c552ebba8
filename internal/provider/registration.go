package provider

import (
	"context"
	"log/slog"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Registration is everything sluice knows about a provider without running
// it, and how to start it. Each provider package exports one; the list in
// internal/provider/registry is where a new one is added.
type Registration struct {
	Name v1alpha1.ProviderName
	// Images is how the provider treats a template's image.
	Images Images
	// Start builds the provider for a controller. It may start work bound
	// to ctx (kwok registers its Nodes in the background).
	Start func(ctx context.Context, env Env) (Provider, error)
}

// Images is how a provider treats spec.template.image.
type Images struct {
	// Unsupported says why the provider cannot choose a machine's image, ""
	// when it can. A pool whose provider cannot is never replaced for its
	// image, and `sluice upgrade pool` refuses it with this reason.
	Unsupported string
	// Check says whether the cloud has the image (nil: any is taken).
	Check func(image string) error
}

// Sets says whether the provider chooses a machine's image.
func (i Images) Sets() bool { return i.Unsupported == "" }

// Env is what a provider is started with.
type Env struct {
	// Client reaches the cluster the controller serves.
	Client kubernetes.Interface
	// Dynamic reaches the same cluster for objects the clientset has no
	// types for (Cluster API's, for the cluster-api provider).
	Dynamic dynamic.Interface
	// Namespace is where the controller keeps its own objects (azure-vmss
	// keeps its claims there).
	Namespace string
	Clock     clock.WithTicker
	Log       *slog.Logger
}
