package state

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/drover-sched/drover/money"
)

// Attacks on job groups: counts, cancels, retries, isolation of specs,
// commits on a scratch copy, snapshots and callbacks. Each test asserts
// what would fail if the attack found a bug; the harness checks the
// invariants (CheckInvariants) after every command.

// attackGroup reads a group by path from any State.
func attackGroup(t *testing.T, s *State, b uint64, path string) JobGroupRecord {
	t.Helper()
	id, ok := s.JobGroupID(b, path)
	if !ok {
		t.Fatalf("batch %d has no job group %s", b, path)
	}
	r, _ := s.JobGroup(b, id)
	return r
}

// checkGroupsEqual fails unless two states hold the same job groups of b
// (counts, completion, cancel), as every server must.
func checkGroupsEqual(t *testing.T, what string, a, c *State, b uint64) {
	t.Helper()
	ga, _ := a.JobGroups(b)
	gc, _ := c.JobGroups(b)
	if len(ga) != len(gc) {
		t.Fatalf("%s: %d groups vs %d", what, len(ga), len(gc))
	}
	for i := range ga {
		x, y := ga[i], gc[i]
		if x.Path != y.Path || x.NJobs != y.NJobs || x.Counts != y.Counts || x.Completed != y.Completed || x.Cancelled != y.Cancelled || x.CancelReason != y.CancelReason {
			t.Fatalf("%s: group %s differs:\n%+v\n%+v", what, x.Path, x, y)
		}
	}
}

// endAll ends every attempt running on inst, those of cancelled batches
// and groups (orphans, to be killed) too, with the outcome fn gives.
func endAll(h *Harness, inst uint32, fn func(b uint64, j uint32) Outcome) int {
	h.T.Helper()
	v := h.S.WorkerView(inst, nil)
	ids := v.Orphans
	for _, a := range v.Assign {
		ids = append(ids, a.AttemptID)
	}
	var evs []Event
	for _, a := range ids {
		o := fn(a.Batch, a.Job)
		exit := int32(0)
		if o == OutcomeFailed {
			exit = 1
		}
		evs = append(evs, Event{Instance: inst, Batch: a.Batch, Job: a.Job, Attempt: a.Attempt, Outcome: o, Exit: exit, Start: h.Now, End: h.Tick()})
	}
	if len(evs) > 0 {
		h.Must(&Events{Now: h.Tick(), Events: evs})
	}
	return len(evs)
}

// runAll is Harness.RunAll ending orphans too.
func runAll(h *Harness, insts []uint32, fn func(b uint64, j uint32) Outcome) {
	h.T.Helper()
	if fn == nil {
		fn = func(uint64, uint32) Outcome { return OutcomeSuccess }
	}
	for i := 0; i < 10000; i++ {
		h.Schedule()
		n := 0
		for _, id := range insts {
			n += endAll(h, id, fn)
		}
		if n == 0 {
			return
		}
	}
	h.T.Fatal("runAll did not converge")
}

// TestAttackEmptyGroupOfEmptyBatch: a batch made with job groups and no
// jobs is complete at once; its groups (no jobs, no update open) must be
// complete with it, and a restarted server must hold a state that passes
// its invariants.
func TestAttackEmptyGroupOfEmptyBatch(t *testing.T) {
	h := newHarness(t)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "a", Callback: "https://example.com/a"}}}).(*UpdateResult).Batch
	if bt := h.Batch(b).record(); bt.Completed == 0 {
		t.Fatalf("the empty batch is not complete")
	}
	restored := h.Restored()
	if err := restored.CheckInvariants(); err != nil {
		t.Errorf("restored state: %v", err)
	}
	if g := attackGroup(t, h.S, b, "a"); g.Completed == 0 {
		t.Errorf("group a (0 jobs) of a complete batch is not complete: %+v", g)
	}
}

