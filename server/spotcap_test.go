package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestSpotCapThroughTheAPI: a job submitted with max_spot_attempts 1
// whose spot worker (a preemptible pool's) says its machine is being
// reclaimed (the worker's goodbye, preempted) comes back kept off spot:
// the job reads on_demand_only, a spot worker gets nothing of it, job why
// says spot_excluded, and an on-demand worker runs it. A job without the
// cap goes to the spot worker as before.
func TestSpotCapThroughTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "c", Region: "r", Pools: []api.Pool{
		{Name: "spot", CPU: 2, Memory: 8 << 30, Preemptible: true}, {Name: "std", CPU: 2, Memory: 8 << 30}}}}}); err != nil {
		t.Fatal(err)
	}
	activate := func(name, pool string) *simWorker {
		return activateSimWorker(t, tc, &api.ActivateRequest{Name: name, CPU: 1, Memory: 8 << 30, Region: "r", Cluster: "c", Pool: pool})
	}
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{
		{JobID: 1, Name: "capped", Command: []string{"sleep", "60"}, CPU: 1, Memory: 1 << 20, MaxSpotAttempts: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	w := activate("spot-1", "spot")
	if res := w.sync(5 * time.Second); len(res.Assign) != 1 {
		t.Fatalf("the spot worker was given %d attempts, want the capped job's first", len(res.Assign))
	}
	// The machine is reclaimed: the worker says so as it leaves.
	if err := w.c.Workers().Deactivate(ctx, true); err != nil {
		t.Fatal(err)
	}
	j, err := tc.admin.GetJob(ctx, b.ID, 1)
	if err != nil || !j.OnDemandOnly || j.MaxSpotAttempts != 1 || j.State != api.JobReady || !strings.Contains(j.Message, "on-demand machines from now on") {
		t.Fatalf("after its spot machine was reclaimed the job reads %+v (%v); want ready, on_demand_only", j, err)
	}
	// Another spot worker, and a second job that may take spot: it runs
	// there (the capped job, listed first, does not take the room in the
	// round's plan only for apply to refuse it).
	w2 := activate("spot-2", "spot")
	b2, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{{JobID: 1, Name: "any", Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	var res *api.SyncResponse
	for range 10 {
		if res = w2.sync(time.Second); len(res.Assign) > 0 {
			break
		}
	}
	if len(res.Assign) != 1 || res.Assign[0].BatchID != b2.ID {
		t.Fatalf("the spot worker was given %+v; want the uncapped job only", res.Assign)
	}
	waitFor(t, "job why to say spot_excluded", func() bool {
		why, err := tc.admin.JobWhy(ctx, b.ID, 1)
		return err == nil && slices.ContainsFunc(why.Reasons, func(r api.WhyReason) bool { return r.Reason == "spot_excluded" }) &&
			slices.ContainsFunc(why.Reasons, func(r api.WhyReason) bool { return r.Reason == "on_demand_only" })
	})
	od := activate("od-1", "std")
	res = od.sync(5 * time.Second)
	if len(res.Assign) != 1 || res.Assign[0].BatchID != b.ID || res.Assign[0].Attempt != 2 {
		t.Fatalf("the on-demand worker was given %+v; want the capped job's second attempt", res.Assign)
	}
}
