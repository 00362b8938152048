package state

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestScatterGatherRunsInDependencyOrder(t *testing.T) {
	h := newHarness(t)
	w1 := h.Activate("w1", 4, 16)
	w2 := h.Activate("w2", 4, 16)
	b := h.CreateBatch(
		entry(1, 1, spec("split", 0.25)),
		entry(2, 10, &Spec{Name: "align", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}, Range{1, 1}),
		entry(12, 1, spec("merge", 1), Range{2, 11}),
	)
	if got := h.JobState(b, 1); got != Ready {
		t.Fatalf("split is %s, want ready", got)
	}
	for j := uint32(2); j <= 12; j++ {
		if got := h.JobState(b, j); got != Pending {
			t.Fatalf("job %d is %s, want pending", j, got)
		}
	}
	h.Schedule()
	if got := h.JobState(b, 1); got != Running {
		t.Fatalf("split is %s after scheduling, want running", got)
	}
	h.Complete(w1, nil)
	h.Complete(w2, nil)
	for j := uint32(2); j <= 11; j++ {
		if got := h.JobState(b, j); got != Ready {
			t.Fatalf("align job %d is %s after split, want ready", j, got)
		}
	}
	// 8 cores in total: 8 of the 10 align jobs start, merge still waits.
	if res := h.Schedule(); res.Placed != 8 {
		t.Fatalf("placed %d align jobs on 8 cores, want 8", res.Placed)
	}
	h.Complete(w1, nil)
	if h.JobState(b, 12) != Pending {
		t.Fatal("merge released before every align job ended")
	}
	h.RunAll([]uint32{w1, w2}, nil)
	bt := h.Batch(b).record()
	if bt.Completed == 0 || bt.Count(Success) != 12 {
		t.Fatalf("batch %+v, want complete with 12 succeeded", bt)
	}
	job, _ := h.S.Job(b, 5)
	if job.Name != "align[3]" || job.ArrayIndex != 3 || len(job.Attempts) != 1 || !job.HasExit || job.Exit != 0 {
		t.Fatalf("align[3] = %+v", job)
	}
}

func TestFailedParentCancelsChildrenUnlessAlwaysRun(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 8, 16)
	always := spec("cleanup", 1)
	always.AlwaysRun = true
	b := h.CreateBatch(
		entry(1, 3, &Spec{Name: "step", Array: true, Command: []string{"x"}, CPUMilli: 1000, Memory: 1 << 30}),
		entry(4, 2, &Spec{Name: "after", Array: true, Command: []string{"x"}, CPUMilli: 1000, Memory: 1 << 30}, Range{1, 3}),
		entry(6, 1, spec("grandchild", 1), Range{4, 5}),
		entry(7, 1, always, Range{1, 3}),
	)
	h.RunAll([]uint32{w}, func(_ uint64, j uint32) Outcome {
		if j == 2 {
			return OutcomeFailed
		}
		return OutcomeSuccess
	})
	want := map[uint32]JobState{1: Success, 2: Failed, 3: Success, 4: Cancelled, 5: Cancelled, 6: Cancelled, 7: Success}
	for j, st := range want {
		if got := h.JobState(b, j); got != st {
			t.Errorf("job %d is %s, want %s", j, got, st)
		}
	}
	bt := h.Batch(b).record()
	if bt.Completed == 0 || bt.Count(Failed) != 1 || bt.Count(Cancelled) != 3 || bt.Count(Success) != 3 {
		t.Fatalf("batch %+v", bt)
	}
	job, _ := h.S.Job(b, 6)
	if len(job.Attempts) != 0 || job.Message == "" {
		t.Fatalf("cascade-cancelled job %+v: want no attempts and a message", job)
	}
}

