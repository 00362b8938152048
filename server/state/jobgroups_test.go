package state

import (
	"strings"
	"testing"
)

func inGroup(sp *Spec, ref uint32) *Spec { return sp.InJobGroup(ref) }

func groupByPath(t *testing.T, h *Harness, b uint64, path string) JobGroupRecord {
	t.Helper()
	id, ok := h.S.JobGroupID(b, path)
	if !ok {
		t.Fatalf("batch %d has no job group %s", b, path)
	}
	r, _ := h.S.JobGroup(b, id)
	return r
}

// TestJobGroupsCountCancelAndComplete: a batch's nested job groups count
// their jobs and their subgroups'; the failure that reaches a group's
// cancel_after_n_failures cancels that group and those below it (jobs
// not started at once, running ones killed by their workers), not the
// batch; what waits for a cancelled job in another group is cancelled as
// a failed parent's child; a group completes when its jobs are final, and
// its callback comes due then.
func TestJobGroupsCountCancelAndComplete(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w1", 4, 16)
	groups := []JobGroupDecl{
		{Path: "align", CancelAfter: 2, Attributes: StringMap{"stage": "align"}},
		{Path: "align/chr1"},
		{Path: "merge", Callback: "https://example.com/hook"},
	}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: groups, Jobs: []JobEntry{
		entry(1, 4, inGroup(spec("chr1", 1), 2)),
		entry(5, 4, inGroup(spec("rest", 1), 1)),
		entry(9, 1, inGroup(spec("merge", 1), 3), Range{1, 8}),
		entry(10, 1, spec("free", 1)),
	}}).(*UpdateResult).Batch
	if g := groupByPath(t, h, b, "align"); g.NJobs != 8 || g.Count(Ready) != 8 || g.Attributes["stage"] != "align" || g.Parent != 0 {
		t.Fatalf("align: %+v", g)
	}
	if g := groupByPath(t, h, b, "align/chr1"); g.NJobs != 4 || g.Parent != 1 {
		t.Fatalf("align/chr1: %+v", g)
	}
	if g := groupByPath(t, h, b, "merge"); g.NJobs != 1 || g.Count(Pending) != 1 || g.Completed != 0 {
		t.Fatalf("merge: %+v", g)
	}
	h.Schedule() // jobs 1-4 run (4 cores)
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Now},
	}})
	if g := groupByPath(t, h, b, "align"); g.Cancelled || g.Count(Failed) != 1 {
		t.Fatalf("after one failure: %+v", g)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 2, Attempt: 1, Outcome: OutcomeError, Start: h.Now, End: h.Now},
	}})
	align := groupByPath(t, h, b, "align")
	if !align.Cancelled || !strings.Contains(align.CancelReason, "2 of its jobs failed (cancel_after_n_failures = 2)") {
		t.Fatalf("align after two failures: %+v", align)
	}
	if chr1 := groupByPath(t, h, b, "align/chr1"); !chr1.Cancelled || !strings.Contains(chr1.CancelReason, "job group align was cancelled") {
		t.Fatalf("align/chr1 under a cancelled align: %+v", chr1)
	}
	if bt := h.Batch(b); bt.Cancelled {
		t.Fatal("a group's cancel cancelled its batch")
	}
	// Jobs 5-8 had not started: cancelled.
	for _, id := range []uint32{5, 8} {
		if st := h.JobState(b, id); st != Cancelled {
			t.Errorf("job %d is %s, want cancelled", id, st)
		}
	}
	// Jobs 3 and 4 run: their worker is told to kill them, and job 10
	// (no group) is placed in the room the cancel left.
	v := h.S.WorkerView(w, []AttemptID{{b, 3, 1}, {b, 4, 1}})
	if len(v.Kill) != 2 {
		t.Fatalf("worker view %+v, want jobs 3 and 4 killed", v)
	}
	rec, _ := h.S.Job(b, 3)
	if !strings.Contains(rec.Message, "job group align/chr1 cancelled") || rec.GroupPath != "align/chr1" {
		t.Fatalf("job 3: %q in %q", rec.Message, rec.GroupPath)
	}
	// A failure after the cancel is no retry.
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 3, Attempt: 1, Outcome: OutcomeCancelled, Start: h.Now, End: h.Now},
		{Instance: w, Batch: b, Job: 4, Attempt: 1, Outcome: OutcomeCancelled, Start: h.Now, End: h.Now},
	}})
	if g := groupByPath(t, h, b, "align"); g.Completed == 0 || g.Count(Cancelled) != 6 {
		t.Fatalf("align at its end: %+v", g)
	}
	// Merge waited for them: it is cancelled as a failed parent's child,
	// its group not cancelled, and complete.
	if g := groupByPath(t, h, b, "merge"); g.Cancelled || g.Count(Cancelled) != 1 || g.Completed == 0 {
		t.Fatalf("merge: %+v", g)
	}
	due := h.S.CallbacksDue(10, nil)
	if len(due) != 1 || due[0].Group != 3 || due[0].URL != "https://example.com/hook" {
		t.Fatalf("callbacks due: %+v", due)
	}
	h.Must(&CallbackDone{Now: h.Tick(), Batch: b, Group: 3, Version: due[0].Version, Result: "HTTP 204"})
	if due := h.S.CallbacksDue(10, nil); len(due) != 0 {
		t.Fatalf("callbacks due after the report: %+v", due)
	}
	if g := groupByPath(t, h, b, "merge"); g.CallbackResult != "HTTP 204" {
		t.Fatalf("merge's callback result: %q", g.CallbackResult)
	}
	h.RunAll([]uint32{w}, nil)
	if bt := h.Batch(b).record(); bt.Completed == 0 || bt.Count(Success) != 1 {
		t.Fatalf("batch at the end: %+v", bt)
	}
	h.Restored()

	// Jobs added later to a cancelled group are refused.
	err := h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: []JobGroupDecl{{Path: "align"}},
		Jobs: []JobEntry{entry(1, 1, inGroup(spec("late", 1), 1))}}, ErrConflict)
	if !strings.Contains(err.Msg, "job group align of batch") {
		t.Fatalf("late jobs: %v", err)
	}
	// A retry runs the cancelled group's jobs again, and the group with them.
	h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: 1<<Failed | 1<<Error | 1<<Cancelled})
	if g := groupByPath(t, h, b, "align/chr1"); g.Cancelled || g.Completed != 0 {
		t.Fatalf("align/chr1 after a retry: %+v", g)
	}
	h.RunAll([]uint32{w}, nil)
	if g := groupByPath(t, h, b, "align"); g.Completed == 0 || g.Count(Success) != 8 {
		t.Fatalf("align after the retry: %+v", g)
	}
	h.Restored()
}

