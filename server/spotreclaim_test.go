package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestOneReclaimCountsOnce (found by a tenant's attack, helper-16): a spot
// worker told its machine is being reclaimed does what worker.shutdown
// does: it preempts what it runs, reports it (preempted, worker_leaving)
// and says goodbye (Deactivate preempted). Between its report and its
// goodbye the instance was still active with the room the preempted
// attempt freed, so the round put the job straight back on the dying
// worker, and the goodbye counted that attempt as a second reclaim: one
// machine reclaimed once kept a job with max_spot_attempts 2 off spot.
// Now nothing more is placed on a worker that said it is leaving.
func TestOneReclaimCountsOnce(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "c", Region: "r", Pools: []api.Pool{
		{Name: "spot", CPU: 2, Memory: 8 << 30, Preemptible: true}}}}}); err != nil {
		t.Fatal(err)
	}
	w := activateSimWorker(t, tc, &api.ActivateRequest{Name: "spot-1", CPU: 1, Memory: 8 << 30, Region: "r", Cluster: "c", Pool: "spot"})
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{
		{JobID: 1, Name: "capped", Command: []string{"sleep", "600"}, CPU: 1, Memory: 1 << 20, MaxSpotAttempts: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	sr := w.sync(5 * time.Second)
	if len(sr.Assign) != 1 {
		t.Fatalf("assigned %d, want 1", len(sr.Assign))
	}
	a := sr.Assign[0].AttemptRef
	now := time.Now()
	// The spot notice: the worker preempts its attempt and reports it.
	w.events = []api.AttemptEvent{{AttemptRef: a, Kind: api.EventCompleted, Outcome: api.OutcomePreempted, ExitCode: -1,
		StartTime: now.Add(-time.Second), EndTime: now, WorkerLeaving: true, Message: "preempted: worker spot-1 is going away"}}
	w.sync(0)
	// Another spot worker comes: the job runs there, never again on the
	// leaving worker (where the goodbye would count it a second time).
	w2 := activateSimWorker(t, tc, &api.ActivateRequest{Name: "spot-2", CPU: 1, Memory: 8 << 30, Region: "r", Cluster: "c", Pool: "spot"})
	var placed int
	for range 20 {
		if placed = len(w2.sync(time.Second).Assign); placed > 0 {
			break
		}
	}
	j, err := tc.admin.GetJob(ctx, b.ID, 1)
	if err != nil || placed != 1 || j.State != api.JobRunning || j.Attempts[len(j.Attempts)-1].Instance != "spot-2" {
		t.Fatalf("after the first worker's notice the job is %+v (%v); want it running on spot-2", j, err)
	}
	if j.OnDemandOnly {
		t.Fatalf("kept off spot after one reclaim notice: %+v", j)
	}
	// The first worker's goodbye.
	if err := w.c.Workers().Deactivate(ctx, true); err != nil {
		t.Fatal(err)
	}
	j, err = tc.admin.GetJob(ctx, b.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if j.OnDemandOnly {
		t.Fatalf("one spot machine reclaimed once kept the job off spot (max_spot_attempts 2): its attempt placed on the "+
			"leaving worker between its notice and its goodbye counted as a second reclaim; attempts %d, message %q", len(j.Attempts), j.Message)
	}
}
