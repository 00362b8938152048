package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testcluster"
	"github.com/drover-sched/drover/testkit/tftest"
)

// The Terraform provider against a cluster of real server processes
// (terraform/provider's own tests use one in-process server).

// TestTerraformAgainstATLSCluster: the provider configured in Terraform
// (addresses of three servers over HTTPS, the cluster's CA, a token)
// rather than by the environment: create, an empty plan, drift made on
// a follower's address, import of a queue the CLI made over HTTPS, an
// update in place, destroy.
func TestTerraformAgainstATLSCluster(t *testing.T) {
	c, err := testcluster.Start(testcluster.Options{Binary: droverBin, Dir: t.TempDir(), Servers: 3, Net: "127.0.7.", TLS: true})
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
	f := tftest.New(t, "", "")
	f.Env = append(f.Env, "DROVER_ADDR=", "DROVER_TOKEN=", "DROVER_CACERT=")
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
	f.ConfigWith(provider, body)
	f.Must("apply", "-input=false", "-auto-approve")
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan right after apply wants changes:\n%s", f.Last)
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
	if code := f.Plan(); code != 2 || !strings.Contains(f.Last, `"spread" -> "pack"`) {
		t.Fatalf("drift: plan exit %d\n%s", code, f.Last)
	}
	f.Must("apply", "-input=false", "-auto-approve")

	// Import what the CLI made over HTTPS, and an update in place.
	cli := []string{"DROVER_ADDR=" + c.HTTPAddrs(), "DROVER_TOKEN=" + tok, "DROVER_CACERT=" + c.CA}
	if r := runCLI(t, cli, "queue", "set", "made", "-weight", "3"); r.code != 0 {
		t.Fatalf("drover queue set: %+v", r)
	}
	f.ConfigWith(provider, strings.Replace(body, `"pack"`, `"least-loaded"`, 1)+`
resource "drover_queue" "made" {
  path   = "made"
  weight = 3
}
`)
	f.Must("import", "-input=false", "drover_queue.made", "made")
	if code := f.Plan(); code != 2 || !strings.Contains(f.Last, "1 to change") || strings.Contains(f.Last, "must be replaced") {
		t.Fatalf("after import, a strategy changed: plan exit %d\n%s", code, f.Last)
	}
	f.Must("apply", "-input=false", "-auto-approve")
	if q, err := fc.GetQueue(ctx, "team"); err != nil || q.Strategy != "least-loaded" {
		t.Fatalf("team after the update: %+v (%v)", q, err)
	}
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan after the update wants changes:\n%s", f.Last)
	}
	f.Must("destroy", "-input=false", "-auto-approve")
	for _, path := range []string{"team", "made"} {
		if _, err := fc.GetQueue(ctx, path); !api.IsStatus(err, 404) {
			t.Fatalf("queue %s after destroy: %v", path, err)
		}
	}
	// Without the CA the servers cannot be verified: the error says so
	// (a data source reads at plan time).
	f.ConfigWith(fmt.Sprintf(`
provider "drover" {
  address = %q
  token   = %q
}
`, c.HTTPAddrs(), tok), body+`
data "drover_clusters" "all" {}
`)
	if code := f.Run("plan", "-input=false"); code != 1 || !strings.Contains(f.Last, "certificate") {
		t.Fatalf("a plan without the CA: exit %d\n%s", code, f.Last)
	}
}