// TestAttackGroupCancelKeepsComeBackOrder: a group's cancel takes its
// Ready jobs out of the queue in one pass (retain) and must keep the
// count of runs that came back (ready.again) right: a job of another
// group that came back stays ahead, and the next one to come back goes
// behind it, not behind the jobs that never started.
func TestAttackGroupCancelKeepsComeBackOrder(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 2, 16)
	var entries []JobEntry
	for i := uint32(1); i <= 8; i++ {
		if i%2 == 1 {
			entries = append(entries, entry(i, 1, inGroup(spec("x", 1), 1)))
		} else {
			entries = append(entries, entry(i, 1, spec("root", 1)))
		}
	}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "x"}}, Jobs: entries}).(*UpdateResult).Batch
	if r := h.Schedule(); r.Placed != 2 { // jobs 1 and 2
		t.Fatalf("placed %d", r.Placed)
	}
	// Both come back (preempted): the queue is [1] [2] (again) [3..8].
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
		{Instance: w, Batch: b, Job: 2, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
	}})
	if got := fmt.Sprint(readyOrder(h.S, b)); got != "[1 2 3 4 5 6 7 8]" {
		t.Fatalf("ready order %s", got)
	}
	res := h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 1, Reason: "attack"}).(*JobGroupCancelResult)
	if res.Cancelled != 4 {
		t.Fatalf("cancel: %+v", res)
	}
	if got := fmt.Sprint(readyOrder(h.S, b)); got != "[2 4 6 8]" {
		t.Fatalf("ready order after the cancel %s", got)
	}
	if q := &h.Batch(b).ready; q.again != 1 {
		t.Fatalf("%d runs counted as come back, want 1 (job 2)", q.again)
	}
	// Job 2 runs and comes back again; then job 4 runs and comes back:
	// 4 goes behind 2? No: 2 was placed, so 4 leads, 2 behind it.
	h.Schedule() // 2 and 4
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 4, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
	}})
	if got := fmt.Sprint(readyOrder(h.S, b)); got != "[4 6 8]" {
		t.Fatalf("ready order after job 4 came back %s", got)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 2, Attempt: 2, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
	}})
	if got := fmt.Sprint(readyOrder(h.S, b)); got != "[4 2 6 8]" {
		t.Fatalf("ready order after job 2 came back %s, want [4 2 6 8]", got)
	}
	h.Restored()
}

// TestAttackGroupCancelWhileCreating: a job of a group whose private
// machine is being made (Creating) is cancelled with its group, its
// machine drained, the counts right on every server.
func TestAttackGroupCancelWhileCreating(t *testing.T) {
	h := autoscaled(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), LaunchConfigs: []LaunchConfig{
		{Name: "big", Cluster: "a", MachineType: "n2-highmem-16", Zone: "east-b", CPUMilli: 16000, Memory: 128 << 30, PricePerHour: 500_000_000}}})
	sp := spec("private", 4)
	sp.Where = &Where{MachineType: "n2-highmem-16"}
	sp = inGroup(sp, 2)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "p"}, {Path: "p/q"}},
		Jobs: []JobEntry{entry(1, 3, sp), entry(4, 1, spec("free", 1))}}).(*UpdateResult).Batch
	res := h.Must(&Scale{Now: h.Tick(), Private: []ScalePrivate{{Config: "big", Batch: b, Job: 2, Reason: "own"}}}).(*ScaleResult)
	if len(res.Requests) != 1 || h.JobState(b, 2) != Creating {
		t.Fatalf("scale: %+v, job 2 %s", res, h.JobState(b, 2))
	}
	if g := attackGroup(t, h.S, b, "p"); g.Count(Creating) != 1 || g.Count(Ready) != 2 {
		t.Fatalf("p before the cancel: %+v", g)
	}
	cr := h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 1, Reason: "attack"}).(*JobGroupCancelResult)
	if cr.Cancelled != 3 || cr.Groups != 2 {
		t.Fatalf("cancel: %+v", cr)
	}
	for id := uint32(1); id <= 3; id++ {
		if st := h.JobState(b, id); st != Cancelled {
			t.Fatalf("job %d is %s", id, st)
		}
	}
	if g := attackGroup(t, h.S, b, "p/q"); g.Count(Cancelled) != 3 || g.Completed == 0 {
		t.Fatalf("p/q after the cancel: %+v", g)
	}
	m := res.Requests[0].Machines[0]
	for _, mi := range h.S.Machines() {
		if mi.ID == m && mi.State != MachineDraining {
			t.Fatalf("the cancelled job's machine is %s, want draining", MachineStateName(mi.State))
		}
	}
	checkGroupsEqual(t, "restored", h.S, h.Restored(), b)
}

