package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestJobWhyNamesTheGPUQuota: a queue at its GPU quota is the reason its
// GPU jobs wait, told in the same words by the leader's last round
// (waiting) and by job why from the queue's use alone (a stale read, which
// the round's book does not answer). Job why used to re-derive the quota
// rule by hand, knew no GPU quota, and said the job waited for its turn.
func TestJobWhyNamesTheGPUQuota(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tc.admin.PutQueue(ctx, &api.Queue{Path: "vision", BillingProjects: []string{"default"}, Guarantee: api.Quota{GPUs: map[string]int{"a100": 1}},
		BorrowLimit: &api.Limit{GPUs: map[string]int{"a100": 0}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.Activate(ctx, &api.ActivateRequest{Name: "w", CPU: 16, Memory: 64 << 30, GPUs: 4, GPUType: "a100", Secret: tc.srv.cfg.WorkerSecret}); err != nil {
		t.Fatal(err)
	}
	b, err := tc.admin.Submit(ctx, &api.CreateBatchRequest{BillingProject: "default"}, api.Jobs{
		{JobID: 1, Name: "train", Count: 2, Command: []string{"true"}, CPU: 1, Memory: 1 << 30, GPUs: 1, GPUType: "a100"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// One job runs; the other waits for the queue's only GPU.
	var waiting int64
	for waiting == 0 {
		for _, id := range []int64{1, 2} {
			j, err := tc.admin.GetJob(ctx, b.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State == api.JobRunning {
				waiting = 3 - id
			}
		}
		if ctx.Err() != nil {
			t.Fatal("no GPU job started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	const want = "queue vision at its a100 GPU quota (1 of 1)"
	for _, stale := range []bool{false, true} {
		var why api.JobWhy
		path := fmt.Sprintf("/api/v1/batches/%d/jobs/%d/why", b.ID, waiting)
		if stale {
			path += "?stale=true"
		}
		for {
			if err := tc.admin.Do(ctx, http.MethodGet, path, nil, &why); err != nil {
				t.Fatal(err)
			}
			if len(why.Reasons) > 0 && why.Reasons[0].Reason == "quota_gpu" {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("stale %v: job %d why = %+v, want quota_gpu first", stale, waiting, why.Reasons)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if why.State != api.JobReady || why.Reasons[0].Message != want {
			t.Errorf("stale %v: job %d why = %s %+v, want %q", stale, waiting, why.State, why.Reasons, want)
		}
	}
}
