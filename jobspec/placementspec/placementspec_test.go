package placementspec

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-sched/drover/jobspec"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/testkit/golden"
)

// TestGoodConfigs: every file under testdata/good parses into the API
// config its golden file holds.
func TestGoodConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.hcl")
	if len(files) == 0 {
		t.Fatal("no good configs")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, diags := ParseFile(path)
			if diags.HasErrors() {
				t.Fatalf("unexpected errors:\n%s", jobspec.FormatDiagnostics(diags))
			}
			data, err := json.MarshalIndent(cfg, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, path+".golden", append(data, '\n'))
		})
	}
}

// TestBadConfigs: every file under testdata/bad is refused, every problem
// with its file:line:col, as its golden file says.
func TestBadConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.hcl")
	if len(files) == 0 {
		t.Fatal("no bad configs")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, diags := ParseFile(path)
			if !diags.HasErrors() || cfg != nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			for _, d := range diags {
				if d.Subject == nil {
					t.Errorf("diagnostic without a position: %s", d.Summary)
				}
			}
			golden.Check(t, path+".golden", []byte(jobspec.FormatDiagnostics(diags)))
		})
	}
}

// TestParseGroups: a placement file declares cluster groups and puts
// clusters in them; a mistake is reported at file:line:col.
func TestParseGroups(t *testing.T) {
	cfg, diags := ParseFile("testdata/good/groups.hcl")
	if diags.HasErrors() {
		t.Fatal(jobspec.FormatDiagnostics(diags))
	}
	if len(cfg.Groups) != 1 || cfg.Groups[0].Name != "gpu" || cfg.Groups[0].Strategy != "pack" {
		t.Fatalf("groups %+v", cfg.Groups)
	}
	if len(cfg.Clusters) != 2 || cfg.Clusters[0].Group != "gpu" || cfg.Clusters[1].Group != "" || cfg.Clusters[0].Pools[0].Memory != 256<<30 {
		t.Fatalf("clusters %+v", cfg.Clusters)
	}
	_, diags = Parse("p.hcl", []byte("cluster_group \"gpu\" {\n  strategy = \"pack\"\n  spread = true\n}\n"))
	if text := jobspec.FormatDiagnostics(diags); !strings.Contains(text, "p.hcl:3:3") {
		t.Fatalf("an unknown attribute: %q, want it at p.hcl:3:3", text)
	}
}

// TestParseAutoscaler: the autoscaler block (enabled unless it says
// otherwise), launch configs and a cluster's provider; a bad size or
// duration is reported where it is written.
func TestParseAutoscaler(t *testing.T) {
	cfg, diags := ParseFile("testdata/good/autoscaler.hcl")
	if diags.HasErrors() {
		t.Fatal(jobspec.FormatDiagnostics(diags))
	}
	if c := cfg.Clusters[0]; c.Provider != "nomad" || c.ProviderSettings["datacenters"] != "dc1,dc2" {
		t.Fatalf("cluster %+v", c)
	}
	if a := cfg.Autoscaler; a == nil || !a.Enabled || a.MaxNodes != 50 || a.MaxPerHour != 20_500_000_000 || a.IdleTimeout != "90s" || a.Window != "10m" || a.Consolidate == nil || *a.Consolidate {
		t.Fatalf("autoscaler %+v", a)
	}
	if l := cfg.LaunchConfigs[0]; l.Name != "n8" || !l.Spot || l.CPU != 8 || l.Memory != 32<<30 || l.PricePerHour != 120_000_000 {
		t.Fatalf("launch config %+v", l)
	}
	if _, diags := Parse("p.hcl", []byte("launch_config \"x\" {\n  cluster = \"e\"\n}\n")); !strings.Contains(jobspec.FormatDiagnostics(diags), "p.hcl:1:") {
		t.Fatalf("a launch config without cpu: %s", jobspec.FormatDiagnostics(diags))
	}
	_, diags = Parse("p.hcl", []byte("autoscaler {\n  window = \"ten minutes\"\n}\ncluster \"c\" {\n  region = \"r\"\n  pool \"p\" { memory = \"1 GB-ish\" }\n}\n"))
	text := jobspec.FormatDiagnostics(diags)
	if !strings.Contains(text, "p.hcl:2:12: error: Invalid window") || !strings.Contains(text, "p.hcl:6:23: error: Invalid memory") {
		t.Fatalf("a bad duration and a bad size: %s", text)
	}
	if _, diags := Parse("p.hcl", []byte("autoscaler {\n  enabled = false\n}\n")); diags.HasErrors() {
		t.Fatal(jobspec.FormatDiagnostics(diags))
	} else if cfg, _ := Parse("p.hcl", []byte("autoscaler {\n  enabled = false\n}\n")); cfg.Autoscaler.Enabled {
		t.Fatal("enabled = false was not kept")
	}
}

// TestPricesAreReadExactly: prices and spend caps are read from the
// number as written, not through float64: $123456789.123456789 an hour
// (18 digits, more than a float64 holds) is that many nano-dollars, and a
// number written as a string is read alike.
func TestPricesAreReadExactly(t *testing.T) {
	cfg, diags := Parse("p.hcl", []byte(`
cluster "c" {
  region = "r"
  pool "p" { price_per_hour = 0.1 }
}
autoscaler { max_per_hour = 123456789.123456789 }
launch_config "l" {
  cluster        = "c"
  cpu            = 8
  memory         = "32GiB"
  price_per_hour = "0.1175"
  max_per_hour   = 1.3
}
`))
	if diags.HasErrors() {
		t.Fatal(jobspec.FormatDiagnostics(diags))
	}
	if f := 123456789.123456789; money.RateFromDollars(f) == 123_456_789_123_456_789 {
		t.Fatal("float64 holds the cap exactly: the test shows nothing")
	}
	if got := cfg.Autoscaler.MaxPerHour; got != 123_456_789_123_456_789 {
		t.Fatalf("max_per_hour %s (%d)", got, int64(got))
	}
	if p := cfg.Clusters[0].Pools[0].PricePerHour; p != 100_000_000 {
		t.Fatalf("pool price %d", p)
	}
	if l := cfg.LaunchConfigs[0]; l.PricePerHour != 117_500_000 || l.MaxPerHour != 1_300_000_000 {
		t.Fatalf("launch config %+v", l)
	}
}

// TestExamplesParse: the placement configs under examples/placement (the
// one DROVER_DEMO_KEEP=1 make demo applies among them) parse, each with
// what the API checks of its queues.
func TestExamplesParse(t *testing.T) {
	files, _ := filepath.Glob("../../examples/placement/*.hcl")
	if len(files) == 0 {
		t.Fatal("no placement examples")
	}
	for _, path := range files {
		cfg, diags := ParseFile(path)
		if diags.HasErrors() {
			t.Errorf("%s:\n%s", path, jobspec.FormatDiagnostics(diags))
			continue
		}
		if len(cfg.Queues) == 0 {
			t.Errorf("%s declares no queue", path)
		}
	}
}
