package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

const tiersHCL = `
queue "org" {
  queue "tier1" {
    weight                = 4
    preempt_after         = "2s"
    allow_preemption_from = ["org/tier3"]
    billing_projects      = ["urgent"]
  }
  queue "tier3" {
    preemptible      = true
    min_runtime      = "1s"
    billing_projects = ["bulk"]
  }
}
`

// tier3Job runs for a while; sent SIGTERM, it writes a checkpoint file
// and says so in its log, then exits (its attempt ends preempted).
const tier3Job = `trap 'echo step $i > checkpoint; echo "checkpoint written at step $i"; exit 0' TERM
i=0
while [ $i -lt 40 ]; do i=$((i+1)); sleep 0.1; done
echo done`

// TestPreemptionForATier1Batch: a tier-1 batch arrives into a cluster full
// of tier-3 work. Tier-3 attempts are preempted with SIGTERM first (each
// writes a checkpoint file in its grace and says so in its log), tier 1
// runs, and the tier-3 jobs run again and finish later; the leader is
// killed while attempts are being stopped, and the new leader carries the
// orders on. Every job succeeds exactly once, no attempt is both
// preempted and succeeded, no failure is counted, and the servers'
// histories agree.
func TestPreemptionForATier1Batch(t *testing.T) {
	c := newCluster(t, 3, "-preempt-interval", "200ms", "-lost-timeout", "30s")
	if _, err := c.StartWorker("w", 4, "4GiB"); err != nil {
		t.Fatal(err)
	}
	admin := c.client()
	ctx := context.Background()
	env := []string{"DROVER_ADDR=" + c.HTTPAddrs(), "DROVER_TOKEN=" + c.token()}
	for _, p := range []string{"urgent", "bulk"} {
		if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: p, Members: []string{"root"}}); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "queues.hcl")
	if err := os.WriteFile(file, []byte(tiersHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	runCLI(t, env, "placement", "apply", file).must(t, 0)
	waitWorkers(t, admin, 1)

	bulk, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bulk", BillingProject: "bulk", Jobs: []api.JobSpec{
		{JobID: 1, Name: "t3", Count: 8, Command: []string{"sh", "-c", tier3Job}, CPU: 1, Memory: 64 << 20, PreemptionGraceSeconds: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	waitBatch(t, admin, bulk.ID, time.Minute, "tier 3 to fill the worker", func(b *api.Batch) bool { return b.NRunning == 4 })
	urgent, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "urgent", BillingProject: "urgent", Jobs: []api.JobSpec{
		{JobID: 1, Name: "t1", Count: 3, Command: []string{"sleep", "0.5"}, CPU: 1, Memory: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	// Once the leader has told the worker to stop tier-3 attempts, kill
	// it: the orders are in the state, and the next leader carries on.
	deadline := time.Now().Add(time.Minute)
	for !stopping(t, admin, bulk.ID) {
		if time.Now().After(deadline) {
			t.Fatal("no tier-3 attempt was preempted within a minute of the tier-1 batch")
		}
		time.Sleep(50 * time.Millisecond)
	}
	leader := c.waitLeader(30 * time.Second)
	c.Servers[leader].Kill9()
	if next := c.waitLeader(30 * time.Second); next == leader {
		t.Fatal("the killed server still leads")
	}
	c.Servers[leader].Start()

	u := waitBatch(t, admin, urgent.ID, 2*time.Minute, "tier 1 to complete", func(b *api.Batch) bool { return b.State == api.BatchComplete })
	b := waitBatch(t, admin, bulk.ID, 3*time.Minute, "tier 3 to complete", func(b *api.Batch) bool { return b.State == api.BatchComplete })
	if u.NSucceeded != 3 || b.NSucceeded != 8 {
		t.Fatalf("tier 1: %d of 3 succeeded; tier 3: %d of 8", u.NSucceeded, b.NSucceeded)
	}
	// Tier 1 finished before tier 3 did.
	if u.TimeCompleted == nil || b.TimeCompleted == nil || !u.TimeCompleted.Before(*b.TimeCompleted) {
		t.Fatalf("tier 1 completed at %v, tier 3 at %v", u.TimeCompleted, b.TimeCompleted)
	}
	jobs, err := admin.AllJobs(ctx, bulk.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	preempted := 0
	for _, j := range jobs {
		ok := 0
		for _, a := range j.Attempts {
			switch a.State {
			case api.OutcomeSuccess:
				ok++
			case api.OutcomePreempted:
				preempted++
				// SIGTERM first: the job checkpointed in its grace.
				log, err := admin.JobLog(ctx, bulk.ID, j.JobID, a.Attempt)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(log), "checkpoint written at step") {
					t.Fatalf("job %d attempt %d was preempted without its SIGTERM: log %q, message %q", j.JobID, a.Attempt, log, a.Message)
				}
			default:
				t.Fatalf("job %d has a %s attempt: %+v", j.JobID, a.State, a)
			}
		}
		if ok != 1 {
			t.Fatalf("job %d has %d successful attempts: %+v", j.JobID, ok, j.Attempts)
		}
	}
	if preempted < 2 {
		t.Fatalf("%d tier-3 attempts preempted, want at least 2 (tier 1's share of the worker)", preempted)
	}
	t.Logf("tier 1 done in %s after it was submitted; %d tier-3 attempts preempted, each after a checkpoint",
		u.TimeCompleted.Sub(u.TimeCreated).Round(time.Millisecond), preempted)
	waitApplied(t, c)
	checkHistories(t, c, 1)
}

// stopping reports whether some attempt of the batch has been told to
// stop (its job's message says so) or has ended preempted.
func stopping(t *testing.T, c *api.Client, batch int64) bool {
	t.Helper()
	jobs, err := c.AllJobs(context.Background(), batch, "")
	if err != nil {
		return false
	}
	for _, j := range jobs {
		if strings.HasPrefix(j.Message, "preempting") {
			return true
		}
		for _, a := range j.Attempts {
			if a.State == api.OutcomePreempted || strings.HasPrefix(a.Message, "preempting") {
				return true
			}
		}
	}
	return false
}
