package main

import (
	"strings"
	"testing"
)

// TestParsePlacementGroups: a placement file declares cluster groups and
// puts clusters in them; a mistake is reported at file:line:col.
func TestParsePlacementGroups(t *testing.T) {
	src := `
cluster_group "gpu" {
  strategy = "pack"
}
cluster "g1" {
  region = "east"
  group  = "gpu"
  pool "a100" {
    cpu      = 32
    memory   = "256GiB"
    gpu_type = "a100"
    gpus     = 8
  }
}
cluster "c1" {
  region = "east"
}
`
	cfg, err := parsePlacement("p.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Groups) != 1 || cfg.Groups[0].Name != "gpu" || cfg.Groups[0].Strategy != "pack" {
		t.Fatalf("groups %+v", cfg.Groups)
	}
	if len(cfg.Clusters) != 2 || cfg.Clusters[0].Group != "gpu" || cfg.Clusters[1].Group != "" || cfg.Clusters[0].Pools[0].Memory != 256<<30 {
		t.Fatalf("clusters %+v", cfg.Clusters)
	}
	_, err = parsePlacement("p.hcl", []byte("cluster_group \"gpu\" {\n  strategy = \"pack\"\n  spread = true\n}\n"))
	if err == nil || !strings.Contains(err.Error(), "p.hcl:3:3") {
		t.Fatalf("an unknown attribute: %v, want it at p.hcl:3:3", err)
	}
}

// TestParsePlacementAutoscaler: the autoscaler block, launch configs and
// a cluster's provider.
func TestParsePlacementAutoscaler(t *testing.T) {
	src := `
cluster "east" {
  region            = "us-east1"
  provider          = "nomad"
  provider_settings = { address = "https://nomad:4646", datacenters = "dc1,dc2" }
}
autoscaler {
  max_nodes    = 50
  max_per_hour = 20.5
  idle_timeout = "90s"
  consolidate  = false
}
launch_config "n8" {
  cluster        = "east"
  machine_type   = "n2-standard-8"
  zone           = "us-east1-b"
  spot           = true
  cpu            = 8
  memory         = "32GiB"
  price_per_hour = 0.12
}
`
	cfg, err := parsePlacement("p.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Clusters[0]; c.Provider != "nomad" || c.ProviderSettings["datacenters"] != "dc1,dc2" {
		t.Fatalf("cluster %+v", c)
	}
	if a := cfg.Autoscaler; a == nil || !a.Enabled || a.MaxNodes != 50 || a.MaxPerHour != 20.5 || a.IdleTimeout != "90s" || a.Consolidate == nil || *a.Consolidate {
		t.Fatalf("autoscaler %+v", a)
	}
	if l := cfg.LaunchConfigs[0]; l.Name != "n8" || !l.Spot || l.CPU != 8 || l.Memory != 32<<30 || l.PricePerHour != 0.12 {
		t.Fatalf("launch config %+v", l)
	}
	if _, err := parsePlacement("p.hcl", []byte("launch_config \"x\" {\n  cluster = \"e\"\n}\n")); err == nil || !strings.Contains(err.Error(), "p.hcl:1:") {
		t.Fatalf("a launch config without cpu: %v", err)
	}
}
