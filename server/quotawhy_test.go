package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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
	if _, err := tc.admin.Workers().Activate(ctx, &api.ActivateRequest{Name: "w", CPU: 16, Memory: 64 << 30, GPUs: 4, GPUType: "a100", Secret: tc.srv.cfg.WorkerSecret}); err != nil {
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

// TestJobWhyNamesPriorityAndPreemption: a job behind higher-priority work
// in its queue says so, and a tier-1 job in a worker full of tier 3 says
// when its queue preempts for its fair share (the leader's clock).
func TestJobWhyNamesPriorityAndPreemption(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tc.admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "urgent", Members: []string{"root"}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []api.Queue{
		{Path: "org"},
		{Path: "org/tier1", Weight: 4, PreemptAfter: "1h", BillingProjects: []string{"urgent"}},
		{Path: "org/tier3", Preemptible: true, BillingProjects: []string{"default"}},
	} {
		if _, err := tc.admin.PutQueue(ctx, &q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tc.admin.Workers().Activate(ctx, &api.ActivateRequest{Name: "w", CPU: 2, Memory: 8 << 30, Secret: tc.srv.cfg.WorkerSecret}); err != nil {
		t.Fatal(err)
	}
	submit := func(project string, prio int64, n int) int64 {
		b, err := tc.admin.Submit(ctx, &api.CreateBatchRequest{BillingProject: project, Priority: prio}, api.Jobs{
			{JobID: 1, Name: "j", Count: int64(n), Command: []string{"sleep", "60"}, CPU: 1, Memory: 1 << 30},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	fill := submit("default", 0, 2)
	waitFor := func(what string, cond func() bool) {
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("no %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("tier 3 running", func() bool {
		b, err := tc.admin.GetBatch(ctx, fill)
		return err == nil && b.NRunning == 2
	})
	low, high := submit("default", 0, 1), submit("default", 5, 3)
	urgent := submit("urgent", 0, 1)
	why := func(batch int64, reason string) string {
		var msg string
		waitFor(reason+" in job why", func() bool {
			var w api.JobWhy
			if err := tc.admin.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/batches/%d/jobs/1/why", batch), nil, &w); err != nil {
				t.Fatal(err)
			}
			for _, r := range w.Reasons {
				if r.Reason == reason {
					msg = r.Message
					return true
				}
			}
			return false
		})
		return msg
	}
	if got, want := why(low, "priority"), "behind 3 Ready jobs of its user's batches of higher priority in queue org/tier3"; got != want {
		t.Errorf("job why says %q, want %q", got, want)
	}
	// Its fair share is what it asks for (1 core): tier 1 weighs 4 to
	// tier 3's 1 of the 2 cores.
	if got := why(urgent, "preempt"); !strings.Contains(got, "queue org/tier1 holds 0 cores, below 0.5 of its fair share of 1 cores: it preempts from preemptible queues above their share at ") ||
		!(strings.Contains(got, "(in 1h0m0s)") || strings.Contains(got, "(in 59m")) {
		t.Errorf("job why says %q", got)
	}
	_ = high
}
