package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestOOMRetryThroughTheAPI: a worker's out-of-memory event for a job
// with oom_retry sends it back with twice the memory: the next assignment
// carries it, job why says so, each attempt shows its memory. A bound
// beyond the largest machine, or a factor out of range, is refused at
// submit with a 400 naming it; an OOM claim on a success is ignored.
func TestOOMRetryThroughTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-oom", 4)
	for _, bad := range []struct {
		o    api.OOMRetry
		want string
	}{
		{api.OOMRetry{Factor: 2, MaxMemory: 1 << 40}, "oom_retry max_memory"},
		{api.OOMRetry{Factor: 40, MaxMemory: 1 << 30}, "oom_retry factor is 40"},
		{api.OOMRetry{Factor: 2, MaxMemory: 256 << 20}, "must be more than the job's memory"},
	} {
		o := bad.o
		_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
			{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 512 << 20, OOMRetry: &o}}})
		if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("oom_retry %+v: %v, want 400 saying %q", o, err, bad.want)
		}
	}
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 512 << 20, OOMRetry: &api.OOMRetry{Factor: 2, MaxMemory: 2 << 30}}}})
	if err != nil {
		t.Fatal(err)
	}
	res := w.sync(5 * time.Second)
	if len(res.Assign) != 1 || res.Assign[0].Memory != 512<<20 {
		t.Fatalf("first assignment %+v", res.Assign)
	}
	a := res.Assign[0].AttemptRef
	w.known = []api.AttemptRef{a}
	started := time.Now()
	w.events = []api.AttemptEvent{
		{AttemptRef: a, Kind: api.EventStarted, StartTime: started},
		{AttemptRef: a, Kind: api.EventCompleted, Outcome: api.OutcomeError, StartTime: started, EndTime: time.Now(),
			Message: "out of memory (limit 512 MiB)", OOM: true},
	}
	w.known = nil
	res = w.sync(5 * time.Second)
	if len(res.Assign) != 1 || res.Assign[0].Attempt != 2 || res.Assign[0].Memory != 1<<30 {
		t.Fatalf("after running out of memory, assigned %+v; want attempt 2 with 1 GiB", res.Assign)
	}
	j, err := alice.GetJob(ctx, b.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if j.Memory != 1<<30 || len(j.Attempts) != 2 || j.Attempts[0].Memory != 512<<20 || j.Attempts[1].Memory != 1<<30 || j.OOMRetry == nil || j.OOMRetry.Factor != 2 {
		t.Fatalf("job after the retry: memory %d, oom_retry %+v, attempts %+v", j.Memory, j.OOMRetry, j.Attempts)
	}
	// It succeeds, saying (falsely) it ran out of memory: a success is a
	// success.
	a = res.Assign[0].AttemptRef
	w.known = []api.AttemptRef{a}
	w.events = []api.AttemptEvent{
		{AttemptRef: a, Kind: api.EventStarted, StartTime: time.Now()},
		{AttemptRef: a, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: time.Now(), EndTime: time.Now(), OOM: true},
	}
	w.sync(0)
	if j, _ = alice.GetJob(ctx, b.ID, 1); j.State != api.JobSuccess || len(j.Attempts) != 2 {
		t.Fatalf("job %s with %d attempts, want success with 2", j.State, len(j.Attempts))
	}
}

// TestJobRestart: a member restarts a running job: its worker is told to
// stop the attempt with the job's grace, the attempt ends preempted with
// who restarted it, and the job runs again counted against no retry. A
// second restart of the same attempt, a restart of a job not running, and
// one by another project's user are refused.
func TestJobRestart(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	bob := tc.user("bob", "physics")
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Command: []string{"sleep", "1000"}, CPU: 1, PreemptionGraceSeconds: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	// No worker yet: the job waits, and a waiting job does not restart.
	if _, err := alice.RestartJob(ctx, b.ID, 1); !api.IsStatus(err, http.StatusConflict) {
		t.Fatalf("restart of a job not running yet: %v, want 409", err)
	}
	w := newSimWorker(t, tc, "sim-restart", 4)
	res := w.sync(5 * time.Second)
	a := res.Assign[0].AttemptRef
	w.known = []api.AttemptRef{a}
	started := time.Now()
	w.events = []api.AttemptEvent{{AttemptRef: a, Kind: api.EventStarted, StartTime: started}}
	w.sync(0)
	if _, err := bob.RestartJob(ctx, b.ID, 1); !api.IsStatus(err, http.StatusForbidden) && !api.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("another project's user restarts the job: %v", err)
	}
	rs, err := alice.RestartJob(ctx, b.ID, 1)
	if err != nil || rs.Attempt != 1 || !rs.Stopping {
		t.Fatalf("restart: %+v %v", rs, err)
	}
	if _, err := alice.RestartJob(ctx, b.ID, 1); !api.IsStatus(err, http.StatusConflict) {
		t.Fatalf("a second restart of the same attempt: %v, want 409", err)
	}
	res = w.sync(5 * time.Second)
	if len(res.Preempt) != 1 || res.Preempt[0].AttemptRef != a || res.Preempt[0].GraceSeconds != 5 || !strings.Contains(res.Preempt[0].Reason, "restarted by alice") {
		t.Fatalf("the worker was told %+v", res.Preempt)
	}
	w.events = []api.AttemptEvent{{AttemptRef: a, Kind: api.EventCompleted, Outcome: api.OutcomePreempted, StartTime: started, EndTime: time.Now(), Message: "restarted by alice"}}
	w.known = nil
	res = w.sync(5 * time.Second)
	if len(res.Assign) != 1 || res.Assign[0].Attempt != 2 {
		t.Fatalf("after the restart, assigned %+v; want attempt 2", res.Assign)
	}
	j, _ := alice.GetJob(ctx, b.ID, 1)
	if len(j.Attempts) != 2 || j.Attempts[0].State != api.OutcomePreempted {
		t.Fatalf("attempts %+v", j.Attempts)
	}
}

