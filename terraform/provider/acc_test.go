package provider_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	simcloud "github.com/drover-sched/drover/autoscaler/provider/sim"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/testkit/tftest"
)

// Acceptance tests: the real terraform binary (make test installs 1.5.7
// into .tools; $TERRAFORM names another) runs this repository's provider
// through dev_overrides against a real drover server: create, a plan
// with nothing to do, an update in place, drift made outside Terraform
// found and repaired, import, plan-time errors naming the attribute,
// destroy.

const mainConfig = `
resource "drover_queue" "org" {
  path      = "research"
  weight    = %d
  guarantee = { cpu = 8, memory = "32GiB" }
}

resource "drover_queue" "lab" {
  path             = "${drover_queue.org.path}/lab"
  guarantee        = { cpu = 4 }
  borrow_limit     = { cpu = 2 }
  max_running      = { jobs = 100 }
  reclaim_grace    = "10m"
  billing_projects = ["default"]
}

resource "drover_user" "alice" {
  name = "alice"
}

resource "drover_token" "ci" {
  user = drover_user.alice.name
  name = "ci"
  ttl  = "24h"
}

resource "drover_billing_project" "ml" {
  name        = "ml"
  members     = { (drover_user.alice.name) = "manager" }
  spend_limit = "250"
  log_quota   = "1GiB"
}

resource "drover_storage_prefix" "ml" {
  project              = drover_billing_project.ml.name
  prefix               = "s3://ml-data/inputs"
  s3_access_key_id     = "AKIAEXAMPLEKEY"
  s3_secret_access_key = "not-a-real-secret"
  s3                   = { endpoint = "https://minio.example:9000", path_style = true }
}

output "ci_token" {
  value     = drover_token.ci.token
  sensitive = true
}

data "drover_queues" "all" {
  depends_on = [drover_queue.lab]
}

output "queue_paths" {
  value = [for q in data.drover_queues.all.queues : q.path]
}
`

