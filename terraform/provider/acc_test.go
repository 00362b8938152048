package provider_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/testcluster"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server"
)

// Acceptance tests: the real terraform binary (make test installs 1.5.7
// into .tools; $TERRAFORM names another) runs this repository's provider
// through dev_overrides against a real drover server: create, a plan
// with nothing to do, an update in place, drift made outside Terraform
// found and repaired, import, plan-time errors naming the attribute,
// destroy.

// moduleRoot is the repository's root (where go.mod is).
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

func terraformBinary(t *testing.T, root string) string {
	t.Helper()
	if p := os.Getenv("TERRAFORM"); p != "" {
		return p
	}
	p := filepath.Join(root, ".tools", "terraform")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no terraform at %s: `make test` (make tools) installs Terraform 1.5.7 there, or set TERRAFORM", p)
	}
	return p
}

// tf runs terraform in a working directory against one server.
type tf struct {
	t    *testing.T
	bin  string
	dir  string
	env  []string
	last string
}

func newTF(t *testing.T, addr, token string) *tf {
	t.Helper()
	root := moduleRoot(t)
	bin := terraformBinary(t, root)
	plugins := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(plugins, "terraform-provider-drover"), "./cmd/terraform-provider-drover")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the provider: %v\n%s", err, out)
	}
	home := t.TempDir()
	rc := filepath.Join(home, "terraformrc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf(`provider_installation {
  dev_overrides {
    "drover-sched/drover" = %q
  }
  direct {}
}
`, plugins)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "HOME="+home, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1",
		"DROVER_ADDR="+addr, "DROVER_TOKEN="+token)
	return &tf{t: t, bin: bin, dir: t.TempDir(), env: env}
}

// config writes main.tf, the provider configured by the environment.
func (f *tf) config(body string) {
	f.t.Helper()
	f.configWith(`
provider "drover" {}
`, body)
}

// configWith writes main.tf with a provider block.
func (f *tf) configWith(provider, body string) {
	f.t.Helper()
	src := `terraform {
  required_providers {
    drover = { source = "drover-sched/drover" }
  }
}
` + provider + body
	if err := os.WriteFile(filepath.Join(f.dir, "main.tf"), []byte(src), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// run runs terraform and returns its exit code (its output in f.last).
func (f *tf) run(args ...string) int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, append([]string{args[0], "-no-color"}, args[1:]...)...)
	cmd.Dir, cmd.Env = f.dir, f.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	f.last = out.String()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	f.t.Fatalf("terraform %v: %v\n%s", args, err, f.last)
	return -1
}

func (f *tf) must(args ...string) {
	f.t.Helper()
	if code := f.run(args...); code != 0 {
		f.t.Fatalf("terraform %v: exit %d\n%s", args, code, f.last)
	}
}

// plan runs terraform plan -detailed-exitcode: 0 nothing to do, 2 changes.
func (f *tf) plan() int {
	f.t.Helper()
	code := f.run("plan", "-input=false", "-detailed-exitcode")
	if code == 1 {
		f.t.Fatalf("terraform plan failed:\n%s", f.last)
	}
	return code
}

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
	f := newTF(t, addr, tok)

	// Create.
	f.config(fmt.Sprintf(mainConfig, 2))
	f.must("apply", "-input=false", "-auto-approve")
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
	f.must("output", "-json", "queue_paths")
	if !strings.Contains(f.last, `"research/lab"`) {
		t.Fatalf("the queues data source: %s", f.last)
	}
	f.must("output", "-raw", "ci_token")
	ci := strings.TrimSpace(f.last)
	if u, err := api.NewClient(addr, ci).Whoami(ctx); err != nil || u.Name != "alice" {
		t.Fatalf("the token Terraform made: %v %v", u, err)
	}
	if code := f.plan(); code != 0 {
		t.Fatalf("a plan right after apply wants changes:\n%s", f.last)
	}

	// Update in place.
	f.config(fmt.Sprintf(mainConfig, 3))
	if code := f.plan(); code != 2 || !strings.Contains(f.last, "updated in-place") || strings.Contains(f.last, "must be replaced") {
		t.Fatalf("changing a weight: plan exit %d\n%s", code, f.last)
	}
	f.must("apply", "-input=false", "-auto-approve")
	if org, err := admin.GetQueue(ctx, "research"); err != nil || org.Weight != 3 {
		t.Fatalf("research after the update: %+v (%v)", org, err)
	}
	if code := f.plan(); code != 0 {
		t.Fatalf("a plan after the update wants changes:\n%s", f.last)
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
	if code := f.plan(); code != 2 || !strings.Contains(f.last, "drover_queue.lab will be updated in-place") || !strings.Contains(f.last, "drover_token.ci will be created") ||
		!strings.Contains(f.last, `"300" -> "250"`) {
		t.Fatalf("drift: plan exit %d\n%s", code, f.last)
	}
	f.must("apply", "-input=false", "-auto-approve")
	if lab, err := admin.GetQueue(ctx, "research/lab"); err != nil || lab.Guarantee.CPU != 4 {
		t.Fatalf("research/lab after the repair: %+v (%v)", lab, err)
	}
	f.must("output", "-raw", "ci_token")
	if fresh := strings.TrimSpace(f.last); fresh == ci {
		t.Fatal("the revoked token was not made again")
	} else {
		ci = fresh
	}
	if code := f.plan(); code != 0 {
		t.Fatalf("a plan after the repair wants changes:\n%s", f.last)
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
	f.config(imported)
	f.must("import", "-input=false", "drover_queue.hand", "research/made-by-hand")
	if code := f.plan(); code != 0 {
		t.Fatalf("a plan after import wants changes:\n%s", f.last)
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
		f.config(imported + bad)
		if code := f.run("plan", "-input=false"); code != 1 || !strings.Contains(f.last, attr) {
			t.Fatalf("a bad %s: plan exit %d\n%s", attr, code, f.last)
		}
	}

	// Destroy.
	f.config(imported)
	f.must("destroy", "-input=false", "-auto-approve")
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

// TestTerraformAgainstATLSCluster: the provider configured in Terraform
// (addresses of three servers over HTTPS, the cluster's CA, a token)
// rather than by the environment: create, an empty plan, drift made on
// a follower's address, destroy.
func TestTerraformAgainstATLSCluster(t *testing.T) {
	root := moduleRoot(t)
	bin := filepath.Join(t.TempDir(), "drover")
	build := exec.Command("go", "build", "-o", bin, "./cmd/drover")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build drover: %v\n%s", err, out)
	}
	c, err := testcluster.Start(testcluster.Options{Binary: bin, Dir: t.TempDir(), Servers: 3, Net: "127.0.7.", TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.WaitToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := newTF(t, "", "")
	f.env = append(f.env, "DROVER_ADDR=", "DROVER_TOKEN=", "DROVER_CACERT=")
	provider := fmt.Sprintf(`