func TestRetriesThenFinalFailure(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 2, 4)
	s := spec("flaky", 1)
	s.Retries = 2
	b := h.CreateBatch(entry(1, 1, s), entry(2, 1, spec("fails", 1)))
	tries := map[uint32]int{}
	h.RunAll([]uint32{w}, func(_ uint64, j uint32) Outcome {
		tries[j]++
		if j == 1 && tries[j] < 3 {
			return OutcomeError
		}
		if j == 2 {
			return OutcomeFailed
		}
		return OutcomeSuccess
	})
	if h.JobState(b, 1) != Success || tries[1] != 3 {
		t.Fatalf("flaky job: %s after %d tries, want success after 3", h.JobState(b, 1), tries[1])
	}
	if h.JobState(b, 2) != Failed || tries[2] != 1 {
		t.Fatalf("job without retries: %s after %d tries", h.JobState(b, 2), tries[2])
	}
	job, _ := h.S.Job(b, 1)
	if len(job.Attempts) != 3 || job.Attempts[0].Outcome != OutcomeError || job.Attempts[2].Outcome != OutcomeSuccess {
		t.Fatalf("attempts %+v", job.Attempts)
	}
	job, _ = h.S.Job(b, 2)
	if !job.HasExit || job.Exit != 1 {
		t.Fatalf("failed job exit code %v, want 1", job.Exit)
	}
}

func TestCancelBatch(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 2, 8)
	b := h.CreateBatch(
		entry(1, 5, &Spec{Name: "a", Array: true, Command: []string{"x"}, CPUMilli: 1000, Memory: 1 << 30}),
		entry(6, 1, spec("b", 1), Range{1, 5}),
	)
	h.Schedule()
	if n := h.Batch(b).counts[Running]; n != 2 {
		t.Fatalf("%d running, want 2", n)
	}
	res := h.Must(&CancelBatch{Now: h.Tick(), Batch: b, Reason: "user asked"}).(*CancelResult)
	if res.Cancelled != 4 || res.Running != 2 {
		t.Fatalf("cancel result %+v, want 4 cancelled at once and 2 running", res)
	}
	if h.Batch(b).Completed != 0 {
		t.Fatal("batch complete while jobs still run")
	}
	// Nothing more is placed for a cancelled batch.
	if r := h.Schedule(); r.Placed != 0 {
		t.Fatalf("placed %d jobs of a cancelled batch", r.Placed)
	}
	// The worker is told to kill what it runs.
	held := []AttemptID{{b, 1, 1}, {b, 2, 1}}
	v := h.S.WorkerView(w, held)
	if len(v.Kill) != 2 || len(v.Assign) != 0 {
		t.Fatalf("worker view %+v, want 2 kills", v)
	}
	// A job still being stopped says why.
	if j, _ := h.S.Job(b, 1); j.State != Running || j.Message != "batch cancelled: user asked; its running attempt is being stopped" {
		t.Fatalf("a running job of the cancelled batch: %s %q", j.State, j.Message)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeCancelled, Start: h.Now, End: h.Tick(), Message: "killed by the control plane"},
		{Instance: w, Batch: b, Job: 2, Attempt: 1, Outcome: OutcomeSuccess, Start: h.Now, End: h.Tick()},
	}})
	// The killed job says why it was cancelled; its attempt keeps what
	// the worker said. One that finished first says nothing of it.
	if j, _ := h.S.Job(b, 1); j.State != Cancelled || j.Message != "batch cancelled: user asked" || len(j.Attempts) != 1 || j.Attempts[0].Message != "killed by the control plane" {
		t.Fatalf("the killed job: %s %q %+v", j.State, j.Message, j.Attempts)
	}
	if j, _ := h.S.Job(b, 2); j.State != Success || j.Message != "" {
		t.Fatalf("the job that succeeded: %s %q", j.State, j.Message)
	}
	bt := h.Batch(b).record()
	if bt.Completed == 0 || bt.Count(Cancelled) != 5 || bt.Count(Success) != 1 || !bt.Cancelled {
		t.Fatalf("batch %+v", bt)
	}
	h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Jobs: []JobEntry{entry(1, 1, spec("late", 1))}}, ErrConflict)
	if res := h.Must(&CancelBatch{Now: h.Tick(), Batch: b}).(*CancelResult); !res.AlreadyCancelled {
		t.Fatal("second cancel not reported as a no-op")
	}
}