// TestCancelJobGroup: cancelling a group leaves the rest of its batch
// running, takes its Ready jobs out of the queue in one pass however they
// lie, cancels jobs staged for it that commit after, and is idempotent.
func TestCancelJobGroup(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w1", 1, 16)
	// Jobs of the group and of the root interleave in the queue.
	var entries []JobEntry
	for i := uint32(1); i <= 20; i++ {
		if i%2 == 0 {
			entries = append(entries, entry(i, 1, inGroup(spec("x", 1), 1)))
		} else {
			entries = append(entries, entry(i, 1, spec("root", 1)))
		}
	}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "x"}}, Jobs: entries}).(*UpdateResult).Batch
	// An update staged for x before the cancel, committed after it.
	u := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 2}).(*UpdateResult)
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "x"}, {Path: "x/y"}},
		Jobs: []JobEntry{entry(1, 1, inGroup(spec("staged", 1), 2)), entry(2, 1, spec("staged-root", 1))}})
	res := h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 1, Reason: "by root"}).(*JobGroupCancelResult)
	if res.Cancelled != 10 || res.Groups != 2 {
		t.Fatalf("cancel: %+v", res)
	}
	if again := h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 1}).(*JobGroupCancelResult); !again.AlreadyCancelled {
		t.Fatalf("a second cancel: %+v", again)
	}
	h.MustFail(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 9}, ErrNotFound)
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u.Update})
	if st := h.JobState(b, 21); st != Cancelled {
		t.Fatalf("a job staged for x/y before x's cancel is %s after its commit", st)
	}
	if g := groupByPath(t, h, b, "x"); g.NJobs != 11 || g.Count(Cancelled) != 11 || g.Completed == 0 {
		t.Fatalf("x: %+v", g)
	}
	h.RunAll([]uint32{w}, nil)
	if bt := h.Batch(b).record(); bt.Count(Success) != 11 || bt.Count(Cancelled) != 11 || bt.Completed == 0 {
		t.Fatalf("batch: %+v", bt)
	}
	h.Restored()
}

// TestJobGroupDeclarations: apply refuses what the API would, and a
// refused command leaves no group behind.
func TestJobGroupDeclarations(t *testing.T) {
	h := newHarness(t)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "a", CancelAfter: 3}},
		Jobs: []JobEntry{entry(1, 1, inGroup(spec("j", 1), 1))}}).(*UpdateResult).Batch
	deep := "a"
	var chain []JobGroupDecl
	for i := 0; i < MaxJobGroupDepth; i++ {
		deep += "/d"
		chain = append(chain, JobGroupDecl{Path: deep})
	}
	for _, c := range []struct {
		groups []JobGroupDecl
		group  uint32
		kind   ErrorKind
		want   string
	}{
		{[]JobGroupDecl{{Path: "b/c"}}, 1, ErrInvalid, "its parent b is neither"},
		{[]JobGroupDecl{{Path: "../x"}}, 1, ErrInvalid, `neither "." nor ".."`},
		{[]JobGroupDecl{{Path: "a b"}}, 1, ErrInvalid, "names take letters"},
		{[]JobGroupDecl{{Path: "b"}, {Path: "b"}}, 1, ErrInvalid, "declared twice"},
		{[]JobGroupDecl{{Path: "a", CancelAfter: 4}}, 1, ErrConflict, "settings do not change"},
		{[]JobGroupDecl{{Path: "b"}}, 2, ErrInvalid, "names job group 2 of the 1"},
		{nil, 1, ErrInvalid, "names job group 1 of the 0"},
		{chain, 1, ErrInvalid, "deep"},
	} {
		err := h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: c.groups, Jobs: []JobEntry{entry(1, 1, inGroup(spec("j", 1), c.group))}}, c.kind)
		if !strings.Contains(err.Msg, c.want) {
			t.Errorf("%+v: %v, want %q", c.groups, err, c.want)
		}
	}
	if n := len(h.Batch(b).jobGroups); n != 1 {
		t.Fatalf("refused commands left %d groups", n)
	}
	// A group of an existing path is found, its settings unsaid.
	h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: []JobGroupDecl{{Path: "a"}, {Path: "a/b"}}, Jobs: []JobEntry{entry(1, 2, inGroup(spec("j", 1), 2))}})
	if g := groupByPath(t, h, b, "a"); g.NJobs != 3 || g.CancelAfterFailures != 3 {
		t.Fatalf("a: %+v", g)
	}
	h.Restored()
}
