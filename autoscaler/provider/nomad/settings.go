package nomad

import "strings"

// OptionsFromSettings reads a cluster's provider_settings (placement
// config) for deployment: address, region, namespace, datacenters (comma
// separated), driver and binary. token is the server's NOMAD_TOKEN: a
// credential never travels in the placement config.
func OptionsFromSettings(deployment string, settings map[string]string, token string) Options {
	var dcs []string
	for _, d := range strings.Split(settings["datacenters"], ",") {
		if d = strings.TrimSpace(d); d != "" {
			dcs = append(dcs, d)
		}
	}
	return Options{Address: settings["address"], Region: settings["region"], Namespace: settings["namespace"], Datacenters: dcs,
		Token: token, Deployment: deployment, Driver: settings["driver"], Binary: settings["binary"]}
}