func TestUpdateFlowWithBunches(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 4, 16)
	res := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", NJobs: 4}).(*UpdateResult)
	b, u := res.Batch, res.Update
	if res.Start != 1 || res.N != 4 || res.Committed {
		t.Fatalf("reservation %+v", res)
	}
	if h.Batch(b).record().Completed != 0 {
		t.Fatal("a batch with an open update must be running")
	}
	h.Must(&AddJobs{Batch: b, Update: u, Jobs: []JobEntry{entry(3, 2, &Spec{Name: "c", Array: true, Command: []string{"x"}, CPUMilli: 1000, Memory: 1}, Range{1, 2})}})
	h.MustFail(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u}, ErrInvalid)
	// A repeated bunch is harmless; an overlapping different one is not.
	h.Must(&AddJobs{Batch: b, Update: u, Jobs: []JobEntry{entry(3, 2, spec("c", 1), Range{1, 2})}})
	h.MustFail(&AddJobs{Batch: b, Update: u, Jobs: []JobEntry{entry(2, 2, spec("x", 1))}}, ErrConflict)
	h.MustFail(&AddJobs{Batch: b, Update: u, Jobs: []JobEntry{entry(4, 2, spec("x", 1))}}, ErrInvalid)
	h.Must(&AddJobs{Batch: b, Update: u, Jobs: []JobEntry{entry(1, 1, spec("a", 1)), entry(2, 1, spec("b", 1))}})
	if h.Batch(b).nJobs != 0 {
		t.Fatal("staged jobs visible before commit")
	}
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u})
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u}) // idempotent
	h.RunAll([]uint32{w}, nil)
	if bt := h.Batch(b).record(); bt.Count(Success) != 4 || bt.Completed == 0 {
		t.Fatalf("after first update: %+v", bt)
	}
	// A second update: relative IDs for its own jobs, absolute for earlier ones.
	r2 := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, Jobs: []JobEntry{
		{First: 1, Count: 1, Spec: spec("d", 1), BatchParents: []Range{{3, 4}}},
		{First: 2, Count: 1, Spec: spec("e", 1), Parents: []Range{{1, 1}}},
	}}).(*UpdateResult)
	if r2.Start != 5 || r2.Update != 2 {
		t.Fatalf("second update %+v, want start 5", r2)
	}
	if h.JobState(b, 5) != Ready || h.JobState(b, 6) != Pending {
		t.Fatalf("states %s %s, want ready pending", h.JobState(b, 5), h.JobState(b, 6))
	}
	if h.Batch(b).Completed != 0 {
		t.Fatal("batch still complete after a new update")
	}
	h.RunAll([]uint32{w}, nil)
	if bt := h.Batch(b).record(); bt.Count(Success) != 6 || bt.Completed == 0 || bt.NUpdates != 2 {
		t.Fatalf("after second update: %+v", bt)
	}
	// Batch parents must name committed jobs.
	h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Jobs: []JobEntry{{First: 1, Count: 1, Spec: spec("f", 1), BatchParents: []Range{{6, 9}}}}}, ErrInvalid)
}

func TestCommitRejectsCyclesAndBadParents(t *testing.T) {
	h := newHarness(t)
	err := h.MustFail(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Jobs: []JobEntry{
		entry(1, 1, spec("a", 1), Range{3, 3}),
		entry(2, 1, spec("b", 1), Range{1, 1}),
		entry(3, 1, spec("c", 1), Range{2, 2}),
		entry(4, 1, spec("ok", 1)),
	}}, ErrInvalid)
	if !strings.Contains(err.Msg, "cycle") || !strings.Contains(err.Msg, "(a)") || strings.Contains(err.Msg, "(ok)") {
		t.Fatalf("cycle error %q should name a, b, c but not ok", err.Msg)
	}
	h.MustFail(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Jobs: []JobEntry{
		entry(1, 4, spec("self", 1), Range{2, 2}),
	}}, ErrInvalid)
	h.MustFail(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Jobs: []JobEntry{
		entry(1, 1, spec("a", 1), Range{2, 7}),
	}}, ErrInvalid)
	if len(h.S.batches) != 0 {
		t.Fatalf("rejected creates left %d batches behind", len(h.S.batches))
	}
	// A forward reference without a cycle is fine.
	b := h.CreateBatch(entry(1, 1, spec("late", 1), Range{2, 2}), entry(2, 1, spec("early", 1)))
	if h.JobState(b, 1) != Pending || h.JobState(b, 2) != Ready {
		t.Fatal("forward dependency not honoured")
	}
}

