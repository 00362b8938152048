package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
)

// TestUnplaceableWorkNeverBlocksPlaceable: a user's queue that starts with
// jobs no instance can hold must not hide the jobs behind them. Before, the
// view counted unplaceable jobs against the round's placement bound (and
// unplaceable runs against the per-user run bound), so 20,000 or more of
// them at the head starved every later job of the user for good.
func TestUnplaceableWorkNeverBlocksPlaceable(t *testing.T) {
	maxJobs := DefaultConfig().MaxPlacements
	huge := &state.Spec{Name: "huge", Command: []string{"true"}, Array: true, CPUMilli: 1000, Memory: 1 << 40}
	small := &state.Spec{Name: "small", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}
	for _, c := range []struct {
		name    string
		entries func() []state.JobEntry
	}{
		{"one array of 1,000,000", func() []state.JobEntry {
			return []state.JobEntry{{First: 1, Count: 1_000_000, Spec: huge}}
		}},
		{"20,000 separate jobs", func() []state.JobEntry {
			var es []state.JobEntry
			for i := uint32(1); i <= 20_000; i++ {
				// A spec per job keeps each its own run.
				sp := *huge
				sp.Array = false
				es = append(es, state.JobEntry{First: i, Count: 1, Spec: &sp})
			}
			return es
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := state.NewHarness(t, SchedulerPlanner)
			w := h.Activate("w", 64, 64)
			entries := c.entries()
			last := entries[len(entries)-1]
			placeable := last.First + last.Count
			b := h.CreateBatch(append(entries, state.JobEntry{First: placeable, Count: 1, Spec: small})...)

			in := schedulerInput(h.S.SchedulingView(maxJobs))
			out := scheduler.Schedule(in)
			res := h.Must(planOf(out, h.Tick())).(*state.PlanResult)
			if res.Placed != 1 || h.JobState(b, placeable) != state.Running {
				t.Fatalf("first round placed %d jobs; the placeable job %d is %v", res.Placed, placeable, h.JobState(b, placeable))
			}
			if got := h.S.WorkerView(w, nil); len(got.Assign) != 1 {
				t.Fatalf("the worker was given %d jobs, want 1", len(got.Assign))
			}
			// The status says why the others wait, from the recorded reasons.
			book := &waitingBook{}
			book.set(waitingOf(out, in.Instances))
			ws := book.Batch(b)
			if len(ws) == 0 || ws[0].FirstJob != 1 || ws[0].Reason != "memory_capacity" ||
				ws[0].Message != "needs 1TiB memory; the largest worker offers 64GiB" {
				t.Fatalf("waiting = %+v", ws)
			}
			if wt := book.Job(b, 1); wt == nil || wt.Message != ws[0].Message {
				t.Fatalf("job 1 waiting = %+v", wt)
			}
			if wt := book.Job(b, placeable); wt != nil {
				t.Fatalf("the placed job is said to wait: %+v", wt)
			}
		})
	}
}

func TestWaitReasonMessages(t *testing.T) {
	for _, c := range []struct {
		u          scheduler.Unplaced
		code, want string
	}{
		{scheduler.Unplaced{CPUMilli: 96000, Memory: 1 << 30, Why: scheduler.Explanation{Instances: 2, Filtered: []scheduler.ReasonCount{{Reason: scheduler.ReasonCPUCapacity, Instances: 2}}}},
			"cpu_capacity", "needs 96 cores; the largest worker has 64 cores"},
		{scheduler.Unplaced{CPUMilli: 96000, Memory: 1 << 40, Why: scheduler.Explanation{Instances: 2, Filtered: []scheduler.ReasonCount{{Reason: scheduler.ReasonCPUCapacity, Instances: 1}, {Reason: scheduler.ReasonMemoryCapacity, Instances: 1}}}},
			"memory_capacity", "needs 96 cores and 1TiB memory; no worker has both (the largest have 64 cores and 64GiB)"},
		{scheduler.Unplaced{CPUMilli: 4000, Memory: 1 << 30, Why: scheduler.Explanation{Instances: 3, Filtered: []scheduler.ReasonCount{{Reason: scheduler.ReasonCPUCapacity, Instances: 1}, {Reason: scheduler.ReasonCPUFree, Instances: 2}}}},
			"cpu_exhausted", "waiting for cores: none of the 2 workers large enough has 4 cores free"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 8 << 30, Why: scheduler.Explanation{Instances: 2, Filtered: []scheduler.ReasonCount{{Reason: scheduler.ReasonMemoryFree, Instances: 2}}}},
			"memory_exhausted", "waiting for memory: none of the 2 workers large enough has 8GiB free"},
	} {
		code, msg := waitReason(c.u, 64000, 64<<30)
		if code != c.code || msg != c.want {
			t.Errorf("waitReason(%+v) = %s %q, want %s %q", c.u.Why, code, msg, c.code, c.want)
		}
	}
}

// TestBatchAndJobStatusSayWhyJobsWait: through the API, a consistent batch
// read lists the stretches that wait and why, a job read says it for the
// job, and the placeable job behind them runs.
func TestBatchAndJobStatusSayWhyJobsWait(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tc.admin.Activate(ctx, &api.ActivateRequest{Name: "w", CPU: 64, Memory: 64 << 30, Secret: tc.srv.cfg.WorkerSecret}); err != nil {
		t.Fatal(err)
	}
	b, err := tc.admin.Submit(ctx, &api.CreateBatchRequest{BillingProject: "default"}, api.Jobs{
		{JobID: 1, Name: "huge", Count: 1_000_000, Command: []string{"true"}, CPU: 1, Memory: 1 << 40},
		{JobID: 1_000_001, Name: "small", Command: []string{"true"}, CPU: 1, Memory: 1 << 30},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		j, err := tc.admin.GetJob(ctx, b.ID, 1_000_001)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == api.JobRunning {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the placeable job is still %s", j.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got, err := tc.admin.GetBatch(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Waiting) != 1 || got.Waiting[0].Count != 1_000_000 || !strings.Contains(got.Waiting[0].Message, "needs 1TiB memory; the largest worker offers 64GiB") {
		t.Fatalf("batch waiting = %+v", got.Waiting)
	}
	j, err := tc.admin.GetJob(ctx, b.ID, 17)
	if err != nil {
		t.Fatal(err)
	}
	if j.Waiting == nil || j.Waiting.Reason != "memory_capacity" {
		t.Fatalf("job 17 waiting = %+v", j.Waiting)
	}
}