func TestTerraformLifecycle(t *testing.T) {
	cfg := server.TestConfig(t.TempDir(), slog.New(slog.DiscardHandler))
	cfg.DefaultTokenTTL = time.Hour
	f, admin, addr := startTF(t, cfg)
	ctx := context.Background()

	// Create.
	f.Config(fmt.Sprintf(mainConfig, 2))
	f.Must("apply", "-input=false", "-auto-approve")
	lab, err := admin.GetQueue(ctx, "research/lab")
	if err != nil || lab.Guarantee.CPU != 4 || lab.ReclaimGrace != "10m0s" || lab.MaxRunning.Jobs != 100 || lab.BorrowLimit == nil || *lab.BorrowLimit.CPU != 2 {
		t.Fatalf("research/lab after apply: %+v (%v)", lab, err)
	}
	ps, err := admin.ListBillingProjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ml *api.BillingProject
	for i := range ps {
		if ps[i].Name == "ml" {
			ml = &ps[i]
		}
	}
	if ml == nil || strings.Join(ml.Managers, ",") != "alice" || ml.SpendLimit != 250*money.Dollar || ml.LogQuota != 1<<30 {
		t.Fatalf("billing project ml after apply: %+v", ml)
	}
	if sp, err := admin.ListStoragePrefixes(ctx, "ml"); err != nil || len(sp) != 1 || sp[0].Prefix != "s3://ml-data/inputs" || sp[0].Credentials != api.CredentialsS3Keys ||
		sp[0].S3 == nil || !sp[0].S3.PathStyle {
		t.Fatalf("ml's storage prefixes after apply: %+v (%v)", sp, err)
	}
	f.Must("output", "-json", "queue_paths")
	if !strings.Contains(f.Last, `"research/lab"`) {
		t.Fatalf("the queues data source: %s", f.Last)
	}
	f.Must("output", "-raw", "ci_token")
	ci := strings.TrimSpace(f.Last)
	if u, err := api.NewClient(addr, ci).Whoami(ctx); err != nil || u.Name != "alice" {
		t.Fatalf("the token Terraform made: %v %v", u, err)
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan right after apply wants changes:\n%s", f.Last)
	}

	// Update in place.
	f.Config(fmt.Sprintf(mainConfig, 3))
	if code := f.Plan(); code != 2 || !strings.Contains(f.Last, "updated in-place") || strings.Contains(f.Last, "must be replaced") {
		t.Fatalf("changing a weight: plan exit %d\n%s", code, f.Last)
	}
	f.Must("apply", "-input=false", "-auto-approve")
	if org, err := admin.GetQueue(ctx, "research"); err != nil || org.Weight != 3 {
		t.Fatalf("research after the update: %+v (%v)", org, err)
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan after the update wants changes:\n%s", f.Last)
	}

	// Drift made outside Terraform shows in a plan, and apply repairs it.
	lab.Guarantee.CPU = 6
	if _, err := admin.PutQueue(ctx, lab); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetSpendLimit(ctx, "ml", 300*money.Dollar); err != nil {
		t.Fatal(err)
	}
	// The prefix's keys replaced by the workers' own identity.
	if _, err := admin.AddStoragePrefix(ctx, "ml", &api.AddStoragePrefixRequest{Prefix: "s3://ml-data/inputs",
		S3: &api.S3Settings{Endpoint: "https://minio.example:9000", PathStyle: true}}); err != nil {
		t.Fatal(err)
	}
	toks, err := admin.ListTokens(ctx, "alice", false)
	if err != nil || len(toks) == 0 {
		t.Fatalf("alice's tokens: %v %v", toks, err)
	}
	for _, tk := range toks {
		if tk.Name == "ci" {
			if err := admin.RevokeToken(ctx, tk.Accessor); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code := f.Plan(); code != 2 || !strings.Contains(f.Last, "drover_queue.lab will be updated in-place") || !strings.Contains(f.Last, "drover_token.ci will be created") ||
		!strings.Contains(f.Last, `"300" -> "250"`) || !strings.Contains(f.Last, "drover_storage_prefix.ml will be updated in-place") {
		t.Fatalf("drift: plan exit %d\n%s", code, f.Last)
	}
	f.Must("apply", "-input=false", "-auto-approve")
	if sp, err := admin.ListStoragePrefixes(ctx, "ml"); err != nil || len(sp) != 1 || sp[0].Credentials != api.CredentialsS3Keys {
		t.Fatalf("ml's storage prefix after the repair: %+v (%v)", sp, err)
	}
	if lab, err := admin.GetQueue(ctx, "research/lab"); err != nil || lab.Guarantee.CPU != 4 {
		t.Fatalf("research/lab after the repair: %+v (%v)", lab, err)
	}
	f.Must("output", "-raw", "ci_token")
	if fresh := strings.TrimSpace(f.Last); fresh == ci {
		t.Fatal("the revoked token was not made again")
	} else {
		ci = fresh
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan after the repair wants changes:\n%s", f.Last)
	}

	// Import what was made outside Terraform.
	if _, err := admin.PutQueue(ctx, &api.Queue{Path: "research/made-by-hand", Weight: 5, Guarantee: api.Quota{CPU: 1}, BillingProjects: []string{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddStoragePrefix(ctx, "ml", &api.AddStoragePrefixRequest{Prefix: "gs://ml-results/out/"}); err != nil {
		t.Fatal(err)
	}
	imported := fmt.Sprintf(mainConfig, 3) + `
resource "drover_queue" "hand" {
  path       = "research/made-by-hand"
  weight     = 5
  guarantee  = { cpu = 1 }
  depends_on = [drover_queue.org] # its parent: made first, destroyed last
}

resource "drover_storage_prefix" "results" {
  project = drover_billing_project.ml.name
  prefix  = "gs://ml-results/out/"
}
`
	f.Config(imported)
	f.Must("import", "-input=false", "drover_queue.hand", "research/made-by-hand")
	f.Must("import", "-input=false", "drover_storage_prefix.results", "ml:gs://ml-results/out/")
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan after import wants changes:\n%s", f.Last)
	}

	// Bad input is a plan-time error naming the attribute.
	for attr, bad := range map[string]string{
		"preempt_threshold": `resource "drover_queue" "bad" {
  path              = "research/bad"
  preempt_threshold = 2
}
`,
		"reclaim_grace": `resource "drover_queue" "bad" {
  path          = "research/bad"
  reclaim_grace = "forever"
}
`,
		"name": `resource "drover_user" "bad" {
  name = "no spaces allowed"
}
`,
		"members": `resource "drover_billing_project" "bad" {
  name    = "bad"
  members = { alice = "boss" }
}
`,
		"prefix": `resource "drover_storage_prefix" "bad" {
  project = "ml"
  prefix  = "ftp://nope"
}
`,
		"spend_limit": `resource "drover_billing_project" "bad" {
  name        = "bad"
  spend_limit = "lots"
}
`,
	} {
		f.Config(imported + bad)
		if code := f.Run("plan", "-input=false"); code != 1 || !strings.Contains(f.Last, attr) {
			t.Fatalf("a bad %s: plan exit %d\n%s", attr, code, f.Last)
		}
	}

	// Destroy.
	f.Config(imported)
	f.Must("destroy", "-input=false", "-auto-approve")
	for _, p := range []string{"research/lab", "research/made-by-hand", "research"} {
		if _, err := admin.GetQueue(ctx, p); !api.IsStatus(err, 404) {
			t.Errorf("queue %s after destroy: %v", p, err)
		}
	}
	if _, err := api.NewClient(addr, ci).Whoami(ctx); err == nil {
		t.Error("the token still works after destroy")
	}
	if ps, _ := admin.ListBillingProjects(ctx); slices.ContainsFunc(ps, func(p api.BillingProject) bool { return p.Name == "ml" }) {
		t.Error("billing project ml is still there after destroy")
	}
	users, _ := admin.ListUsers(ctx)
	for _, u := range users {
		if u.Name == "alice" {
			t.Error("alice is still there after destroy")
		}
	}
}

// TestRegionModuleApplies: the drover side of the multi-region example
// (terraform/modules/region: the region's clusters, a launch config per
// cluster and machine type, a queue routed to the clusters) applied for
// real, as the example calls it: for_each over regions, under an
// organization's queue.
func TestRegionModuleApplies(t *testing.T) {
	cfg := server.TestConfig(t.TempDir(), slog.New(slog.DiscardHandler))
	f, admin, _ := startTF(t, cfg)
	ctx := context.Background()
	f.Config(fmt.Sprintf(`
locals {
  regions = {
    us-east1     = { clusters = { us-east1-b = { zone = "us-east1-b" } }, cpu = 8 }
    europe-west4 = { clusters = { europe-west4-a = { zone = "europe-west4-a" }, europe-west4-b = { zone = "europe-west4-b" } }, cpu = 4 }
  }
  machine_types = {
    n2-8      = { machine_type = "n2-standard-8", cpu = 8, memory = "32GiB", price_per_hour = "0.3885" }
    n2-8-spot = { machine_type = "n2-standard-8", cpu = 8, memory = "32GiB", price_per_hour = "0.0945", spot = true }
  }
}

resource "drover_queue" "org" {
  path      = "org"
  guarantee = { cpu = 12 }
}

module "region" {
  source            = %q
  for_each          = local.regions
  region            = each.key
  clusters          = each.value.clusters
  machine_types     = local.machine_types
  machine_provider  = "local"
  provider_settings = { binary = "/usr/local/bin/drover" }
  parent_queue      = drover_queue.org.path
  guarantee_cpu     = each.value.cpu
}
`, filepath.Join(tftest.ModuleRoot(t), "terraform", "modules", "region")))
	f.Must("get") // installs the local module; init would ask the registry for the provider
	f.Must("apply", "-input=false", "-auto-approve")
	eu, err := admin.GetQueue(ctx, "org/europe-west4")
	if err != nil || eu.Guarantee.CPU != 4 || strings.Join(eu.HomeClusters, ",") != "europe-west4-a,europe-west4-b" || eu.Strategy != "least-loaded" {
		t.Fatalf("org/europe-west4: %+v (%v)", eu, err)
	}
	for _, name := range []string{"us-east1-b", "europe-west4-a", "europe-west4-b"} {
		if cl, err := admin.GetCluster(ctx, name); err != nil || !cl.Declared || cl.Provider != "local" || len(cl.Pools) != 1 {
			t.Fatalf("cluster %s: %+v (%v)", name, cl, err)
		}
	}
	st, err := admin.AutoscalerStatus(ctx)
	if err != nil || len(st.LaunchConfigs) != 6 {
		t.Fatalf("launch configs: %+v (%v); want 2 per cluster", st, err)
	}
	for _, lc := range st.LaunchConfigs {
		if lc.Name == "europe-west4-b-n2-8-spot" && (!lc.Spot || lc.Zone != "europe-west4-b" || lc.Cluster != "europe-west4-b" || lc.PricePerHour != money.RateFromDollars(0.0945)) {
			t.Fatalf("launch config %+v", lc)
		}
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan after applying the module wants changes:\n%s", f.Last)
	}
	f.Must("destroy", "-input=false", "-auto-approve")
	if _, err := admin.GetQueue(ctx, "org"); !api.IsStatus(err, 404) {
		t.Fatalf("org after destroy: %v", err)
	}
	if _, err := admin.GetCluster(ctx, "europe-west4-a"); !api.IsStatus(err, 404) {
		t.Fatalf("cluster europe-west4-a after destroy: %v", err)
	}
}

// placementConfig declares what a placement config does, as resources:
// a cluster group, two clusters (one out of service), the autoscaler, a
// launch config and a rate.
const placementConfig = `
resource "drover_cluster_group" "gpu" {
  name     = "gpu"
  strategy = "pack"
}

resource "drover_cluster" "east" {
  name             = "east-a"
  region           = "us-east1"
  group            = drover_cluster_group.gpu.name
  machine_provider = "local"
  provider_settings = { binary = "/usr/local/bin/drover" }

  pool {
    name           = "default"
    cpu            = 8
    memory         = "32GiB"
    price_per_hour = "0.40"
  }
  pool {
    name           = "spot"
    cpu            = 8
    memory         = "32GiB"
    preemptible    = true
    price_per_hour = "0.12"
  }
}

resource "drover_cluster" "west" {
  name   = "west-a"
  region = "us-west1"
  %s
}

resource "drover_autoscaler" "this" {
  enabled      = false
  max_nodes    = %d
  max_per_hour = "5.50"
  idle_timeout = "5m"
}

resource "drover_launch_config" "n2" {
  name           = "east-a-n2-8"
  cluster        = drover_cluster.east.name
  machine_type   = "n2-standard-8"
  zone           = "us-east1-b"
  cpu            = 8
  memory         = "32GiB"
  price_per_hour = "%s"
  max_nodes      = 4
}

resource "drover_rate" "compute" {
  resource       = "compute"
  price_per_hour = "%s"
}
`

func TestTerraformPlacement(t *testing.T) {
	cfg := server.TestConfig(t.TempDir(), slog.New(slog.DiscardHandler))
	f, admin, addr := startTF(t, cfg)
	ctx := context.Background()
	disabled := `enabled = false
  disabled_reason = "racks moving"`
	config := func(west string, maxNodes int, lcPrice, rate string) string {
		return fmt.Sprintf(placementConfig, west, maxNodes, lcPrice, rate)
	}
	rateOf := func(res string) api.Rate {
		t.Helper()
		rates, err := admin.Rates(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rates {
			if r.Resource == res && r.InForce {
				return r
			}
		}
		t.Fatalf("no rate of %s in %+v", res, rates)
		return api.Rate{}
	}
	launchConfig := func(name string) *api.LaunchConfig {
		t.Helper()
		st, err := admin.AutoscalerStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range st.LaunchConfigs {
			if st.LaunchConfigs[i].Name == name {
				return &st.LaunchConfigs[i].LaunchConfig
			}
		}
		return nil
	}

	// Create.
	f.Config(config(disabled, 10, "0.40", "0.035"))
	f.Must("apply", "-input=false", "-auto-approve")
	east, err := admin.GetCluster(ctx, "east-a")
	if err != nil || !east.Declared || east.Group != "gpu" || east.Provider != "local" || east.ProviderSettings["binary"] != "/usr/local/bin/drover" ||
		len(east.Pools) != 2 || east.Pools[1].Name != "spot" || !east.Pools[1].Preemptible || east.Pools[0].PricePerHour != money.RateFromDollars(0.4) ||
		east.Pools[0].Memory != 32<<30 {
		t.Fatalf("east-a after apply: %+v (%v)", east, err)
	}
	if west, err := admin.GetCluster(ctx, "west-a"); err != nil || west.Enabled || west.Reason != "racks moving" {
		t.Fatalf("west-a after apply: %+v (%v)", west, err)
	}
	st, err := admin.AutoscalerStatus(ctx)
	if err != nil || st.Settings.Enabled || st.Settings.MaxNodes != 10 || st.Settings.MaxPerHour != money.RateFromDollars(5.5) || st.Settings.IdleTimeout != "5m0s" {
		t.Fatalf("autoscaler after apply: %+v (%v)", st, err)
	}
	if lc := launchConfig("east-a-n2-8"); lc == nil || lc.Cluster != "east-a" || lc.CPU != 8 || lc.PricePerHour != money.RateFromDollars(0.4) || lc.MaxNodes != 4 {
		t.Fatalf("launch config after apply: %+v", lc)
	}
	compute := rateOf("compute")
	if compute.PricePerHour != money.RateFromDollars(0.035) {
		t.Fatalf("compute rate after apply: %+v", compute)
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan right after apply wants changes:\n%s", f.Last)
	}

	// Update in place: west-a back in service, a cap, a price, a rate.
	f.Config(config("", 12, "0.38", "0.04"))
	if code := f.Plan(); code != 2 || strings.Contains(f.Last, "must be replaced") || !strings.Contains(f.Last, "4 to change") {
		t.Fatalf("an update: plan exit %d\n%s", code, f.Last)
	}
	f.Must("apply", "-input=false", "-auto-approve")
	if west, err := admin.GetCluster(ctx, "west-a"); err != nil || !west.Enabled {
		t.Fatalf("west-a after the update: %+v (%v)", west, err)
	}
	if r := rateOf("compute"); r.PricePerHour != money.RateFromDollars(0.04) || r.Version != compute.Version+1 {
		t.Fatalf("compute rate after the update: %+v (was %+v)", r, compute)
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan after the update wants changes:\n%s", f.Last)
	}

	// Drift made outside Terraform shows in a plan, and apply repairs it.
	if _, err := admin.DisableCluster(ctx, "east-a", &api.ClusterStateRequest{Reason: "by hand"}); err != nil {
		t.Fatal(err)
	}
	lc := launchConfig("east-a-n2-8")
	lc.PricePerHour = money.RateFromDollars(0.5)
	if err := admin.ApplyPlacement(ctx, &api.PlacementConfig{LaunchConfigs: []api.LaunchConfig{*lc},
		Autoscaler: &api.AutoscalerSettings{MaxNodes: 20, MaxPerHour: money.RateFromDollars(5.5), IdleTimeout: "5m"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetRates(ctx, []api.NewRate{{Resource: "compute", PricePerHour: money.RateFromDollars(0.05)}}); err != nil {
		t.Fatal(err)
	}
	if code := f.Plan(); code != 2 || !strings.Contains(f.Last, `"by hand" -> null`) || !strings.Contains(f.Last, `"0.5" -> "0.38"`) ||
		!strings.Contains(f.Last, "20 -> 12") || !strings.Contains(f.Last, `"0.05" -> "0.04"`) {
		t.Fatalf("drift: plan exit %d\n%s", code, f.Last)
	}
	f.Must("apply", "-input=false", "-auto-approve")
	if east, err := admin.GetCluster(ctx, "east-a"); err != nil || !east.Enabled {
		t.Fatalf("east-a after the repair: %+v (%v)", east, err)
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan after the repair wants changes:\n%s", f.Last)
	}

	// Import what was made outside Terraform.
	if err := admin.ApplyPlacement(ctx, &api.PlacementConfig{Groups: []api.ClusterGroup{{Name: "cpu"}},
		Clusters:      []api.ClusterDecl{{Name: "eu-a", Region: "europe-west4", Group: "cpu", Pools: []api.Pool{{Name: "default", CPU: 4, Memory: 16 << 30}}}},
		LaunchConfigs: []api.LaunchConfig{{Name: "eu-a-e2", Cluster: "eu-a", MachineType: "e2-standard-4", CPU: 4, Memory: 16 << 30, PricePerHour: money.RateFromDollars(0.134)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetRates(ctx, []api.NewRate{{Resource: "memory", PricePerHour: money.RateFromDollars(0.0045)}}); err != nil {
		t.Fatal(err)
	}
	imported := config("", 12, "0.38", "0.04") + `
resource "drover_cluster_group" "cpu" {
  name = "cpu"
}

resource "drover_cluster" "eu" {
  name   = "eu-a"
  region = "europe-west4"
  group  = drover_cluster_group.cpu.name
  pool {
    name   = "default"
    cpu    = 4
    memory = "16GiB"
  }
}

resource "drover_launch_config" "eu" {
  name           = "eu-a-e2"
  cluster        = drover_cluster.eu.name
  machine_type   = "e2-standard-4"
  cpu            = 4
  memory         = "16GiB"
  price_per_hour = "0.134"
}

resource "drover_rate" "memory" {
  resource       = "memory"
  price_per_hour = "0.0045"
}
`
	f.Config(imported)
	for addr, id := range map[string]string{"drover_cluster_group.cpu": "cpu", "drover_cluster.eu": "eu-a", "drover_launch_config.eu": "eu-a-e2", "drover_rate.memory": "memory"} {
		f.Must("import", "-input=false", addr, id)
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan after import wants changes:\n%s", f.Last)
	}
	// The one autoscaler, imported into a second state.
	g := tftest.New(t, addr, admin.Token())
	g.Config(`
resource "drover_autoscaler" "this" {
  enabled      = false
  max_nodes    = 12
  max_per_hour = "5.5"
  idle_timeout = "5m" # an import spells a duration the shortest way
}
`)
	g.Must("import", "-input=false", "drover_autoscaler.this", "autoscaler")
	if code := g.Plan(); code != 0 {
		t.Fatalf("a plan after importing the autoscaler wants changes:\n%s", g.Last)
	}

	// Bad input is a plan-time error naming the attribute.
	for attr, bad := range map[string]string{
		"machine_provider": `resource "drover_cluster" "bad" {
  name             = "bad"
  region           = "r"
  machine_provider = "aws"
}
`,
		"disabled_reason": `resource "drover_cluster" "bad" {
  name    = "bad"
  region  = "r"
  enabled = false
}
`,
		"price_per_hour": `resource "drover_cluster" "bad" {
  name   = "bad"
  region = "r"
  pool {
    name           = "p"
    price_per_hour = "-1"
  }
}
`,
		"region": `resource "drover_cluster" "bad" {
  name   = "bad"
  region = "no spaces"
}
`,
		"strategy": `resource "drover_cluster_group" "bad" {
  name     = "bad"
  strategy = "random"
}
`,
		"cpu": `resource "drover_launch_config" "bad" {
  name           = "bad"
  cluster        = "east-a"
  cpu            = 0
  memory         = "1GiB"
  price_per_hour = "1"
}
`,
		"max_per_hour": `resource "drover_autoscaler" "bad" {
  enabled      = true
  max_per_hour = "a lot"
}
`,
		"resource": `resource "drover_rate" "bad" {
  resource       = "Compute!"
  price_per_hour = "1"
}
`,
	} {
		f.Config(imported + bad)
		if code := f.Run("plan", "-input=false"); code != 1 || !strings.Contains(f.Last, attr) {
			t.Fatalf("a bad %s: plan exit %d\n%s", attr, code, f.Last)
		}
	}

	// Destroy: what was declared goes, in dependency order; the rates
	// stay in force, and the autoscaler is back to its defaults.
	f.Config(imported)
	f.Must("destroy", "-input=false", "-auto-approve")
	if !strings.Contains(f.Last, "stays in force") {
		t.Errorf("destroy says nothing of the rates staying:\n%s", f.Last)
	}
	for _, name := range []string{"east-a", "west-a", "eu-a"} {
		if _, err := admin.GetCluster(ctx, name); !api.IsStatus(err, 404) {
			t.Errorf("cluster %s after destroy: %v", name, err)
		}
	}
	if gs, _ := admin.ListClusterGroups(ctx); len(gs) != 0 {
		t.Errorf("cluster groups after destroy: %+v", gs)
	}
	if st, err := admin.AutoscalerStatus(ctx); err != nil || len(st.LaunchConfigs) != 0 || st.Settings.Enabled || st.Settings.MaxNodes != 0 {
		t.Errorf("autoscaler after destroy: %+v (%v)", st, err)
	}
	if r := rateOf("memory"); r.PricePerHour != money.RateFromDollars(0.0045) {
		t.Errorf("the memory rate after destroy: %+v", r)
	}
}

// TestTerraformCloudPrice: a launch config with price_from_cloud and no
// price_per_hour applies; once the leader has read the cloud's price
// (here the simulated cloud's, as a provider.Pricer), a plan shows no
// drift; without either, the plan fails naming price_per_hour.
func TestTerraformCloudPrice(t *testing.T) {
	cfg := server.TestConfig(t.TempDir(), slog.New(slog.DiscardHandler))
	cfg.Autoscale = server.DefaultAutoscaleConfig()
	cfg.Autoscale.Provider = simcloud.New(simcloud.Options{Clock: leader.WallClock{}, BootDelay: time.Hour, Prices: map[string]money.Rate{"east-n2": 388_472_000}})
	cfg.Autoscale.Interval = 50 * time.Millisecond
	cfg.Autoscale.PriceRefresh = time.Second
	f, admin, _ := startTF(t, cfg)
	body := `
resource "drover_cluster" "east" {
  name   = "east"
  region = "us-east1"
}

resource "drover_autoscaler" "this" {
  enabled = true
}

resource "drover_launch_config" "n2" {
  name             = "east-n2"
  cluster          = drover_cluster.east.name
  machine_type     = "n2-standard-8"
  zone             = "us-east1-b"
  cpu              = 8
  memory           = "32GiB"
  %s
}
`
	f.Config(fmt.Sprintf(body, "price_from_cloud = true"))
	f.Must("apply", "-input=false", "-auto-approve")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := admin.AutoscalerStatus(context.Background())
		if err == nil && len(st.LaunchConfigs) == 1 && st.LaunchConfigs[0].PricedAt != nil && st.LaunchConfigs[0].PricePerHour == 388_472_000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cloud's price was not read within 30 s: %+v, %v", st, err)
		}
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("plan after the cloud's price was read: exit %d (drift)\n%s", code, f.Last)
	}
	f.Config(fmt.Sprintf(body, ""))
	if code := f.Run("plan", "-input=false"); code == 0 || !strings.Contains(f.Last, "price_per_hour") {
		t.Fatalf("plan without a price: exit %d\n%s", code, f.Last)
	}
}

// startTF starts a server with cfg and a Terraform working directory
// whose provider talks to it as the admin.
func startTF(t *testing.T, cfg *server.Config) (*tftest.TF, *api.Client, string) {
	t.Helper()
	srv, tok, err := server.StartReady(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	addr := "http://" + srv.HTTPAddr()
	return tftest.New(t, addr, tok), api.NewClient(addr, tok), addr
}