func TestLostInstanceRequeuesAndIgnoresLateEvents(t *testing.T) {
	h := newHarness(t)
	w1 := h.Activate("w1", 2, 8)
	b := h.CreateBatch(entry(1, 2, &Spec{Name: "a", Array: true, Command: []string{"x"}, CPUMilli: 1000, Memory: 1 << 30}))
	h.Schedule()
	h.Must(&Retire{Now: h.Tick(), Instance: w1, Reason: "no contact for 30s"})
	for j := uint32(1); j <= 2; j++ {
		if h.JobState(b, j) != Ready {
			t.Fatalf("job %d is %s after its instance was lost, want ready", j, h.JobState(b, j))
		}
	}
	// The old worker's late completion for attempt 1 must not count.
	res := h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: w1, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeSuccess, Start: 1, End: 2}}}).(*EventsResult)
	if res.Applied != 0 || res.Ignored != 1 {
		t.Fatalf("late event result %+v, want ignored", res)
	}
	w2 := h.Activate("w2", 2, 8)
	h.RunAll([]uint32{w2}, nil)
	job, _ := h.S.Job(b, 1)
	if job.State != Success || len(job.Attempts) != 2 || job.Attempts[0].Outcome != OutcomeLost || job.Attempts[1].Instance != "w2" {
		t.Fatalf("job after re-run: %+v", job)
	}
}

func TestReactivationRetiresPreviousIncarnation(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("worker-1", 2, 8)
	b := h.CreateBatch(entry(1, 1, spec("a", 1)))
	h.Schedule()
	res := h.Must(&Activate{Now: h.Tick(), Name: "worker-1", CPUMilli: 2000, Memory: 8 << 30, TokenHash: "new"}).(*ActivateResult)
	if res.Replaced != w || res.Instance == w {
		t.Fatalf("activation %+v, want a new instance replacing %d", res, w)
	}
	if h.JobState(b, 1) != Ready {
		t.Fatalf("job on the replaced instance is %s, want ready", h.JobState(b, 1))
	}
	if v := h.S.WorkerView(w, nil); v.Active {
		t.Fatal("old incarnation still active")
	}
}

func TestPlanIsRecheckedAtApply(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 2, 8)
	b := h.CreateBatch(entry(1, 4, &Spec{Name: "a", Array: true, Command: []string{"x"}, CPUMilli: 1000, Memory: 1 << 30}))
	// A plan that puts 4 one-core jobs on a 2-core instance places only 2.
	res := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{{Batch: b, First: 1, Count: 4, Attempt: 1, Instance: w}}}).(*PlanResult)
	if res.Placed != 2 || res.Rejected != 2 {
		t.Fatalf("plan result %+v, want 2 placed 2 rejected", res)
	}
	// The same plan again (a second scheduler, a retried entry) places nothing.
	h.Complete(w, nil)
	res = h.Must(&Plan{Now: h.Tick(), Placements: []Placement{{Batch: b, First: 1, Count: 2, Attempt: 1, Instance: w}}}).(*PlanResult)
	if res.Placed != 0 {
		t.Fatalf("replayed plan placed %d", res.Placed)
	}
	// Wrong attempt, unknown instance, unknown batch.
	res = h.Must(&Plan{Now: h.Tick(), Placements: []Placement{
		{Batch: b, First: 3, Count: 1, Attempt: 2, Instance: w},
		{Batch: b, First: 3, Count: 1, Attempt: 1, Instance: 99},
		{Batch: 99, First: 1, Count: 1, Attempt: 1, Instance: w},
	}}).(*PlanResult)
	if res.Placed != 0 || res.Rejected != 3 {
		t.Fatalf("bad placements %+v", res)
	}
	// Placing the middle of a run splits the ready queue correctly.
	res = h.Must(&Plan{Now: h.Tick(), Placements: []Placement{{Batch: b, First: 4, Count: 1, Attempt: 1, Instance: w}}}).(*PlanResult)
	if res.Placed != 1 || h.JobState(b, 3) != Ready {
		t.Fatalf("placing job 4: %+v, job 3 %s", res, h.JobState(b, 3))
	}
}

