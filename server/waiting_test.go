package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
	"github.com/drover-sched/drover/server/why"
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

			in := view.Scheduling(h.S, view.Options{Now: h.Now, MaxJobs: maxJobs, Unbounded: true}).Input
			out := scheduler.Schedule(in)
			res := h.Must(leader.PlanOf(out, h.Tick())).(*state.PlanResult)
			if res.Placed != 1 || h.JobState(b, placeable) != state.Running {
				t.Fatalf("first round placed %d jobs; the placeable job %d is %v", res.Placed, placeable, h.JobState(b, placeable))
			}
			if got := h.S.WorkerView(w, nil); len(got.Assign) != 1 {
				t.Fatalf("the worker was given %d jobs, want 1", len(got.Assign))
			}
			// The status says why the others wait, from the recorded reasons.
			book := &why.Book{}
			book.Set(why.Round(out, in, nil))
			ws := book.Batch(b)
			if len(ws) == 0 || ws[0].FirstJob != 1 || ws[0].Reason != "memory_capacity" ||
				ws[0].Message != "fits no worker: needs 1TiB memory; the largest offers 64GiB" {
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

// TestBatchAndJobStatusSayWhyJobsWait: through the API, a consistent batch
// read lists the stretches that wait and why, a job read says it for the
// job, and the placeable job behind them runs.
func TestBatchAndJobStatusSayWhyJobsWait(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Submitted before any worker joined, so no machine bounds the
	// jobs' size yet (with one, a job larger than every machine is
	// refused at submit): the huge ones wait for a machine their size.
	b, err := tc.admin.Submit(ctx, &api.CreateBatchRequest{BillingProject: "default"}, api.Jobs{
		{JobID: 1, Name: "huge", Count: 1_000_000, Command: []string{"true"}, CPU: 1, Memory: 1 << 40},
		{JobID: 1_000_001, Name: "small", Command: []string{"true"}, CPU: 1, Memory: 1 << 30},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.Workers().Activate(ctx, &api.ActivateRequest{Name: "w", CPU: 64, Memory: 64 << 30, Secret: tc.srv.cfg.WorkerSecret}); err != nil {
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
	if len(got.Waiting) != 1 || got.Waiting[0].Count != 1_000_000 || !strings.Contains(got.Waiting[0].Message, "needs 1TiB memory; the largest offers 64GiB") {
		t.Fatalf("batch waiting = %+v", got.Waiting)
	}
	if len(got.WaitingSummary) != 1 || got.WaitingSummary[0].Reason != "memory_capacity" || got.WaitingSummary[0].Jobs != 1_000_000 {
		t.Fatalf("waiting summary = %+v", got.WaitingSummary)
	}
	j, err := tc.admin.GetJob(ctx, b.ID, 17)
	if err != nil {
		t.Fatal(err)
	}
	if j.Waiting == nil || j.Waiting.Reason != "memory_capacity" {
		t.Fatalf("job 17 waiting = %+v", j.Waiting)
	}
	why, err := tc.admin.JobWhy(ctx, b.ID, 17)
	if err != nil {
		t.Fatal(err)
	}
	if why.State != api.JobReady || len(why.Reasons) == 0 || why.Reasons[0].Reason != "memory_capacity" || why.Reasons[0].Message != j.Waiting.Message {
		t.Fatalf("job 17 why = %+v", why)
	}
}

// TestSpendLimitIsWhyJobsWait: through the adapter and the real
// scheduler, a round at a time when a billing project has reached its
// spend limit places none of its Ready jobs, counts them under
// spend_limit (the unplaced gauge), and says why in the words of a
// cancelled batch; a round before the crossing places them.
func TestSpendLimitIsWhyJobsWait(t *testing.T) {
	h := state.NewHarness(t, SchedulerPlanner)
	h.Must(&state.SetRates{Now: h.Tick(), Rates: []state.RateEntry{{Resource: "compute", Price: 3600 * money.DollarPerHour}}})
	h.Must(&state.SetSpendLimit{Project: "default", Limit: 10 * money.Dollar})
	w := h.Activate("w", 8, 32)
	sp := &state.Spec{Name: "j", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30, Array: true}
	first := h.CreateBatch(state.JobEntry{First: 1, Count: 1, Spec: sp})
	h.Schedule()
	start := h.Tick()
	h.Must(&state.Events{Now: start, Events: []state.Event{{Instance: w, Batch: first, Job: 1, Attempt: 1, Started: true, Start: start}}})
	waiting := h.CreateBatch(state.JobEntry{First: 1, Count: 4, Spec: sp})
	// $10 at $1 a second: reached 10 s after the start (a millisecond
	// past it, clear of the float sums' rounding).
	crossing := start + int64(10*time.Second) + int64(time.Millisecond)

	in := view.Scheduling(h.S, view.Options{Now: crossing, Unbounded: true}).Input
	out := scheduler.Schedule(in)
	if out.Jobs != 0 {
		t.Fatalf("placed %d jobs of a project at its limit", out.Jobs)
	}
	if n := why.Unplaced(out)[scheduler.ReasonSpendLimit]; n != 4 {
		t.Fatalf("unplaced by reason %v: want the 4 jobs under spend_limit", why.Unplaced(out))
	}
	book := &why.Book{}
	book.Set(why.Round(out, in, nil))
	wt := book.Job(waiting, 3)
	if wt == nil || wt.Reason != "spend_limit" || wt.Message != "billing project default reached its spend limit of $10.00 (spent $10.00)" {
		t.Fatalf("job 3 waits for %+v", wt)
	}
	if out := scheduler.Schedule(view.Scheduling(h.S, view.Options{Now: crossing - int64(time.Second), Unbounded: true}).Input); out.Jobs != 4 {
		t.Fatalf("a second before the crossing: placed %d, want 4", out.Jobs)
	}
}
