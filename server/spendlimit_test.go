package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/simworker"
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
	if _, err := admin.SetRates(ctx, []api.NewRate{{Resource: "compute", PricePerHour: 3600}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "lab", Members: []string{"root"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetSpendLimit(ctx, "lab", 2); err != nil {
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
	p, _ := admin.SetSpendLimit(ctx, "lab", 1000)
	if p.Cost < 2 {
		t.Fatalf("the project cost %v, below the limit it reached", p.Cost)
	}
	if _, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "lab", NJobs: 1}); err != nil {
		t.Fatalf("after raising the limit: %v", err)
	}
}
