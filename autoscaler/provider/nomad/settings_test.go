package nomad

import (
	"slices"
	"testing"
)

// TestOptionsFromSettings: a cluster's provider_settings become Options,
// datacenters split at commas with blanks dropped, the token from the
// server and never from the settings.
func TestOptionsFromSettings(t *testing.T) {
	o := OptionsFromSettings("prod", map[string]string{"address": "https://nomad:4646", "region": "east", "namespace": "batch",
		"datacenters": " dc1, ,dc2,", "driver": "exec", "binary": "/opt/drover", "token": "from-settings"}, "secret")
	if o.Address != "https://nomad:4646" || o.Region != "east" || o.Namespace != "batch" || !slices.Equal(o.Datacenters, []string{"dc1", "dc2"}) ||
		o.Driver != "exec" || o.Binary != "/opt/drover" || o.Deployment != "prod" || o.Token != "secret" {
		t.Fatalf("%+v", o)
	}
	if o := OptionsFromSettings("prod", nil, ""); o.Datacenters != nil || o.Deployment != "prod" {
		t.Fatalf("no settings: %+v", o)
	}
}
