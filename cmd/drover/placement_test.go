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
