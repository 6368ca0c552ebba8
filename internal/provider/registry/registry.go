// Package registry is the list of the providers sluice can run. Adding a
// provider is one package under internal/provider that exports a
// provider.Registration, and one line in All.
package registry

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/internal/provider/aksagentpool"
	"github.com/sluice-dev/sluice/internal/provider/awsasg"
	"github.com/sluice-dev/sluice/internal/provider/azurevmss"
	"github.com/sluice-dev/sluice/internal/provider/clusterapi"
	"github.com/sluice-dev/sluice/internal/provider/gcpmig"
	"github.com/sluice-dev/sluice/internal/provider/kwok"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// All lists every provider, in the order help text names them.
var All = []provider.Registration{
	kwok.Registration,
	awsasg.Registration,
	azurevmss.Registration,
	aksagentpool.Registration,
	gcpmig.Registration,
	clusterapi.Registration,
}

// Names are the providers' names, as --providers and spec.provider.name take
// them.
func Names() []v1alpha1.ProviderName {
	names := make([]v1alpha1.ProviderName, len(All))
	for i, r := range All {
		names[i] = r.Name
	}
	return names
}

// Lookup returns the named provider's registration.
func Lookup(name v1alpha1.ProviderName) (provider.Registration, bool) {
	for _, r := range All {
		if r.Name == name {
			return r, true
		}
	}
	return provider.Registration{}, false
}

// Images is how the named provider treats a template's image; a name sluice
// does not know (a pool with no provider) sets no image.
func Images(name v1alpha1.ProviderName) provider.Images {
	if r, ok := Lookup(name); ok {
		return r.Images
	}
	return provider.Images{Unsupported: "sluice makes no machines for it"}
}

// Start starts the named providers.
func Start(ctx context.Context, names []v1alpha1.ProviderName, env provider.Env) (provider.Set, error) {
	set := provider.Set{}
	for _, name := range names {
		r, ok := Lookup(name)
		if !ok {
			return nil, fmt.Errorf("--providers %q: sluice knows %v", name, Names())
		}
		p, err := r.Start(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("--providers %s: %w", name, err)
		}
		set[name] = p
	}
	return set, nil
}
