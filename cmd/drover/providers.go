package main

import (
	"context"
	"fmt"
	"os"

	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/autoscaler/provider/gce"
	"github.com/drover-sched/drover/autoscaler/provider/nomad"
	"github.com/drover-sched/drover/server"
)

// providerFactory makes the providers clusters declare in the placement
// config, with this server's credentials: GCE's application default
// credentials, NOMAD_TOKEN for Nomad. The local provider belongs to the
// dev agent. Each provider package reads its own settings.
func providerFactory(ctx context.Context, deployment string) server.ProviderFactory {
	return func(cluster, kind string, settings map[string]string) (provider.Provider, error) {
		switch kind {
		case "gce":
			opts, err := gce.OptionsFromSettings(deployment, settings)
			if err != nil {
				return nil, fmt.Errorf("cluster %s: %w", cluster, err)
			}
			return gce.New(ctx, opts)
		case "nomad":
			return nomad.New(nomad.OptionsFromSettings(deployment, settings, os.Getenv("NOMAD_TOKEN")))
		case "local":
			return nil, fmt.Errorf("cluster %s: the local provider runs only in the dev agent (drover agent -dev -autoscale)", cluster)
		}
		return nil, fmt.Errorf("cluster %s: unknown provider %q", cluster, kind)
	}
}