// TestAttackRetryAfterGroupCancel: a group cancelled while its jobs are
// Running, Ready and Pending; the running ones end; a retry runs them
// again and the group with them; a second cancel, a batch cancel and a
// retry again keep every count right, snapshots in between.
func TestAttackRetryAfterGroupCancel(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 2, 16)
	groups := []JobGroupDecl{{Path: "g"}, {Path: "g/h"}, {Path: "o"}}
	always := spec("always", 1)
	always.AlwaysRun = true
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: groups, Jobs: []JobEntry{
		entry(1, 4, inGroup(spec("h", 1), 2)),               // 1,2 run; 3,4 ready
		entry(5, 2, inGroup(spec("gp", 1), 1), Range{1, 4}), // pending on h
		entry(7, 1, inGroup(spec("other", 1), 3), Range{5, 6}),
		entry(8, 1, inGroup(always, 3), Range{1, 1}),
	}}).(*UpdateResult).Batch
	h.Schedule()
	if h.JobState(b, 1) != Running || h.JobState(b, 2) != Running || h.JobState(b, 3) != Ready {
		t.Fatal("setup")
	}
	cr := h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 1, Reason: "attack"}).(*JobGroupCancelResult)
	if cr.Running != 2 || cr.Groups != 2 {
		t.Fatalf("cancel: %+v", cr)
	}
	// Job 7 waits for 5-6 (cancelled): cancelled, its group o not.
	if st := h.JobState(b, 7); st != Cancelled {
		t.Fatalf("job 7 is %s", st)
	}
	if o := attackGroup(t, h.S, b, "o"); o.Cancelled {
		t.Fatal("o was cancelled with g")
	}
	checkGroupsEqual(t, "restored after cancel", h.S, h.Restored(), b)
	// The running ones end: one says failed, one cancelled.
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Now},
		{Instance: w, Batch: b, Job: 2, Attempt: 1, Outcome: OutcomeCancelled, Start: h.Now, End: h.Now},
	}})
	runAll(h, []uint32{w}, nil) // job 8 (always_run) runs
	g := attackGroup(t, h.S, b, "g")
	if g.NJobs != 6 || g.Count(Failed) != 1 || g.Count(Cancelled) != 5 || g.Completed == 0 {
		t.Fatalf("g at its end: %+v", g)
	}
	// A retry of failed and cancelled jobs: g and g/h run again.
	rr := h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: RetryStates(Failed, Cancelled)}).(*RetryResult)
	if rr.Retried != 7 {
		t.Fatalf("retried %d, want 7 (1-7)", rr.Retried)
	}
	for _, p := range []string{"g", "g/h"} {
		if g := attackGroup(t, h.S, b, p); g.Cancelled || g.Completed != 0 {
			t.Fatalf("%s after the retry: %+v", p, g)
		}
	}
	checkGroupsEqual(t, "restored after retry", h.S, h.Restored(), b)
	h.Schedule()
	// Cancel g/h alone while 1, 2 run; then the batch.
	cr = h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 2, Reason: "again"}).(*JobGroupCancelResult)
	if cr.Groups != 1 || attackGroup(t, h.S, b, "g").Cancelled {
		t.Fatalf("cancel g/h: %+v", cr)
	}
	h.Must(&CancelBatch{Now: h.Tick(), Batch: b, Reason: "all"})
	checkGroupsEqual(t, "restored after batch cancel", h.S, h.Restored(), b)
	runAll(h, []uint32{w}, func(uint64, uint32) Outcome { return OutcomeCancelled })
	if bt := h.Batch(b).record(); bt.Completed == 0 {
		t.Fatal("batch not complete")
	}
	for _, p := range []string{"g", "g/h", "o"} {
		if g := attackGroup(t, h.S, b, p); g.Completed == 0 || !g.Cancelled {
			t.Fatalf("%s after the batch cancel: %+v", p, g)
		}
	}
	h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: RetryStates(Failed, Error, Cancelled)})
	runAll(h, []uint32{w}, nil)
	for _, p := range []string{"g", "g/h", "o"} {
		if g := attackGroup(t, h.S, b, p); g.Completed == 0 || g.Cancelled || g.Count(Success) != g.NJobs {
			t.Fatalf("%s after the last retry: %+v", p, g)
		}
	}
	checkGroupsEqual(t, "restored at the end", h.S, h.Restored(), b)
}

