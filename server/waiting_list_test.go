package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestJobListSaysWhyEachJobWaits: through the API, the list of a batch's
// jobs that no worker can hold says for each Ready job why it waits, as a
// read of the job does (the UI's Waiting column is filled from it); a
// stale read, which any server answers from its own copy, says nothing.
func TestJobListSaysWhyEachJobWaits(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Submitted before any worker joined, so no machine bounds the
	// jobs' size yet: they wait for a machine their size.
	b, err := tc.admin.Submit(ctx, &api.CreateBatchRequest{BillingProject: "default"}, api.Jobs{
		{JobID: 1, Name: "huge", Count: 5, Command: []string{"true"}, CPU: 1, Memory: 1 << 40},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.Workers().Activate(ctx, &api.ActivateRequest{Name: "w", CPU: 64, Memory: 64 << 30, Secret: tc.srv.cfg.WorkerSecret}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a round to say why the jobs wait", 20*time.Second, func() bool {
		got, err := tc.admin.GetBatch(ctx, b.ID)
		return err == nil && len(got.Waiting) > 0
	})
	list, err := tc.admin.ListJobs(ctx, b.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != 5 {
		t.Fatalf("listed %d jobs, want 5", len(list.Jobs))
	}
	for _, j := range list.Jobs {
		if j.State != api.JobReady {
			t.Fatalf("job %d is %s; none can be placed", j.JobID, j.State)
		}
		one, err := tc.admin.GetJob(ctx, b.ID, j.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Waiting == nil || j.Waiting.Reason != "memory_capacity" || one.Waiting == nil || *j.Waiting != *one.Waiting {
			t.Fatalf("job %d waits, as listed, for %+v; as read alone, for %+v", j.JobID, j.Waiting, one.Waiting)
		}
	}
	var stale api.JobList
	if err := tc.admin.Do(ctx, "GET", fmt.Sprintf("/api/v1/batches/%d/jobs?stale=true", b.ID), nil, &stale); err != nil {
		t.Fatal(err)
	}
	if len(stale.Jobs) != 5 || stale.Jobs[0].Waiting != nil {
		t.Fatalf("a stale list says why job 1 waits: %+v", stale.Jobs)
	}
}
