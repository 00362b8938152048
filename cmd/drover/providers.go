package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"google.golang.org/api/option"

	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/autoscaler/provider/gce"
	"github.com/drover-sched/drover/autoscaler/provider/nomad"
	"github.com/drover-sched/drover/server"
)

// providerFactory makes the providers clusters declare in the placement
// config, with this server's credentials: GCE's application default
// credentials, NOMAD_TOKEN for Nomad. The local provider belongs to the
// dev agent.
func providerFactory(ctx context.Context, deployment string) server.ProviderFactory {
	return func(cluster, kind string, settings map[string]string) (provider.Provider, error) {
		switch kind {
		case "gce":
			if settings["project"] == "" || settings["image"] == "" && settings["instance_template"] == "" {
				return nil, fmt.Errorf("cluster %s: a gce provider needs project and image (or instance_template) settings", cluster)
			}
			var opts []option.ClientOption
			if ep := settings["endpoint"]; ep != "" {
				// A private endpoint, or a plain-HTTP one (a test's fake)
				// that takes no credentials.
				opts = append(opts, option.WithEndpoint(ep))
				if strings.HasPrefix(ep, "http://") {
					opts = append(opts, option.WithoutAuthentication())
				}
			}
			return gce.New(ctx, gce.Options{Project: settings["project"], Deployment: deployment, Image: settings["image"], Binary: settings["binary"],
				Network: settings["network"], InstanceTemplate: settings["instance_template"], ClientOptions: opts})
		case "nomad":
			var dcs []string
			for _, d := range strings.Split(settings["datacenters"], ",") {
				if d = strings.TrimSpace(d); d != "" {
					dcs = append(dcs, d)
				}
			}
			return nomad.New(nomad.Options{Address: settings["address"], Region: settings["region"], Namespace: settings["namespace"], Datacenters: dcs,
				Token: os.Getenv("NOMAD_TOKEN"), Deployment: deployment, Driver: settings["driver"], Binary: settings["binary"]})
		case "local":
			return nil, fmt.Errorf("cluster %s: the local provider runs only in the dev agent (drover agent -dev -autoscale)", cluster)
		}
		return nil, fmt.Errorf("cluster %s: unknown provider %q", cluster, kind)
	}
}