// TestAttackOOMAndSpotIsolationInGroup: OOM retries and the spot cap give
// a job a spec group of its own (Batch.isolate); its job group must stay
// the same, the counts and costs right, through a group cancel and a
// snapshot.
func TestAttackOOMAndSpotIsolationInGroup(t *testing.T) {
	h := newHarness(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "c", Region: "r", Pools: []Pool{
		{Name: "spot", CPUMilli: 4000, Preemptible: true}, {Name: "std", CPUMilli: 4000}}}}})
	activate := func(name, pool string) uint32 {
		t.Helper()
		res := h.Must(&Activate{Now: h.Tick(), Name: name, CPUMilli: 2000, Memory: 8 << 30, TokenHash: "tok-" + name, Region: "r", Cluster: "c", Pool: pool})
		return res.(*ActivateResult).Instance
	}
	sp := spec("iso", 1)
	sp.Array = true
	sp.Run = &Run{Policy: &Policy{OOMFactorMilli: 1500, OOMMaxMemory: 4 << 30, MaxSpot: 1}}
	sp = inGroup(sp, 2)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "g"}, {Path: "g/i"}},
		Jobs: []JobEntry{entry(1, 4, sp), entry(5, 1, spec("free", 1))}}).(*UpdateResult).Batch
	s1 := activate("s1", "spot")
	if r := h.Schedule(); r.Placed != 2 {
		t.Fatalf("placed %d", r.Placed)
	}
	// Job 1 runs out of memory (isolated with more), job 2's spot
	// machine is reclaimed (isolated off spot).
	h.Must(&Events{Now: h.Tick(), Events: []Event{oomEvent(h, s1, b, 1, 1)}})
	h.Must(&Retire{Now: h.Tick(), Instance: s1, Reason: "reclaimed", MaxLost: 3, Preempted: true})
	if n := len(h.Batch(b).groups); n < 4 {
		t.Fatalf("%d spec groups; isolation made none", n)
	}
	for _, id := range []uint32{1, 2} {
		bt := h.Batch(b)
		if jg := bt.jobGroup(bt.groupOf(id).spec); jg == nil || jg.ID != 2 {
			t.Fatalf("job %d isolated out of job group 2: %+v", id, jg)
		}
	}
	if g := attackGroup(t, h.S, b, "g"); g.NJobs != 4 || g.Count(Ready) != 4 {
		t.Fatalf("g after isolation: %+v", g)
	}
	checkGroupsEqual(t, "restored after isolation", h.S, h.Restored(), b)
	od := activate("od", "std")
	h.Schedule()
	h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 2, Reason: "attack"})
	runAll(h, []uint32{od}, func(uint64, uint32) Outcome { return OutcomeCancelled })
	g := attackGroup(t, h.S, b, "g")
	if g.Count(Cancelled) != 4 || g.Completed == 0 {
		t.Fatalf("g at the end: %+v", g)
	}
	checkGroupsEqual(t, "restored at the end", h.S, h.Restored(), b)
}

