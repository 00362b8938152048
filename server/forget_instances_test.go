package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/simworker"
)

// TestRetiredInstancesLeaveTheState: a worker that runs a batch, stops
// (its instance retires) and starts again (a new instance) leaves one
// instance record, not two, once its batch has gone to the history store
// and the retention window has passed: a cluster whose workers restart,
// or whose autoscaler makes and deletes machines, does not grow by one
// record per incarnation. The batch's attempts still read with the
// worker's name, and the worker keeps running jobs.
func TestRetiredInstancesLeaveTheState(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.Retention = time.Second })
	ctx := context.Background()
	dist, _ := simworker.ParseDist("10ms")
	runWorker := func() (stop func()) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = simworker.Run(wctx, simworker.Config{Servers: tc.url, Secret: tc.srv.cfg.WorkerSecret, Name: "w",
				Cores: 4, Memory: 8 << 30, Duration: dist, SyncWait: 100 * time.Millisecond, Rec: simworker.NewRecorder()})
		}()
		return func() { cancel(); <-done }
	}
	runBatch := func() int64 {
		t.Helper()
		res, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "b", Jobs: []api.JobSpec{
			{JobID: 1, Name: "j", Count: 3, Command: []string{"true"}, CPU: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the batch to complete", 30*time.Second, func() bool {
			b, err := tc.admin.GetBatch(ctx, res.ID)
			return err == nil && b.State == api.BatchComplete && b.NSucceeded == 3
		})
		return res.ID
	}
	instances := func() []api.Instance {
		t.Helper()
		insts, err := tc.admin.ListInstances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return insts
	}

	stop := runWorker()
	first := runBatch()
	stop() // the worker deactivates: its instance retires
	waitUntil(t, "the first incarnation to retire", 10*time.Second, func() bool {
		in := instances()
		return len(in) == 1 && !in[0].Active
	})
	retired := instances()[0].ID
	stop = runWorker() // the same worker again: a new instance
	defer stop()
	waitUntil(t, "the second incarnation to activate", 10*time.Second, func() bool {
		active, _ := tc.srv.State().InstanceCounts()
		return active == 1
	})

	waitUntil(t, "the batch and the retired instance to leave the state", 30*time.Second, func() bool {
		in := instances()
		return !tc.srv.State().HasBatch(uint64(first)) && len(in) == 1 && in[0].Active && in[0].ID != retired
	})
	if active, gone := tc.srv.State().InstanceCounts(); active != 1 || gone != 0 {
		t.Fatalf("%d active and %d retired instances held, want 1 and 0", active, gone)
	}
	j, err := tc.admin.GetJob(ctx, first, 1)
	if err != nil || len(j.Attempts) != 1 || j.Attempts[0].Instance != "w" {
		t.Fatalf("job 1 of batch %d from the history store: %+v, %v", first, j, err)
	}
	runBatch() // the worker's live incarnation still runs jobs
}