// TestBatchRetryThroughTheAPI: a batch whose job failed, retried through
// the API, runs it again as attempt 2 and completes again; a state that
// cannot be retried, or too many ranges, is a 400 naming it; another
// project's user may not retry it; a retry with nothing to run is a
// no-op.
func TestBatchRetryThroughTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	bob := tc.user("bob", "physics")
	w := newSimWorker(t, tc, "sim-retry", 4)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Command: []string{"false"}, CPU: 1}, {JobID: 2, Command: []string{"true"}, CPU: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	finish := func(outcome func(job int64) string) {
		t.Helper()
		res := w.sync(5 * time.Second)
		w.known, w.events = nil, nil
		for _, as := range res.Assign {
			now := time.Now()
			o := outcome(as.JobID)
			code := 0
			if o == api.OutcomeFailed {
				code = 1
			}
			w.events = append(w.events, api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventStarted, StartTime: now},
				api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventCompleted, Outcome: o, ExitCode: code, StartTime: now, EndTime: time.Now()})
		}
		w.sync(0)
	}
	finish(func(job int64) string {
		if job == 1 {
			return api.OutcomeFailed
		}
		return api.OutcomeSuccess
	})
	if bb, _ := alice.GetBatch(ctx, b.ID); !bb.Complete() || bb.NFailed != 1 {
		t.Fatalf("batch %+v, want complete with one failure", bb)
	}
	for _, bad := range []struct {
		req  api.RetryRequest
		want string
	}{
		{api.RetryRequest{States: []string{"success"}}, `state "success" cannot be retried`},
		{api.RetryRequest{JobIDs: make([]int64, api.MaxRetryRanges+1)}, "at most 10000"},
	} {
		if _, err := alice.RetryBatch(ctx, b.ID, &bad.req); !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("retry %+v: %v, want 400 saying %q", bad.req, err, bad.want)
		}
	}
	if _, err := bob.RetryBatch(ctx, b.ID, &api.RetryRequest{}); !api.IsStatus(err, http.StatusForbidden) && !api.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("another project's user retries the batch: %v", err)
	}
	res, err := alice.RetryBatch(ctx, b.ID, &api.RetryRequest{})
	if err != nil || res.Retried != 1 {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if bb, _ := alice.GetBatch(ctx, b.ID); bb.Complete() {
		t.Fatal("a batch running again says it is complete")
	}
	finish(func(int64) string { return api.OutcomeSuccess })
	j, _ := alice.GetJob(ctx, b.ID, 1)
	if j.State != api.JobSuccess || len(j.Attempts) != 2 || j.Attempts[0].State != api.OutcomeFailed {
		t.Fatalf("job 1 after the retry: %s %+v", j.State, j.Attempts)
	}
	if bb, _ := alice.GetBatch(ctx, b.ID); !bb.Complete() || bb.NSucceeded != 2 {
		t.Fatalf("batch after the retry: %+v", bb)
	}
	if res, err := alice.RetryBatch(ctx, b.ID, &api.RetryRequest{}); err != nil || res.Retried != 0 {
		t.Fatalf("a retry with nothing to run: %+v %v", res, err)
	}
}

// TestBatchEfficiencyThroughTheAPI: a batch of an over-asking array
// reports its use against its request from its attempts' usage, and
// suggests less; another project's user may not read it.
func TestBatchEfficiencyThroughTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	bob := tc.user("bob", "physics")
	w := newSimWorker(t, tc, "sim-eff", 8)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "align", Count: 2, Command: []string{"true"}, CPU: 2, Memory: 4 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	res := w.sync(5 * time.Second)
	if len(res.Assign) != 2 {
		t.Fatalf("assigned %d", len(res.Assign))
	}
	start := time.Now()
	time.Sleep(20 * time.Millisecond)
	w.events = nil
	for _, as := range res.Assign {
		w.events = append(w.events, api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventStarted, StartTime: start},
			api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: start, EndTime: time.Now(),
				Usage: &api.Usage{CPUSeconds: 0.01, PeakMemory: 300 << 20}})
	}
	w.sync(0)
	e, err := alice.BatchEfficiency(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Groups) != 1 || e.Groups[0].Name != "align" || e.Groups[0].Attempts != 2 || e.Groups[0].CPU != 2 || e.Groups[0].Memory != 4<<30 {
		t.Fatalf("groups %+v", e.Groups)
	}
	g := e.Groups[0]
	if g.CPUEfficiency >= 0.5 || g.SuggestedCPU >= 2 || g.SuggestedMemory != 512<<20 || g.WastedCoreHours <= 0 {
		t.Fatalf("align, which asks 2 cores and 4 GiB and uses little of either: %+v", g)
	}
	if _, err := bob.BatchEfficiency(ctx, b.ID); !api.IsStatus(err, http.StatusForbidden) && !api.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("another project's user reads the report: %v", err)
	}
}