func TestEventsAreIdempotent(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 1, 8)
	b := h.CreateBatch(entry(1, 1, spec("a", 1)), entry(2, 1, spec("b", 1), Range{1, 1}))
	h.Schedule()
	ev := Event{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeFailed, Exit: 3, Start: 10, End: 20}
	start := ev
	start.Started, start.Outcome = true, OutcomeNone
	h.Must(&Events{Now: h.Tick(), Events: []Event{start, start}})
	first := h.Must(&Events{Now: h.Tick(), Events: []Event{ev}}).(*EventsResult)
	again := h.Must(&Events{Now: h.Tick(), Events: []Event{ev, start}}).(*EventsResult)
	if first.Applied != 1 || again.Applied != 0 {
		t.Fatalf("first %+v again %+v", first, again)
	}
	if bt := h.Batch(b).record(); bt.Count(Failed) != 1 || bt.Count(Cancelled) != 1 || nCompleted(bt) != 2 {
		t.Fatalf("batch %+v", bt)
	}
}

func TestIdempotencyKeyAndPermissions(t *testing.T) {
	h := newHarness(t)
	h.Must(&CreateUser{Now: h.Tick(), Name: "alice", TokenHash: "alice-hash"})
	h.Must(&CreateUser{Now: h.Tick(), Name: "bob", TokenHash: "bob-hash"})
	h.MustFail(&CreateUser{Now: h.Tick(), Name: "alice", TokenHash: "x"}, ErrConflict)
	h.MustFail(&CreateUser{Now: h.Tick(), Name: "no spaces", TokenHash: "x"}, ErrInvalid)
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "genomics", Members: []string{"alice"}})
	h.MustFail(&CreateBillingProject{Now: h.Tick(), Name: "other", Members: []string{"carol"}}, ErrNotFound)
	create := &CreateBatch{Now: h.Tick(), User: "alice", BillingProject: "genomics", Key: "k1", Jobs: []JobEntry{entry(1, 1, spec("a", 1))}}
	r1 := h.Must(create).(*UpdateResult)
	r2 := h.Must(create).(*UpdateResult)
	if r1.Batch != r2.Batch || !r2.Existing || len(h.S.batches) != 1 {
		t.Fatalf("retried create made a second batch: %+v %+v", r1, r2)
	}
	err := h.MustFail(&CreateBatch{Now: h.Tick(), User: "bob", BillingProject: "genomics", Jobs: []JobEntry{entry(1, 1, spec("a", 1))}}, ErrForbidden)
	if !strings.Contains(err.Msg, "not a member") {
		t.Fatalf("message %q", err.Msg)
	}
	if h.S.Access(r1.Batch, Viewer{Name: "bob"}) != Hidden || h.S.Access(r1.Batch, Viewer{Name: "alice"}) != Owned ||
		h.S.Access(r1.Batch, Viewer{Name: "root", Admin: true}) != Owned || h.S.Access(42, Viewer{Name: "alice"}) != NoBatch {
		t.Fatal("wrong visibility")
	}
	h.Must(&SetMember{Project: "genomics", User: "bob", Member: true})
	if h.S.Access(r1.Batch, Viewer{Name: "bob"}) != Visible {
		t.Fatal("new member cannot see the project's batch")
	}
	h.Must(&SetMember{Project: "genomics", User: "alice", Member: false})
	if h.S.Access(r1.Batch, Viewer{Name: "alice"}) != Hidden {
		t.Fatal("removed member still sees the batch")
	}
	if list := h.S.ListBatches(Viewer{Name: "alice"}, nil, 0); len(list.Batches) != 0 {
		t.Fatalf("alice lists %d batches after removal", len(list.Batches))
	}
	if res := h.Must(&Bootstrap{Now: h.Tick(), Admin: "root2", TokenHash: "r2"}).(*BootstrapResult); res.Created {
		t.Fatal("second bootstrap created another admin")
	}
}

