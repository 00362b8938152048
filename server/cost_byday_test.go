package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/testkit/simworker"
)

// TestCostByDayHasTodaysRunningCost: the API's cost report by day, of a
// project whose only job runs now, has today's row with what it has cost
// so far as Running (the billing page, which adds Cost and Running of the
// rows, said "in these days $0.01" of such a project), while Total stays
// what ended attempts cost.
func TestCostByDayHasTodaysRunningCost(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A core costs a dollar a second.
	if _, err := tc.admin.SetRates(ctx, []api.NewRate{{Resource: "compute", PricePerHour: 3600 * money.DollarPerHour}}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	dist, _ := simworker.ParseDist("10m")
	go func() {
		_ = simworker.Run(wctx, simworker.Config{Servers: tc.url, Secret: tc.srv.cfg.WorkerSecret, Name: "w",
			Cores: 4, Memory: 16 << 30, Duration: dist, SyncWait: 200 * time.Millisecond, Rec: simworker.NewRecorder()})
	}()
	res, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "default", Jobs: []api.JobSpec{
		{JobID: 1, Command: []string{"sleep", "600"}, CPU: 1, Memory: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the job to run", 20*time.Second, func() bool {
		b, err := tc.admin.GetBatch(ctx, res.ID)
		return err == nil && b.NRunning == 1
	})
	time.Sleep(100 * time.Millisecond) // some cost: $0.10 at least
	before := time.Now().UTC().Format(time.DateOnly)
	c, err := tc.admin.ProjectCost(ctx, "default", api.CostQuery{By: api.CostByDay})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UTC().Format(time.DateOnly) // the same day, but at midnight
	if len(c.Rows) != 1 || (c.Rows[0].Day != before && c.Rows[0].Day != after) || c.Rows[0].Cost != 0 || c.Rows[0].Running < money.Dollar/10 {
		t.Fatalf("cost by day of a project whose one job runs today: %+v, want today's row with $0.10 or more running", c.Rows)
	}
	if c.Total != 0 || c.Running < money.Dollar/10 {
		t.Fatalf("report total %v (ended), running %v", c.Total, c.Running)
	}
}
