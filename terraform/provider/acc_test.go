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
	"github.com/drover-sched/drover/internal/tftest"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server"
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
	srv, tok, err := server.StartReady(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	addr := "http://" + srv.HTTPAddr()
	admin := api.NewClient(addr, tok)
	ctx := context.Background()
	f := tftest.New(t, addr, tok)

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
		!strings.Contains(f.Last, `"300" -> "250"`) {
		t.Fatalf("drift: plan exit %d\n%s", code, f.Last)
	}
	f.Must("apply", "-input=false", "-auto-approve")
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
	imported := fmt.Sprintf(mainConfig, 3) + `
resource "drover_queue" "hand" {
  path       = "research/made-by-hand"
  weight     = 5
  guarantee  = { cpu = 1 }
  depends_on = [drover_queue.org] # its parent: made first, destroyed last
}
`
	f.Config(imported)
	f.Must("import", "-input=false", "drover_queue.hand", "research/made-by-hand")
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
// (terraform/modules/region, a queue per region routed to its clusters)
// applied for real, as the example calls it: for_each over regions,
// under an organization's queue.
func TestRegionModuleApplies(t *testing.T) {
	cfg := server.TestConfig(t.TempDir(), slog.New(slog.DiscardHandler))
	srv, tok, err := server.StartReady(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	addr := "http://" + srv.HTTPAddr()
	admin := api.NewClient(addr, tok)
	ctx := context.Background()
	f := tftest.New(t, addr, tok)
	f.Config(fmt.Sprintf(`
locals {
  regions = {
    us-east1     = { clusters = ["us-east1-a"], cpu = 8 }
    europe-west4 = { clusters = ["europe-west4-a", "europe-west4-b"], cpu = 4 }
  }
}

resource "drover_queue" "org" {
  path      = "org"
  guarantee = { cpu = 12 }
}

module "region" {
  source        = %q
  for_each      = local.regions
  region        = each.key
  clusters      = each.value.clusters
  parent_queue  = drover_queue.org.path
  guarantee_cpu = each.value.cpu
}
`, filepath.Join(tftest.ModuleRoot(t), "terraform", "modules", "region")))
	f.Must("get") // installs the local module; init would ask the registry for the provider
	f.Must("apply", "-input=false", "-auto-approve")
	eu, err := admin.GetQueue(ctx, "org/europe-west4")
	if err != nil || eu.Guarantee.CPU != 4 || strings.Join(eu.HomeClusters, ",") != "europe-west4-a,europe-west4-b" || eu.Strategy != "least-loaded" {
		t.Fatalf("org/europe-west4: %+v (%v)", eu, err)
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan after applying the module wants changes:\n%s", f.Last)
	}
	f.Must("destroy", "-input=false", "-auto-approve")
	if _, err := admin.GetQueue(ctx, "org"); !api.IsStatus(err, 404) {
		t.Fatalf("org after destroy: %v", err)
	}
}
