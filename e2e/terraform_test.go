package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/testcluster"
	"github.com/drover-sched/drover/internal/tftest"
)

// The Terraform provider against a cluster of real server processes
// (terraform/provider's own tests use one in-process server).

// TestTerraformAgainstATLSCluster: the provider configured in Terraform
// (addresses of three servers over HTTPS, the cluster's CA, a token)
// rather than by the environment: create, an empty plan, drift made on
// a follower's address, destroy.
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
	f.Must("destroy", "-input=false", "-auto-approve")
	if _, err := fc.GetQueue(ctx, "team"); !api.IsStatus(err, 404) {
		t.Fatalf("the queue after destroy: %v", err)
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
