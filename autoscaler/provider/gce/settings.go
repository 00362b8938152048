package gce

import (
	"errors"
	"strings"

	"google.golang.org/api/option"
)

// OptionsFromSettings reads a cluster's provider_settings (placement
// config) for deployment: project, image or instance_template, and
// optionally binary, network and endpoint (a private endpoint, or a
// plain-HTTP one, a test's fake, which takes no credentials). The
// server's own credentials (application default) are used otherwise.
func OptionsFromSettings(deployment string, settings map[string]string) (Options, error) {
	if settings["project"] == "" || settings["image"] == "" && settings["instance_template"] == "" {
		return Options{}, errors.New("a gce provider needs project and image (or instance_template) settings")
	}
	var opts []option.ClientOption
	if ep := settings["endpoint"]; ep != "" {
		opts = append(opts, option.WithEndpoint(ep))
		if strings.HasPrefix(ep, "http://") {
			opts = append(opts, option.WithoutAuthentication())
		}
	}
	return Options{Project: settings["project"], Deployment: deployment, Image: settings["image"], Binary: settings["binary"],
		Network: settings["network"], InstanceTemplate: settings["instance_template"], ClientOptions: opts}, nil
}