// TestAttackStagedJobsAfterGroupCancel: jobs staged for a group in an
// open update before its cancel are cancelled as they commit, even when
// they wait for a running parent of another group; new bunches naming
// the group, or a new group under it, are refused; the group completes
// only when those jobs are final.
func TestAttackStagedJobsAfterGroupCancel(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 1, 16)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "x"}, {Path: "y"}},
		Jobs: []JobEntry{entry(1, 1, inGroup(spec("parent", 1), 2)), entry(2, 1, inGroup(spec("x1", 1), 1))}}).(*UpdateResult).Batch
	h.Schedule() // job 1 runs
	u := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 3}).(*UpdateResult)
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "x"}, {Path: "x/new"}},
		Jobs: []JobEntry{
			{First: 1, Count: 1, Spec: inGroup(spec("waits", 1), 2), BatchParents: []Range{{1, 1}}},
			entry(2, 1, inGroup(spec("now", 1), 1)),
		}})
	h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 1, Reason: "attack"})
	if g := attackGroup(t, h.S, b, "x/new"); !g.Cancelled {
		t.Fatalf("x/new (made by an open update) not cancelled with x: %+v", g)
	}
	h.MustFail(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "x"}},
		Jobs: []JobEntry{entry(3, 1, inGroup(spec("late", 1), 1))}}, ErrConflict)
	h.MustFail(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "x/late"}},
		Jobs: []JobEntry{entry(3, 1, inGroup(spec("late", 1), 1))}}, ErrConflict)
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Jobs: []JobEntry{entry(3, 1, spec("root", 1))}})
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u.Update})
	if st := h.JobState(b, 4); st != Cancelled {
		t.Fatalf("job 4 (staged for x/new, waiting on nothing) is %s", st)
	}
	// Job 3 waits for job 1 (running): Pending, and x is not complete.
	if st := h.JobState(b, 3); st != Pending && st != Cancelled {
		t.Fatalf("job 3 is %s", st)
	}
	x := attackGroup(t, h.S, b, "x")
	if final := x.Count(Success) + x.Count(Failed) + x.Count(Cancelled) + x.Count(Error); (final == x.NJobs) != (x.Completed != 0) {
		t.Fatalf("x: %+v", x)
	}
	checkGroupsEqual(t, "restored", h.S, h.Restored(), b)
	runAll(h, []uint32{w}, nil)
	if st := h.JobState(b, 3); st != Cancelled {
		t.Fatalf("job 3 of cancelled x/new ran: %s", st)
	}
	if x := attackGroup(t, h.S, b, "x"); x.NJobs != 3 || x.Count(Cancelled) != 3 || x.Completed == 0 {
		t.Fatalf("x at the end: %+v", x)
	}
	checkGroupsEqual(t, "restored at the end", h.S, h.Restored(), b)
}

