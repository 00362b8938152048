package gce

import "testing"

// TestOptionsFromSettings: a cluster's provider_settings become Options;
// a cluster without a project, or without an image or a template, is
// refused before any client is made.
func TestOptionsFromSettings(t *testing.T) {
	o, err := OptionsFromSettings("prod", map[string]string{"project": "p", "image": "img", "binary": "/opt/drover", "network": "n",
		"endpoint": "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Project != "p" || o.Deployment != "prod" || o.Image != "img" || o.Binary != "/opt/drover" || o.Network != "n" || len(o.ClientOptions) != 2 {
		t.Fatalf("%+v: want every setting, and a plain-HTTP endpoint without authentication", o)
	}
	if o, err := OptionsFromSettings("prod", map[string]string{"project": "p", "instance_template": "t", "endpoint": "https://gce.internal"}); err != nil || o.InstanceTemplate != "t" || len(o.ClientOptions) != 1 {
		t.Fatalf("%+v %v: want the template, and an HTTPS endpoint with credentials", o, err)
	}
	if o, _ := OptionsFromSettings("prod", map[string]string{"project": "p", "image": "i"}); len(o.ClientOptions) != 0 {
		t.Fatalf("no endpoint: %+v", o)
	}
	for _, bad := range []map[string]string{{"image": "i"}, {"project": "p"}, nil} {
		if _, err := OptionsFromSettings("prod", bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