// TestTerraformOnADevAgent: a dev agent that autoscales local worker
// processes; Terraform declares a cluster of its own, a launch config
// for it, the autoscaler's settings and a queue routed there. A batch
// runs on machines the autoscaler launched from that config, in that
// cluster. Drift made with the drover CLI shows in a plan and is
// repaired; what `drover placement apply` made is imported; destroy
// removes the launch config, waits for its machines to go, and removes
// the cluster.
func TestTerraformOnADevAgent(t *testing.T) {
	dir := t.TempDir()
	a := startAgent(t, dir, "", "-autoscale", "-clusters", "east/a:1x1", "-idle-timeout", "3s")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := a.client()
	waitFor(t, "the agent to declare its autoscaler", 30*time.Second, func() bool {
		st, err := c.AutoscalerStatus(ctx)
		return err == nil && len(st.LaunchConfigs) > 0
	})
	f := tftest.New(t, a.addr, a.token)
	body := `
resource "drover_autoscaler" "this" {
  enabled                = true
  max_nodes              = 3
  idle_timeout           = "3s"
  boot_timeout           = "1m"
  lame_timeout           = "1m"
  window                 = "1m"
  backoff                = "30s"
  max_adds_per_minute    = 30
  max_removes_per_minute = 30
}

resource "drover_cluster" "tf" {
  name   = "tf"
  region = "east"
  pool {
    name = "default"
  }
}

resource "drover_launch_config" "tf" {
  name           = "tf-local"
  cluster        = drover_cluster.tf.name
  machine_type   = "local-1c"
  zone           = "local"
  cpu            = 1
  memory         = "1GiB"
  price_per_hour = "0.04"
  max_nodes      = 2
}

resource "drover_queue" "tf" {
  path             = "tf"
  home_clusters    = [drover_cluster.tf.name]
  billing_projects = ["default"]
}
`
	f.Config(body)
	f.Must("apply", "-input=false", "-auto-approve")
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan right after apply wants changes:\n%s", f.Last)
	}

	// The default project's batches go to the tf queue, which runs them in
	// cluster tf: on machines the autoscaler launches from tf-local.
	b, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "tf", Jobs: []api.JobSpec{{JobID: 1, Count: 4, Command: []string{"true"}, CPU: 0.5, Memory: 16 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the batch to complete in cluster tf", 2*time.Minute, func() bool {
		bt, err := c.GetBatch(ctx, b.ID)
		return err == nil && bt.State == api.BatchComplete
	})
	for j := int64(1); j <= 4; j++ {
		job, err := c.GetJob(ctx, b.ID, j)
		if err != nil || job.State != api.JobSuccess || len(job.Attempts) == 0 || job.Attempts[len(job.Attempts)-1].Cluster != "tf" {
			t.Fatalf("job %d: %+v (%v); want it succeeded in cluster tf", j, job, err)
		}
	}
	st, err := c.AutoscalerStatus(ctx)
	if err != nil || !slices.ContainsFunc(st.Machines, func(m api.Machine) bool { return m.Config == "tf-local" && m.Cluster == "tf" }) {
		t.Fatalf("no machine of tf-local: %+v (%v)", st, err)
	}

	// Drift made with the CLI.
	if r := a.drover(a.token, "cluster", "disable", "tf", "-reason", "by hand"); r.code != 0 {
		t.Fatalf("drover cluster disable: %+v", r)
	}
	if code := f.Plan(); code != 2 || !strings.Contains(f.Last, `"by hand" -> null`) || !strings.Contains(f.Last, "false -> true") {
		t.Fatalf("drift: plan exit %d\n%s", code, f.Last)
	}
	f.Must("apply", "-input=false", "-auto-approve")
	if cl, err := c.GetCluster(ctx, "tf"); err != nil || !cl.Enabled {
		t.Fatalf("cluster tf after the repair: %+v (%v)", cl, err)
	}

	// Import what the CLI made.
	hcl := filepath.Join(t.TempDir(), "placement.hcl")
	if err := os.WriteFile(hcl, []byte(`
cluster "made" {
  region = "east"
}

launch_config "made-local" {
  cluster        = "made"
  cpu            = 1
  memory         = "1GiB"
  price_per_hour = 0.05
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := a.drover(a.token, "placement", "apply", hcl); r.code != 0 {
		t.Fatalf("drover placement apply: %+v", r)
	}
	f.Config(body + `
resource "drover_cluster" "made" {
  name   = "made"
  region = "east"
}

resource "drover_launch_config" "made" {
  name           = "made-local"
  cluster        = drover_cluster.made.name
  cpu            = 1
  memory         = "1GiB"
  price_per_hour = "0.05"
}
`)
	f.Must("import", "-input=false", "drover_cluster.made", "made")
	f.Must("import", "-input=false", "drover_launch_config.made", "made-local")
	if code := f.Plan(); code != 0 {
		t.Fatalf("a plan after import wants changes:\n%s", f.Last)
	}

	// Destroy.
	f.Must("destroy", "-input=false", "-auto-approve")
	st, err = c.AutoscalerStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, lc := range st.LaunchConfigs {
		if lc.Name == "tf-local" || lc.Name == "made-local" {
			t.Fatalf("launch config %s after destroy", lc.Name)
		}
	}
	for _, m := range st.Machines {
		if m.Config == "tf-local" && m.State != "deleted" && m.State != "failed" {
			t.Fatalf("machine %s of tf-local is %s after destroy", m.ID, m.State)
		}
	}
	// tf's retired workers keep its record, undeclared; made had none.
	if cl, err := c.GetCluster(ctx, "tf"); err != nil || cl.Declared || cl.Workers != 0 {
		t.Fatalf("cluster tf after destroy: %+v (%v)", cl, err)
	}
	if _, err := c.GetCluster(ctx, "made"); !api.IsStatus(err, 404) {
		t.Fatalf("cluster made after destroy: %v", err)
	}
}