// TestAttackGroupBoundsOverUpdates: 10,000 groups a batch over many
// updates, and not one more; a deep path beyond 8; a group named like an
// ID is refused, a path with digits in it is a path; refused commands
// leave nothing behind.
func TestAttackGroupBoundsOverUpdates(t *testing.T) {
	h := newHarness(t)
	h.MustFail(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "1"}},
		Jobs: []JobEntry{entry(1, 1, inGroup(spec("j", 1), 1))}}, ErrInvalid)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "1a"}, {Path: "1a/2"}},
		Jobs: []JobEntry{entry(1, 1, inGroup(spec("j", 1), 2))}}).(*UpdateResult).Batch
	if id, ok := h.S.JobGroupID(b, "1a/2"); !ok || id != 2 {
		t.Fatalf("1a/2 is %d %v", id, ok)
	}
	made := 2
	for made < MaxJobGroups {
		n := min(MaxJobGroupsPerRequest, MaxJobGroups-made)
		decls := make([]JobGroupDecl, n)
		for i := range decls {
			decls[i] = JobGroupDecl{Path: fmt.Sprintf("u%d", made+i), Attributes: StringMap{"k": strings.Repeat("v", 100)}}
		}
		u := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 1}).(*UpdateResult)
		// Groups made by a bunch of an open update, not by a commit.
		h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: decls, Jobs: []JobEntry{entry(1, 1, inGroup(spec("j", 1), 1))}})
		h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u.Update})
		made += n
	}
	if n := len(h.Batch(b).jobGroups); n != MaxJobGroups {
		t.Fatalf("%d groups", n)
	}
	err := h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: []JobGroupDecl{{Path: "one-more"}},
		Jobs: []JobEntry{entry(1, 1, inGroup(spec("j", 1), 1))}}, ErrInvalid)
	if !strings.Contains(err.Msg, "more than 10000") {
		t.Fatalf("one more: %v", err)
	}
	u := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 1}).(*UpdateResult)
	h.MustFail(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "one-more"}},
		Jobs: []JobEntry{entry(1, 1, inGroup(spec("j", 1), 1))}}, ErrInvalid)
	if n := len(h.Batch(b).jobGroups); n != MaxJobGroups {
		t.Fatalf("%d groups after refusals", n)
	}
	// Existing groups still take jobs.
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "1a/2"}},
		Jobs: []JobEntry{entry(1, 1, inGroup(spec("j", 1), 1))}})
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u.Update})
	if g := attackGroup(t, h.S, b, "1a"); g.NJobs != 2 {
		t.Fatalf("1a: %+v", g)
	}
	h.Restored()
}

// TestAttackCommitRacesGroupReaders: a commit runs on a scratch copy of
// the batch with no lock held while readers read its job groups (run
// with -race); the readers see the groups before or after the commit,
// never a half of it.
func TestAttackCommitRacesGroupReaders(t *testing.T) {
	h := newHarness(t)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "a"}, {Path: "a/b"}},
		Jobs: []JobEntry{entry(1, 10, inGroup(spec("first", 1), 2))}}).(*UpdateResult).Batch
	const per = 2000
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Value
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				gs, _ := h.S.JobGroups(b)
				if len(gs) < 2 {
					continue
				}
				a, ab := gs[0], gs[1]
				// a counts a/b's jobs: the same commit on both or on none.
				if a.NJobs != ab.NJobs || (a.NJobs-10)%per != 0 {
					bad.Store(fmt.Sprintf("a %d jobs, a/b %d", a.NJobs, ab.NJobs))
				}
				var sum int64
				for _, n := range a.Counts {
					sum += n
				}
				if sum != a.NJobs {
					bad.Store(fmt.Sprintf("a counts %v of %d jobs", a.Counts, a.NJobs))
				}
				if id, ok := h.S.JobGroupID(b, "a/b"); ok {
					h.S.JobGroup(b, id)
				}
				h.S.CallbacksDue(10, nil)
			}
		}()
	}
	for i := 0; i < 5; i++ {
		u := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: per}).(*UpdateResult)
		h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "a/b"}},
			Jobs: []JobEntry{entry(1, per, inGroup(spec("more", 1), 1))}})
		h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u.Update})
	}
	stop.Store(true)
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	if g := attackGroup(t, h.S, b, "a"); g.NJobs != 10+5*per {
		t.Fatalf("a: %+v", g)
	}
}