func TestLongOneToOneChainIsFast(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 64, 1024)
	const n = 20000
	entries := make([]JobEntry, 0, 2*n)
	for i := uint32(1); i <= n; i++ {
		entries = append(entries, entry(i, 1, spec("a", 0.1)))
	}
	for i := uint32(1); i <= n; i++ {
		entries = append(entries, entry(n+i, 1, spec("b", 0.1), Range{i, i}))
	}
	b := h.S.Apply(1000, &CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Jobs: entries}).(*UpdateResult).Batch
	for round := 0; h.Batch(b).Completed == 0 && round < 1000; round++ {
		plan := h.S.Apply(0, h.Plan()).(*PlanResult)
		v := h.S.WorkerView(w, nil)
		evs := make([]Event, 0, len(v.Assign))
		for _, a := range v.Assign {
			evs = append(evs, Event{Instance: w, Batch: a.Batch, Job: a.Job, Attempt: a.Attempt, Outcome: OutcomeSuccess, Start: 1, End: 2})
		}
		h.S.Apply(0, &Events{Now: h.Tick(), Events: evs})
		if plan.Placed == 0 && len(evs) == 0 {
			t.Fatal("stuck")
		}
	}
	checkInvariants(t, h.S)
	if bt := h.Batch(b).record(); bt.Count(Success) != 2*n {
		t.Fatalf("%+v", bt)
	}
}

func TestSnapshotRoundTripAndDeterminism(t *testing.T) {
	h := newHarness(t)
	w1 := h.Activate("w1", 3, 8)
	w2 := h.Activate("w2", 2, 8)
	h.Must(&CreateUser{Now: h.Tick(), Name: "alice", TokenHash: "ah"})
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "lab", Members: []string{"alice", "root"}})
	s := spec("flaky", 0.5)
	s.Retries = 1
	s.Env = map[string]string{"B": "2", "A": "1"}
	s.Attributes = map[string]string{"k": "v"}
	b1 := h.CreateBatch(entry(1, 6, &Spec{Name: "arr", Array: true, Command: []string{"x"}, CPUMilli: 500, Memory: 1 << 20}), entry(7, 1, s, Range{1, 6}))
	h.Must(&CreateBatch{Now: h.Tick(), User: "alice", BillingProject: "lab", NJobs: 10, Key: "open",
		Attributes: map[string]string{"sample": "NA1"}})
	h.Must(&AddJobs{Batch: 2, Update: 1, Jobs: []JobEntry{entry(2, 3, spec("part", 1))}})
	h.Schedule()
	h.Complete(w1, func(uint64, uint32) Outcome { return OutcomeError })
	h.Schedule()
	h.Must(&Retire{Now: h.Tick(), Instance: w2, Reason: "test"})
	b3 := h.CreateBatch(entry(1, 3, spec("c", 1)))
	h.Must(&CancelBatch{Now: h.Tick(), Batch: b3, Reason: "because"})

	orig := SnapshotBytes(t, h.S)
	restored := New()
	if err := restored.Restore(bytes.NewReader(orig)); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, restored)
	if again := SnapshotBytes(t, restored); !bytes.Equal(orig, again) {
		t.Fatalf("snapshot of restored state differs (%d vs %d bytes)", len(orig), len(again))
	}
	if replayed := SnapshotBytes(t, h.Replay()); !bytes.Equal(orig, replayed) {
		t.Fatal("replaying the log gives a different state")
	}
	// The restored state carries on exactly like the original.
	h2 := &Harness{T: t, S: restored, Now: h.Now, Log: h.Log, Planner: h.Planner}
	for _, hh := range []*Harness{h, h2} {
		hh.RunAll([]uint32{w1}, nil)
	}
	if !bytes.Equal(SnapshotBytes(t, h.S), SnapshotBytes(t, h2.S)) {
		t.Fatal("original and restored states diverged")
	}
	if bt := h2.Batch(b1).record(); bt.Completed == 0 || nCompleted(bt) != 7 || bt.Count(Error) == 0 {
		t.Fatalf("batch after restore %+v", bt)
	}
}

func TestDecodeRejectsUnknownCommands(t *testing.T) {
	if _, err := Decode([]byte{77, 0x80}); err == nil {
		t.Fatal("unknown command decoded")
	}
	c, err := Decode([]byte{byte(IgnoreUnknownFlag | 77), 0x80})
	if err != nil || c != nil {
		t.Fatalf("ignorable unknown command: %v %v", c, err)
	}
	if _, err := Decode(nil); err == nil {
		t.Fatal("empty entry decoded")
	}
}

