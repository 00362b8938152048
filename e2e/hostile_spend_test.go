package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/spendtrace"
)

// TestHostileSpendLimit is the hostile tenant of issue 25 item 5 against
// the real dev agent, its real workers and real process jobs: a member of
// a billing project with a spend limit submits far more work than the
// limit pays for, many short jobs and a few long ones, so the limit is
// crossed within seconds (the billing interval is its 10 s default). The
// project ends within 20% of its limit, its last attempt stops within 2 s
// of the crossing, the batch says why it was cancelled, and the next
// submission is refused with 402.
func TestHostileSpendLimit(t *testing.T) {
	a := startAgent(t, "", "", "-workers", "2", "-worker-cores", "4", "-worker-memory", "4GiB")
	// A core costs 50 cents a second: the 8 cores burn $4 a second.
	a.drover(a.token, "rate", "set", "compute", "1800").must(t, 0)
	tenant := strings.TrimSpace(a.drover(a.token, "user", "create", "tenant").must(t, 0).stdout)
	a.drover(a.token, "billing-project", "create", "lab", "-member", "tenant").must(t, 0)
	const limit = 20.0
	a.drover(a.token, "billing-project", "set-limit", "lab", strconv.FormatFloat(limit, 'f', -1, 64)).must(t, 0)
	// 400 jobs of 200 ms (about $40) and two of ten minutes ($1 a second):
	// the limit is crossed after about 5 s.
	spec := writeSpec(t, `batch "overspend" {
  billing_project = "lab"
  job "long" {
    count   = 2
    command = ["sleep", "600"]
    cpu     = 1
    memory  = "64MiB"
  }
  job "short" {
    count   = 400
    command = ["sleep", "0.2"]
    cpu     = 1
    memory  = "64MiB"
  }
}
`)
	id, _ := strconv.ParseInt(batchID(t, a.drover(tenant, "run", spec).must(t, 0).stdout), 10, 64)
	c := api.NewClient(a.addr, tenant)
	ctx := context.Background()
	var b *api.Batch
	waitFor(t, "the batch to stop", 60*time.Second, func() bool {
		var err error
		b, err = c.GetBatch(ctx, id)
		return err == nil && b.State != "running" && b.NRunning == 0
	})
	if !b.Cancelled || b.NSucceeded >= 400 {
		t.Fatalf("the batch ended %s, cancelled %v, %d succeeded: the limit did not stop it", b.State, b.Cancelled, b.NSucceeded)
	}
	jobs, err := c.AllJobs(ctx, id, "state=cancelled")
	if err != nil || len(jobs) == 0 || !strings.HasPrefix(jobs[len(jobs)-1].Message, "batch cancelled: billing project lab reached its spend limit of $20.00") {
		t.Fatalf("cancelled jobs (%v): %+v", err, jobs)
	}
	ps, err := c.ListBillingProjects(ctx)
	if err != nil || len(ps) != 1 {
		t.Fatalf("billing projects %+v (%v)", ps, err)
	}
	cost := ps[0].Cost.Dollars()
	tr, err := spendtrace.Read(ctx, c, id)
	if err != nil {
		t.Fatal(err)
	}
	measured, err := tr.Held(limit, cost, 0.2, 2*time.Second)
	t.Logf("%s; %d jobs succeeded", measured, b.NSucceeded)
	if err != nil {
		t.Error(err)
	}
	r := a.drover(tenant, "run", spec).must(t, 1)
	if !strings.Contains(r.stderr, "402") || !strings.Contains(r.stderr, "spend limit") {
		t.Errorf("a submission past the limit: %s", r.stderr)
	}
}