// TestAttackGroupCallbackEachCompletion: a group completing again after a
// retry is reported again (a new version); a late report of the first
// completion changes nothing; a batch's and its groups' reports are kept
// apart.
func TestAttackGroupCallbackEachCompletion(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 2, 16)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Callback: "https://example.com/batch",
		Groups: []JobGroupDecl{{Path: "g", Callback: "https://example.com/g"}},
		Jobs:   []JobEntry{entry(1, 1, inGroup(spec("j", 1), 1)), entry(2, 1, spec("k", 1))}}).(*UpdateResult).Batch
	runAll(h, []uint32{w}, func(_ uint64, j uint32) Outcome {
		if j == 1 {
			return OutcomeFailed
		}
		return OutcomeSuccess
	})
	due := h.S.CallbacksDue(10, nil)
	if len(due) != 2 {
		t.Fatalf("due %+v", due)
	}
	var first CallbackDue
	for _, d := range due {
		if d.Group == 1 {
			first = d
		}
	}
	if first.URL != "https://example.com/g" {
		t.Fatalf("due %+v", due)
	}
	h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: RetryStates(Failed)})
	if due := h.S.CallbacksDue(10, nil); len(due) != 0 {
		t.Fatalf("due while running again: %+v", due)
	}
	// A late report of the first completion: ignored.
	h.Must(&CallbackDone{Now: h.Tick(), Batch: b, Group: 1, Version: first.Version, Result: "HTTP 200"})
	runAll(h, []uint32{w}, nil)
	due = h.S.CallbacksDue(10, nil)
	var second *CallbackDue
	for i := range due {
		if due[i].Group == 1 {
			second = &due[i]
		}
	}
	if second == nil || second.Version == first.Version {
		t.Fatalf("the second completion is not due again: %+v (first %+v)", due, first)
	}
	// Reporting the batch does not report the group.
	for _, d := range due {
		if d.Group == 0 {
			h.Must(&CallbackDone{Now: h.Tick(), Batch: b, Version: d.Version, Result: "HTTP 200"})
		}
	}
	if due := h.S.CallbacksDue(10, nil); len(due) != 1 || due[0].Group != 1 {
		t.Fatalf("after the batch's report: %+v", due)
	}
	h.MustFail(&CallbackDone{Now: h.Tick(), Batch: b, Group: 7, Version: second.Version}, ErrNotFound)
	h.Must(&CallbackDone{Now: h.Tick(), Batch: b, Group: 1, Version: second.Version, Result: "HTTP 200"})
	if due := h.S.CallbacksDue(10, nil); len(due) != 0 {
		t.Fatalf("after both: %+v", due)
	}
	h.Restored()
}

// TestAttackApplyRefusesForgedGroupCommands: commands as a buggy or
// hostile leader could log them (never through the API) are refused by
// apply, leaving the state as it was, the same on every server.
func TestAttackApplyRefusesForgedGroupCommands(t *testing.T) {
	h := newHarness(t)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "a"}},
		Jobs: []JobEntry{entry(1, 1, inGroup(spec("j", 1), 1))}}).(*UpdateResult).Batch
	long := strings.Repeat("x", 129)
	tooMany := make([]JobGroupDecl, MaxJobGroupsPerRequest+1)
	for i := range tooMany {
		tooMany[i].Path = fmt.Sprintf("m%d", i)
	}
	for _, c := range []struct {
		groups []JobGroupDecl
		group  uint32
	}{
		{[]JobGroupDecl{{Path: ""}}, 1},
		{[]JobGroupDecl{{Path: "/a"}}, 1},
		{[]JobGroupDecl{{Path: "a/"}}, 1},
		{[]JobGroupDecl{{Path: "a//b"}}, 1},
		{[]JobGroupDecl{{Path: long}}, 1},
		{[]JobGroupDecl{{Path: "a/\x00"}}, 1},
		{[]JobGroupDecl{{Path: "é"}}, 1},
		{[]JobGroupDecl{{Path: "b"}}, 1 << 31},
		{tooMany, 1},
		{[]JobGroupDecl{{Path: "c/d"}, {Path: "c"}}, 1}, // child before parent
	} {
		h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: c.groups, Jobs: []JobEntry{entry(1, 1, inGroup(spec("j", 1), c.group))}}, ErrInvalid)
	}
	h.MustFail(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 0}, ErrNotFound)
	h.MustFail(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 1 << 31}, ErrNotFound)
	h.MustFail(&CancelJobGroup{Now: h.Tick(), Batch: b + 1, Group: 1}, ErrNotFound)
	h.MustFail(&CallbackDone{Now: h.Tick(), Batch: b, Group: 1 << 31, Version: 1}, ErrNotFound)
	if n := len(h.Batch(b).jobGroups); n != 1 {
		t.Fatalf("%d groups after refusals", n)
	}
	h.Restored()
}

