package kwok

import (
	"context"

	"github.com/sluice-dev/sluice/internal/provider"
	"github.com/sluice-dev/sluice/pkg/apis/v1alpha1"
)

// Registration is the kwok provider as the registry lists it: it sets the
// image a template names, from the simulated cloud's catalogue.
var Registration = provider.Registration{
	Name:   v1alpha1.ProviderKwok,
	Images: provider.Images{Check: CheckImage},
	Start: func(ctx context.Context, env provider.Env) (provider.Provider, error) {
		p := New(env.Client, env.Clock, Options{Log: env.Log.With("provider", v1alpha1.ProviderKwok)})
		go func() { _ = p.Run(ctx) }()
		return p, nil
	},
}