func TestPaging(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 120; i++ {
		h.CreateBatch(entry(1, 1, spec("a", 1)))
	}
	b := h.CreateBatch(entry(1, 130, &Spec{Name: "arr", Array: true, Command: []string{"x"}, CPUMilli: 1000, Memory: 1}))
	seen := 0
	var last uint64
	for pages := 0; ; pages++ {
		list := h.S.ListBatches(Viewer{Name: "root", Admin: true}, nil, last)
		for _, bt := range list.Batches {
			if last != 0 && uint64(bt.ID) >= last {
				t.Fatalf("page not descending: %d after %d", bt.ID, last)
			}
		}
		seen += len(list.Batches)
		if list.LastID == 0 {
			break
		}
		if len(list.Batches) != PageSize {
			t.Fatalf("short page with a next page")
		}
		last = uint64(list.LastID)
	}
	if seen != 121 {
		t.Fatalf("paged through %d batches, want 121", seen)
	}
	var jobs int
	var lastJob uint32
	for {
		list, _ := h.S.ListJobs(b, nil, lastJob)
		jobs += len(list.Jobs)
		if list.LastID == 0 {
			break
		}
		lastJob = uint32(list.LastID)
	}
	if jobs != 130 {
		t.Fatalf("paged through %d jobs, want 130", jobs)
	}
}

// TestJobLostWithMaxLostWorkersEndsError: a job whose attempts were lost
// with MaxLost instances ends Error with the reason, instead of travelling
// the whole fleet (before, a lost job was requeued without limit). An entry
// without MaxLost (from before the limit) keeps requeueing, so old logs
// replay as they applied.
func TestJobLostWithMaxLostWorkersEndsError(t *testing.T) {
	h := newHarness(t)
	b := h.CreateBatch(entry(1, 1, spec("crasher", 1)))
	for i := 1; i <= 4; i++ {
		w := h.Activate(fmt.Sprint("w", i), 4, 16)
		h.Schedule()
		if got := h.JobState(b, 1); got != Running {
			t.Fatalf("round %d: job is %s, want running", i, got)
		}
		maxLost := uint8(3)
		if i == 1 {
			maxLost = 0 // an old entry: no limit, and this loss still counts
		}
		h.Must(&Retire{Now: h.Tick(), Instance: w, Reason: "silent", MaxLost: maxLost})
		want := Ready
		if i == 3 {
			want = Error
		}
		if got := h.JobState(b, 1); got != want {
			t.Fatalf("after losing it with %d workers the job is %s, want %s", i, got, want)
		}
		if want == Error {
			j, _ := h.S.Job(b, 1)
			if !strings.Contains(j.Message, "lost with 3 workers") || len(j.Attempts) != 3 {
				t.Fatalf("job: %q, %d attempts", j.Message, len(j.Attempts))
			}
			break
		}
	}
	// Replaying the log gives the same state, lost counts included.
	if string(SnapshotBytes(t, h.Replay())) != string(SnapshotBytes(t, h.S)) {
		t.Fatal("replay differs")
	}
}

// TestIdempotencyKeyDigest: a create or update that reuses a key with
// another digest is refused, before and after a snapshot and restore; the
// same digest is a retry.
func TestIdempotencyKeyDigest(t *testing.T) {
	h := newHarness(t)
	create := func(cmd string) *CreateBatch {
		c := &CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Key: "k", Jobs: []JobEntry{entry(1, 1, spec(cmd, 1))}}
		c.Digest = c.RequestDigest()
		return c
	}
	b := h.Must(create("a")).(*UpdateResult).Batch
	h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, Key: "u", NJobs: 3, Digest: (&CreateUpdate{Batch: b, NJobs: 3}).RequestDigest()})
	check := func(s *State) {
		t.Helper()
		h.S = s
		if err := h.MustFail(create("b"), ErrConflict); !strings.Contains(err.Msg, `idempotency key "k"`) {
			t.Fatalf("a reused key: %q", err.Msg)
		}
		if res := h.Must(create("a")).(*UpdateResult); !res.Existing || res.Batch != b {
			t.Fatalf("a retry: %+v", res)
		}
		h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Key: "u", NJobs: 4, Digest: (&CreateUpdate{Batch: b, NJobs: 4}).RequestDigest()}, ErrConflict)
	}
	check(h.S)
	restored := New()
	if err := restored.Restore(bytes.NewReader(SnapshotBytes(t, h.S))); err != nil {
		t.Fatal(err)
	}
	check(restored)
}