provider "drover" {
  address = %q
  ca_file = %q
  token   = %q
}
`, c.HTTPAddrs(), c.CA, tok)
	body := `
resource "drover_queue" "team" {
  path      = "team"
  guarantee = { cpu = 2, memory = "4GiB" }
  strategy  = "pack"
}
`
	f.configWith(provider, body)
	f.must("apply", "-input=false", "-auto-approve")
	if code := f.plan(); code != 0 {
		t.Fatalf("a plan right after apply wants changes:\n%s", f.last)
	}
	// Drift through a follower.
	follower := c.Servers[(leader+1)%3]
	fc := follower.NewClient(tok)
	q, err := fc.GetQueue(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	q.Strategy = "spread"
	if _, err := fc.PutQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	if code := f.plan(); code != 2 || !strings.Contains(f.last, `"spread" -> "pack"`) {
		t.Fatalf("drift: plan exit %d\n%s", code, f.last)
	}
	f.must("apply", "-input=false", "-auto-approve")
	f.must("destroy", "-input=false", "-auto-approve")
	if _, err := fc.GetQueue(ctx, "team"); !api.IsStatus(err, 404) {
		t.Fatalf("the queue after destroy: %v", err)
	}
	// Without the CA the servers cannot be verified: the error says so
	// (a data source reads at plan time).
	f.configWith(fmt.Sprintf(`
provider "drover" {
  address = %q
  token   = %q
}
`, c.HTTPAddrs(), tok), body+`
data "drover_clusters" "all" {}
`)
	if code := f.run("plan", "-input=false"); code != 1 || !strings.Contains(f.last, "certificate") {
		t.Fatalf("a plan without the CA: exit %d\n%s", code, f.last)
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
	f := newTF(t, addr, tok)
	f.config(fmt.Sprintf(`
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
`, filepath.Join(moduleRoot(t), "terraform", "modules", "region")))
	f.must("get") // installs the local module; init would ask the registry for the provider
	f.must("apply", "-input=false", "-auto-approve")
	eu, err := admin.GetQueue(ctx, "org/europe-west4")
	if err != nil || eu.Guarantee.CPU != 4 || strings.Join(eu.HomeClusters, ",") != "europe-west4-a,europe-west4-b" || eu.Strategy != "least-loaded" {
		t.Fatalf("org/europe-west4: %+v (%v)", eu, err)
	}
	if code := f.plan(); code != 0 {
		t.Fatalf("a plan after applying the module wants changes:\n%s", f.last)
	}
	f.must("destroy", "-input=false", "-auto-approve")
	if _, err := admin.GetQueue(ctx, "org"); !api.IsStatus(err, 404) {
		t.Fatalf("org after destroy: %v", err)
	}
}