// TestAttackForgetBeforeGroupCallback: a complete, exported batch is
// kept in memory until its callback was told of its completion (the
// batch's: forgettable); its job groups' callbacks must hold it too, or
// their completion is never reported ("the batch left the state").
func TestAttackForgetBeforeGroupCallback(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 1, 16)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "g", Callback: "https://example.com/g"}},
		Jobs:   []JobEntry{entry(1, 1, inGroup(spec("j", 1), 1))}}).(*UpdateResult).Batch
	runAll(h, []uint32{w}, nil)
	due := h.S.CallbacksDue(10, nil)
	if len(due) != 1 || due[0].Group != 1 {
		t.Fatalf("due %+v", due)
	}
	q, _ := h.S.ExportQueue(10)
	if len(q) != 1 {
		t.Fatalf("export queue %+v", q)
	}
	h.Must(&MarkExported{Marks: []ExportMark{{q[0].Batch, q[0].Version}}})
	fr := h.Must(&ForgetBatches{Now: h.Tick(), Batches: []uint64{b}}).(*ForgetResult)
	if len(fr.Forgotten) != 0 {
		t.Fatalf("batch %d forgotten while its group g's callback is due (%+v): the report is lost", b, due[0])
	}
}

// TestAttackGroupCostThroughSnapshot: a group's cost (ended attempts and
// running ones) is the same on a restored server, through an OOM
// isolation and a group cancel.
func TestAttackGroupCostThroughSnapshot(t *testing.T) {
	h := newHarness(t)
	h.Must(&SetRates{Now: h.Tick(), Rates: []RateEntry{{Resource: "compute", Price: 3600 * money.DollarPerHour}}})
	w := h.Activate("w", 4, 64)
	sp := spec("j", 1)
	sp.Array = true
	sp.Run = &Run{Policy: &Policy{OOMFactorMilli: 2000, OOMMaxMemory: 8 << 30}}
	sp = inGroup(sp, 2)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "a"}, {Path: "a/b"}},
		Jobs: []JobEntry{entry(1, 3, sp), entry(4, 1, inGroup(spec("k", 1), 1))}}).(*UpdateResult).Batch
	h.Schedule()
	for id := uint32(1); id <= 4; id++ {
		h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: w, Batch: b, Job: id, Attempt: 1, Started: true, Start: h.Now}}})
	}
	h.Tick()
	h.Must(&Events{Now: h.Tick(), Events: []Event{oomEvent(h, w, b, 1, 1)}})
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: w, Batch: b, Job: 4, Attempt: 1, Outcome: OutcomeSuccess, Start: h.Now - 5e9, End: h.Tick()}}})
	check := func(what string) {
		t.Helper()
		r := h.Restored()
		now := h.Tick()
		var sum money.Amount
		for _, p := range []string{"a", "a/b"} {
			x, y := attackGroup(t, h.S, b, p), attackGroup(t, r, b, p)
			if x.Cost(now) != y.Cost(now) {
				t.Fatalf("%s: %s costs %v here, %v restored", what, p, x.Cost(now), y.Cost(now))
			}
			if p == "a" {
				sum = x.Cost(now)
			}
		}
		bt, _ := h.S.Batch(b)
		if bt.Cost(now) != sum {
			t.Fatalf("%s: batch costs %v, its only top group a %v", what, bt.Cost(now), sum)
		}
	}
	check("running")
	h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 2, Reason: "attack"})
	check("cancelled")
	runAll(h, []uint32{w}, func(uint64, uint32) Outcome { return OutcomeCancelled })
	check("ended")
}
