package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/testkit/simworker"
	"github.com/drover-sched/drover/testkit/spendtrace"
)

// TestSpendLimitCancelsRunningBatches: a billing project whose cost
// (ended attempts and running ones up to now) reaches its spend limit has
// its running batches cancelled within a billing interval, and new work
// refused with 402 naming the limit and the spend; raising the limit lets
// new work in.
func TestSpendLimitCancelsRunningBatches(t *testing.T) {
	srv, tok, err := StartReady(TestConfig(t.TempDir(), testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	ctx := context.Background()
	admin := api.NewClient("http://"+srv.HTTPAddr(), tok)
	// A core costs a dollar a second.
	if _, err := admin.SetRates(ctx, []api.NewRate{{Resource: "compute", PricePerHour: 3600 * money.DollarPerHour}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "lab", Members: []string{"root"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetSpendLimit(ctx, "lab", 2*money.Dollar); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	dist, _ := simworker.ParseDist("10m")
	go func() {
		_ = simworker.Run(wctx, simworker.Config{Servers: "http://" + srv.HTTPAddr(), Secret: "test-secret", Name: "w",
			Cores: 4, Memory: 16 << 30, Duration: dist, SyncWait: 200 * time.Millisecond, Rec: simworker.NewRecorder()})
	}()
	res, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "lab", Jobs: []api.JobSpec{
		{JobID: 1, Command: []string{"sleep", "600"}, CPU: 1, Memory: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	var started time.Time
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := admin.GetBatch(ctx, res.ID)
		if err == nil && b.NRunning == 1 && started.IsZero() {
			started = time.Now()
		}
		if err == nil && b.Cancelled {
			// $2 at $1/s: two seconds of running, and a billing interval.
			took := time.Since(started)
			if started.IsZero() || took < 1500*time.Millisecond || took > 2*time.Second+10*srv.cfg.BillingInterval {
				t.Fatalf("cancelled %s after the job started; the limit is reached after 2s and checked every %s", took, srv.cfg.BillingInterval)
			}
			// Still being stopped or stopped already, the job says why.
			j, err := admin.GetJob(ctx, res.ID, 1)
			if err != nil || !strings.Contains(j.Message, "spend limit") {
				t.Fatalf("the job of the cancelled batch says %q (%v)", j.Message, err)
			}
			waitUntil(t, "the running job is stopped", 10*time.Second, func() bool {
				j, err = admin.GetJob(ctx, res.ID, 1)
				return err == nil && j.State == api.JobCancelled
			})
			if !strings.Contains(j.Message, "spend limit") {
				t.Fatalf("the cancelled job says %q", j.Message)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch was not cancelled (last %+v, %v)", b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = admin.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "lab", NJobs: 1})
	if !api.IsStatus(err, http.StatusPaymentRequired) || !strings.Contains(err.Error(), "spend limit") || !strings.Contains(err.Error(), "$2.00") {
		t.Fatalf("a submission over the limit: %v", err)
	}
	p, _ := admin.SetSpendLimit(ctx, "lab", 1000*money.Dollar)
	if p.Cost < 2*money.Dollar {
		t.Fatalf("the project cost %v, below the limit it reached", p.Cost)
	}
	if _, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "lab", NJobs: 1}); err != nil {
		t.Fatalf("after raising the limit: %v", err)
	}
}

// TestSpendLimitHoldsAsWorkStarts is the hostile tenant of issue 25 item
// 5: a billing project that crosses its limit within seconds, with the
// billing interval at its default (10 s), so no periodic check can save
// it. With many short jobs and a few long ones (a start or an end every
// few milliseconds), and with long jobs alone (nothing happens between
// their start and the crossing: only the leader's timer to the projected
// crossing can stop them), the project's final cost stays within 20% of
// its limit, every attempt is stopped within 2 s of the crossing, and the
// batches say why they were cancelled.
func TestSpendLimitHoldsAsWorkStarts(t *testing.T) {
	for _, c := range []struct {
		name        string
		short, long int
		limit       float64
	}{
		// 400 short jobs would cost $30 and the long ones $1 a second:
		// the limit is crossed after about 4 s, most short jobs still
		// to run.
		{"many short jobs and a few long ones", 400, 2, 16},
		// $1 a second: crossed after 3 s.
		{"long jobs alone", 0, 2, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := TestConfig(t.TempDir(), testLogger(t))
			cfg.BillingInterval = DefaultConfig().BillingInterval
			srv, tok, err := StartReady(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown(context.Background())
			admin := api.NewClient("http://"+srv.HTTPAddr(), tok)
			ids := overspend(t, srv, admin, c.short, c.long, c.limit)
			checkSpendHeld(t, admin, c.limit, ids)
		})
	}
}

// overspend runs, for billing project "lab" with the limit, short jobs
// (150 ms) on a worker of 6 cores in region "fast" and long ones (10
// minutes) on one of 2 cores in region "slow", a core costing 50 cents a
// second, and returns their batches once nothing of them runs.
func overspend(t *testing.T, srv *Server, admin *api.Client, short, long int, limit float64) []int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.SetRates(ctx, []api.NewRate{{Resource: "compute", PricePerHour: 1800 * money.DollarPerHour}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "lab", Members: []string{"root"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetSpendLimit(ctx, "lab", money.FromDollars(limit)); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	for _, w := range []struct {
		name  string
		cores int
		dur   string
	}{{"fast", 6, "150ms"}, {"slow", 2, "10m"}} {
		dist, _ := simworker.ParseDist(w.dur)
		go func() {
			_ = simworker.Run(wctx, simworker.Config{Servers: "http://" + srv.HTTPAddr(), Secret: "test-secret", Name: w.name,
				Region: w.name, Cluster: w.name, Cores: w.cores, Memory: 16 << 30, Duration: dist, SyncWait: 200 * time.Millisecond, Rec: simworker.NewRecorder()})
		}()
	}
	waitUntil(t, "both workers active", 10*time.Second, func() bool {
		ws, err := admin.ListInstances(ctx)
		return err == nil && len(ws) == 2
	})
	var ids []int64
	for _, b := range []struct {
		n               int
		region, command string
	}{{long, "slow", "sleep 600"}, {short, "fast", "true"}} {
		if b.n == 0 {
			continue
		}
		jobs := make([]api.JobSpec, b.n)
		for i := range jobs {
			jobs[i] = api.JobSpec{JobID: int64(i + 1), Command: strings.Fields(b.command), CPU: 1, Memory: 1 << 30, Regions: []string{b.region}}
		}
		res, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "lab", Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	waitUntil(t, "the batches to end", 60*time.Second, func() bool {
		for _, id := range ids {
			b, err := admin.GetBatch(ctx, id)
			if err != nil || b.State == "running" || b.NRunning > 0 {
				return false
			}
		}
		return true
	})
	return ids
}

// checkSpendHeld: the batches were cancelled for the spend limit, the
// project's cost is within 20% of its limit, and its last attempt stopped
// within 2 s of the moment its cost reached the limit (read from the
// attempts' records).
func checkSpendHeld(t *testing.T, admin *api.Client, limit float64, ids []int64) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		b, _ := admin.GetBatch(ctx, id)
		if !b.Cancelled {
			t.Fatalf("batch %d ended without being cancelled: %+v", id, b)
		}
		jobs, err := admin.AllJobs(ctx, id, "state=cancelled")
		if err != nil || len(jobs) == 0 || !strings.Contains(jobs[len(jobs)-1].Message, "batch cancelled: billing project lab reached its spend limit") {
			t.Fatalf("batch %d's cancelled jobs (%v): %+v", id, err, jobs)
		}
	}
	ps, err := admin.ListBillingProjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cost float64
	for _, p := range ps {
		if p.Name == "lab" {
			cost = p.Cost.Dollars()
		}
	}
	tr, err := spendtrace.Read(ctx, admin, ids...)
	if err != nil {
		t.Fatal(err)
	}
	measured, err := tr.Held(limit, cost, 0.2, 2*time.Second)
	t.Log(measured)
	if err != nil {
		t.Error(err)
	}
}