// TestAnonymousAuditKeptApart: entries of callers without a valid token
// are kept apart, at most MaxAnonymousAuditEntries, so any number of them
// leaves the entries of known users in the log; reads merge both in time
// order.
func TestAnonymousAuditKeptApart(t *testing.T) {
	h := newHarness(t)
	h.Must(&Audit{Entries: []AuditEntry{{Time: 1, User: "root", Method: "POST", Route: "POST /api/v1/batches", Status: 201}}})
	for i := range (MaxAnonymousAuditEntries + MaxAuditEntries) / MaxAuditPerCommand {
		entries := make([]AuditEntry, MaxAuditPerCommand)
		for k := range entries {
			entries[k] = AuditEntry{Time: int64(10 + i*MaxAuditPerCommand + k), Route: "POST /api/v1/batches/{id}/cancel", Status: 401, Count: 7}
		}
		h.Must(&Audit{Entries: entries})
	}
	h.Must(&Audit{Entries: []AuditEntry{{Time: 1 << 40, User: "root", Route: "DELETE /api/v1/users/{name}", Status: 200}}})
	log := h.S.AuditLog(time.Unix(0, 0), "", MaxAuditEntries+MaxAnonymousAuditEntries)
	if len(log) != MaxAnonymousAuditEntries+2 {
		t.Fatalf("%d entries, want the %d anonymous ones kept and the 2 of root", len(log), MaxAnonymousAuditEntries)
	}
	if log[0].User != "root" || log[len(log)-1].User != "root" || log[1].Count != 7 {
		t.Fatalf("newest %+v, oldest %+v", log[0], log[len(log)-1])
	}
	for i := 1; i < len(log); i++ {
		if log[i].Time > log[i-1].Time {
			t.Fatalf("entry %d is newer than entry %d", i, i-1)
		}
	}
	if mine := h.S.AuditLog(time.Unix(0, 0), "root", 10); len(mine) != 2 {
		t.Fatalf("root's entries: %d", len(mine))
	}
	restored := New()
	if err := restored.Restore(bytes.NewReader(SnapshotBytes(t, h.S))); err != nil {
		t.Fatal(err)
	}
	if again := restored.AuditLog(time.Unix(0, 0), "", 100000); len(again) != len(log) {
		t.Fatalf("after a restore: %d entries, want %d", len(again), len(log))
	}
}

// nCompleted is the number of a batch's jobs that ended.
func nCompleted(r BatchRecord) int64 {
	return r.Count(Success) + r.Count(Failed) + r.Count(Cancelled) + r.Count(Error)
}

// TestCommitReleasesEachGroupOnce: a commit cancels a group whose batch
// parent failed, and that releases a later group of the same update that
// waits for it; the commit's walk over the groups that waited for
// nothing must not release that one again (it counted cancelled jobs
// twice, and queued an always_run one twice).
func TestCommitReleasesEachGroupOnce(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 8, 16)
	b := h.CreateBatch(entry(1, 1, spec("fails", 1)))
	h.RunAll([]uint32{w}, func(uint64, uint32) Outcome { return OutcomeFailed })
	always := spec("cleanup", 1)
	always.AlwaysRun = true
	h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, User: "root", Jobs: []JobEntry{
		{First: 1, Count: 1, Spec: spec("child", 1), BatchParents: []Range{{1, 1}}},
		entry(2, 1, spec("grandchild", 1), Range{1, 1}),
		entry(3, 1, always, Range{2, 2}),
	}}) // the harness checks the counts and the ready queue
	want := map[uint32]JobState{2: Cancelled, 3: Cancelled, 4: Ready}
	for j, st := range want {
		if got := h.JobState(b, j); got != st {
			t.Errorf("job %d is %s, want %s", j, got, st)
		}
	}
	h.Restored()
}
