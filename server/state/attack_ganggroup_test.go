package state

import (
	"strings"
	"testing"
)

// Attacks on gangs of job groups (gang = true on a job group): a job
// group's gang spans several entries (specs), each knowing its place in
// the gang (Gang.Lead). What a tenant can reach through the API is built
// here as the API builds it (apiview.GroupDecls): a declaration per
// group, each member's spec in its group with Size/Lead.

// ggFleet: four 2-core workers in one cluster.
func ggFleet(t *testing.T) (*Harness, [4]uint32) {
	h := newHarness(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "c1", Region: "r", Pools: []Pool{{Name: "p", CPUMilli: 8000}}}}})
	var insts [4]uint32
	for i, name := range []string{"w1", "w2", "w3", "w4"} {
		res := h.Must(&Activate{Now: h.Tick(), Name: name, CPUMilli: 2000, Memory: 8 << 30, TokenHash: "tok-" + name, Region: "r", Cluster: "c1", Pool: "p"})
		insts[i] = res.(*ActivateResult).Instance
	}
	return h, insts
}

// ggMember is a member entry of a job group's gang: jobs first..first+count-1,
// in the request's group decl ref, lead members before it of size.
func ggMember(name string, first, count, size, lead, ref uint32, parents ...Range) JobEntry {
	sp := spec(name, 1)
	sp.Array = count > 1
	sp.Run = &Run{Group: ref, Gang: &Gang{Size: size, Lead: lead}}
	return entry(first, count, sp, parents...)
}

// ggPlain is a job outside any gang, in group ref (0: none).
func ggPlain(name string, first uint32, ref uint32, parents ...Range) JobEntry {
	sp := spec(name, 1)
	if ref != 0 {
		sp.Run = &Run{Group: ref}
	}
	return entry(first, 1, sp, parents...)
}

// ggMPI: "mpi" a gang of a launcher (job 1) and three ranks (jobs 2-4)
// in "mpi/ranks", as the API builds them; group IDs mpi=1, mpi/ranks=2.
func ggMPI(h *Harness, extra ...JobEntry) uint64 {
	jobs := append([]JobEntry{ggMember("launcher", 1, 1, 4, 0, 1), ggMember("ranks", 2, 3, 4, 1, 2)}, extra...)
	return h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "mpi", Gang: true}, {Path: "mpi/ranks"}}, Jobs: jobs}).(*UpdateResult).Batch
}

// ggStuck fails the test when a member of the gang first..last sits
// Ready while another member ended without success: it can never start
// (GangReady says the gang is not whole), so it waits for ever and its
// batch never completes.
func ggStuck(t *testing.T, h *Harness, what string, b uint64, first, last uint32) {
	t.Helper()
	var dead, ready []uint32
	for id := first; id <= last; id++ {
		switch st := h.JobState(b, id); {
		case st == Ready || st == Pending:
			ready = append(ready, id)
		case st.Final() && st != Success:
			dead = append(dead, id)
		}
	}
	if len(dead) > 0 && len(ready) > 0 {
		var whole bool
		h.S.Read(func(rd Reader) { _, _, whole = rd.GangReady(rd.Batch(b), ready[0]) })
		t.Errorf("%s: members %v ended without success, yet members %v still wait (GangReady whole=%v): they can never start, and batch %d never completes (completed=%d)",
			what, dead, ready, whole, b, h.Batch(b).Completed)
	}
}

// TestAttackGangGroupCancelSubgroupWhileReady: cancelling a job group
// below the gang group (POST .../job-groups/mpi%2Franks/cancel) while the
// gang waits cancels the ranks; the launcher, the gang's last member, can
// never start alone, so it must be cancelled with them (as cancelGang
// does when a member fails for good), and the batch complete.
func TestAttackGangGroupCancelSubgroupWhileReady(t *testing.T) {
	h, _ := ggFleet(t)
	b := ggMPI(h)
	h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 2, Reason: "attack"})
	for id := uint32(2); id <= 4; id++ {
		if st := h.JobState(b, id); st != Cancelled {
			t.Fatalf("rank %d is %s after its group's cancel", id, st)
		}
	}
	ggStuck(t, h, "ranks cancelled while the gang waited", b, 1, 4)
	if st := h.JobState(b, 1); st != Cancelled {
		t.Errorf("the launcher is %s, want Cancelled: its gang cannot run whole", st)
	}
	if h.Batch(b).Completed == 0 {
		t.Errorf("batch %d never completes", b)
	}
	// The scheduler never places the launcher alone, whatever it is told.
	res := h.Schedule()
	if res.Placed != 0 {
		t.Errorf("placed %d jobs of a gang whose ranks were cancelled", res.Placed)
	}
	h.Restored()
}

// TestAttackGangGroupCancelSubgroupWhileRunning: the same cancel while
// the gang runs: the ranks are killed, the launcher is stopped with them
// and ends cancelled; the batch completes. (Holds.)
func TestAttackGangGroupCancelSubgroupWhileRunning(t *testing.T) {
	h, in := ggFleet(t)
	b := ggMPI(h)
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, in[0]}, [3]uint32{2, 1, in[0]}, [3]uint32{3, 2, in[1]})).(*PlanResult); res.Placed != 4 {
		t.Fatalf("the gang: %+v", res)
	}
	h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 2, Reason: "attack"})
	if v := h.S.WorkerView(in[1], []AttemptID{{b, 3, 1}, {b, 4, 1}}); len(v.Kill) != 2 {
		t.Fatalf("the ranks' worker is told %+v, want both killed", v)
	}
	ev := func(job, inst uint32, o Outcome) Event {
		return Event{Instance: inst, Batch: b, Job: job, Attempt: 1, Outcome: o, Start: h.Now, End: h.Now}
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{ev(2, in[0], OutcomeCancelled), ev(3, in[1], OutcomeCancelled), ev(4, in[1], OutcomeCancelled)}})
	v := h.S.WorkerView(in[0], []AttemptID{{b, 1, 1}})
	if len(v.Preempt)+len(v.Kill) != 1 {
		t.Fatalf("the launcher's worker is told %+v, want the launcher stopped", v)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{ev(1, in[0], OutcomePreempted)}})
	for id := uint32(1); id <= 4; id++ {
		if st := h.JobState(b, id); st != Cancelled {
			t.Errorf("member %d is %s, want Cancelled", id, st)
		}
	}
	if h.Batch(b).Completed == 0 {
		t.Errorf("batch %d never completes", b)
	}
	h.Restored()
}

// TestAttackGangGroupMemberParentFails: the members of a gang group may
// wait for different parents (ValidateGangGroups only forbids waiting
// for another member). A rank waits for a setup job (5) that fails: the
// rank is cancelled without running (deps.go releaseRun), and the
// launcher, Ready, can never start whole: it must be cancelled too.
func TestAttackGangGroupMemberParentFails(t *testing.T) {
	h, in := ggFleet(t)
	jobs := []JobEntry{
		ggMember("launcher", 1, 1, 2, 0, 1),
		ggMember("rank", 2, 1, 2, 1, 1, Range{3, 3}),
		ggPlain("setup", 3, 0),
	}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "mpi", Gang: true}}, Jobs: jobs}).(*UpdateResult).Batch
	if h.JobState(b, 1) != Ready || h.JobState(b, 2) != Pending {
		t.Fatalf("launcher %s, rank %s", h.JobState(b, 1), h.JobState(b, 2))
	}
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{3, 1, in[0]})).(*PlanResult); res.Placed != 1 {
		t.Fatalf("setup: %+v", res)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: in[0], Batch: b, Job: 3, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Now}}})
	if st := h.JobState(b, 2); st != Cancelled {
		t.Fatalf("the rank is %s after its parent failed", st)
	}
	ggStuck(t, h, "a member cancelled because its parent failed", b, 1, 2)
	if h.Batch(b).Completed == 0 {
		t.Errorf("batch %d never completes", b)
	}
	h.Restored()
}

// TestAttackGangGroupMemberCommittedCancelled: a member waiting for a job
// of an earlier update that already failed is cancelled as it is
// committed; the other member is Ready, and can never start.
func TestAttackGangGroupMemberCommittedCancelled(t *testing.T) {
	h, in := ggFleet(t)
	b := h.CreateBatch(ggPlain("setup", 1, 0))
	h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, in[0]}))
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: in[0], Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Now}}})
	rank := ggMember("rank", 2, 1, 2, 1, 1)
	rank.BatchParents = []Range{{1, 1}}
	h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: []JobGroupDecl{{Path: "mpi", Gang: true}},
		Jobs: []JobEntry{ggMember("launcher", 1, 1, 2, 0, 1), rank}})
	ggStuck(t, h, "a member cancelled at commit (its batch parent had failed)", b, 2, 3)
	if h.Batch(b).Completed == 0 {
		t.Errorf("batch %d never completes", b)
	}
}

// TestAttackGangGroupDeadlockThroughOutsider: no member waits for another
// directly, but rank 3 waits for job 1, outside the gang, which waits for
// the launcher (job 2): the gang can only start once rank 3 is Ready,
// which needs job 1 done, which needs the gang to have run. There is no
// cycle between jobs, but there is one between the gang and job 1: the
// commit must refuse it (as it refuses a member waiting for another),
// or the batch waits for ever.
func TestAttackGangGroupDeadlockThroughOutsider(t *testing.T) {
	h, _ := ggFleet(t)
	jobs := []JobEntry{
		ggPlain("post", 1, 0, Range{2, 2}),
		ggMember("launcher", 2, 1, 2, 0, 1),
		ggMember("rank", 3, 1, 2, 1, 1, Range{1, 1}),
	}
	res := h.Apply(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "mpi", Gang: true}}, Jobs: jobs})
	if _, ok := res.(*ApplyError); ok {
		return // refused: fixed
	}
	b := res.(*UpdateResult).Batch
	for i := 0; i < 3; i++ {
		h.Schedule()
	}
	t.Errorf("a gang waiting on itself through job 1 was committed: launcher %s, rank %s, job 1 %s; nothing ever runs and batch %d never completes",
		h.JobState(b, 2), h.JobState(b, 3), h.JobState(b, 1), b)
}

// TestAttackGangGroupDeadlockAcrossGangs: two gang groups, each with a
// member waiting for a member of the other (a -> b's first, b -> a's
// first): no job waits on a job of its own gang, no job cycle, and
// neither gang can ever start.
func TestAttackGangGroupDeadlockAcrossGangs(t *testing.T) {
	h, _ := ggFleet(t)
	jobs := []JobEntry{
		ggMember("a0", 1, 1, 2, 0, 1),
		ggMember("a1", 2, 1, 2, 1, 1, Range{3, 3}),
		ggMember("b0", 3, 1, 2, 0, 2),
		ggMember("b1", 4, 1, 2, 1, 2, Range{1, 1}),
	}
	res := h.Apply(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "a", Gang: true}, {Path: "b", Gang: true}}, Jobs: jobs})
	if _, ok := res.(*ApplyError); ok {
		return
	}
	b := res.(*UpdateResult).Batch
	h.Schedule()
	t.Errorf("two gangs waiting on each other were committed: jobs %s %s %s %s; batch %d never completes",
		h.JobState(b, 1), h.JobState(b, 2), h.JobState(b, 3), h.JobState(b, 4), b)
}

// TestAttackGangGroupRetryLeavesMemberBehind: retrying the gang alone
// (its job range) after a member was cancelled because its parent
// failed: the retry runs the gang whole (retrySet), but the member waits
// for a parent that is not run again and is cancelled again, so the
// other member must not be left Ready for ever.
func TestAttackGangGroupRetryLeavesMemberBehind(t *testing.T) {
	h, in := ggFleet(t)
	jobs := []JobEntry{
		ggMember("launcher", 1, 1, 2, 0, 1),
		ggMember("rank", 2, 1, 2, 1, 1, Range{3, 3}),
		ggPlain("setup", 3, 0),
	}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "mpi", Gang: true}}, Jobs: jobs}).(*UpdateResult).Batch
	// Once the setup failed and the batch was given up (whatever a fix
	// does with the launcher meanwhile), a retry of the gang's two jobs
	// alone must not leave the launcher waiting for ever either.
	h.Must(gangPlan(h, b, 1, [3]uint32{3, 1, in[0]}))
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: in[0], Batch: b, Job: 3, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Now}}})
	h.Must(&CancelBatch{Now: h.Tick(), Batch: b, Reason: "give up"})
	for id := uint32(1); id <= 3; id++ {
		if st := h.JobState(b, id); !st.Final() {
			t.Fatalf("job %d is %s after the batch's cancel", id, st)
		}
	}
	h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: RetryStates(Cancelled, Failed), Jobs: []Range{{1, 2}}})
	ggStuck(t, h, "a retry of the gang whose member's parent stays failed", b, 1, 2)
	if h.Batch(b).Completed == 0 {
		t.Errorf("batch %d never completes after the retry", b)
	}
}

// TestAttackGangGroupRetriedBunch: a bunch of a staged update that
// declares a gang group and carries its members is sent twice (a client
// retrying after a lost answer): a bunch whose IDs were all staged is a
// retry and is ignored (update.stage), as it is for any other job
// group; the gang group must not turn the retry into a 409.
func TestAttackGangGroupRetriedBunch(t *testing.T) {
	h, _ := ggFleet(t)
	b := h.CreateBatch(ggPlain("first", 1, 0))
	u := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 3}).(*UpdateResult)
	bunch := func() *AddJobs {
		return &AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "mpi", Gang: true}},
			Jobs: []JobEntry{ggMember("launcher", 1, 1, 2, 0, 1), ggMember("rank", 2, 1, 2, 1, 1)}}
	}
	h.Must(bunch())
	// A plain job group's retried bunch is accepted (the rule).
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "plain"}}, Jobs: []JobEntry{ggPlain("x", 3, 1)}})
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "plain"}}, Jobs: []JobEntry{ggPlain("x", 3, 1)}})
	if res := h.Apply(bunch()); res != nil {
		if err, ok := res.(*ApplyError); ok {
			t.Errorf("the gang group's bunch sent again is refused (%v): a retried bunch is ignored", err)
		}
	}
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u.Update})
	var whole bool
	var first uint32
	h.S.Read(func(rd Reader) { _, first, whole = rd.GangReady(rd.Batch(b), 3) })
	if !whole || first != 2 {
		t.Errorf("the committed gang from job 2: first %d, whole %v", first, whole)
	}
	h.Restored()
}

// TestAttackGangGroupStateRefusals pins what apply refuses of forged
// gang spans (Lead/Size a client cannot write, but a command could):
// a Lead pointing before job 1, a Lead overlapping another gang, a gang
// group's members split across bunches of a staged update, an existing
// gang group named by path alone, a gang group inside an existing one.
func TestAttackGangGroupStateRefusals(t *testing.T) {
	h, _ := ggFleet(t)
	mpi := []JobGroupDecl{{Path: "mpi", Gang: true}}
	for _, c := range []struct {
		name string
		jobs []JobEntry
		says string
	}{
		{"lead before job 1", []JobEntry{ggMember("a", 1, 1, 2, 1, 1), ggMember("b", 2, 1, 2, 1, 1)}, ""},
		{"lead past its gang", []JobEntry{ggMember("a", 1, 1, 2, 0, 1), ggMember("b", 2, 2, 2, 1, 1)}, "outside its gang"},
		{"two leads of one job", []JobEntry{ggMember("a", 1, 1, 3, 0, 1), ggMember("b", 2, 1, 3, 0, 1), ggMember("c", 3, 1, 3, 2, 1)}, ""},
		{"size beyond the max", []JobEntry{ggMember("a", 1, 1, MaxGangSize+1, 0, 1), ggMember("b", 2, 1, MaxGangSize+1, 1, 1)}, "2 to"},
		{"sizes disagree", []JobEntry{ggMember("a", 1, 1, 2, 0, 1), ggMember("b", 2, 2, 3, 1, 1)}, ""},
	} {
		res := h.Apply(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: mpi, Jobs: c.jobs})
		err, ok := res.(*ApplyError)
		if !ok {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.Contains(err.Msg, c.says) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.says)
		}
	}
	// Staged: the gang group's members in two bunches.
	b := h.CreateBatch(ggPlain("first", 1, 0))
	u := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 2}).(*UpdateResult)
	h.MustFail(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: mpi, Jobs: []JobEntry{ggMember("a", 1, 1, 2, 0, 1)}}, ErrInvalid)
	// The first bunch's group was dropped with it: the second bunch may
	// not name it as an existing gang, and may not make it whole either.
	if err := h.MustFail(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "mpi"}}, Jobs: []JobEntry{ggMember("b", 2, 1, 2, 1, 1)}}, ErrInvalid); !strings.Contains(err.Msg, "a gang of several entries is a job group's") {
		t.Errorf("the rest of a gang in a later bunch: %v", err)
	}
	// A whole gang in one bunch, and then the existing gang group by
	// path alone (gang unset) with more jobs: refused.
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: mpi, Jobs: []JobEntry{ggMember("a", 1, 1, 2, 0, 1), ggMember("b", 2, 1, 2, 1, 1)}})
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u.Update})
	if err := h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: []JobGroupDecl{{Path: "mpi"}}, Jobs: []JobEntry{ggPlain("late", 1, 1)}}, ErrConflict); !strings.Contains(err.Msg, "takes no more") {
		t.Errorf("a plain job into the existing gang group: %v", err)
	}
	if err := h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: []JobGroupDecl{{Path: "mpi"}, {Path: "mpi/sub"}},
		Jobs: []JobEntry{ggMember("x", 1, 1, 2, 0, 2), ggMember("y", 2, 1, 2, 1, 2)}}, ErrConflict); !strings.Contains(err.Msg, "takes no more") {
		t.Errorf("a new gang below the existing gang group: %v", err)
	}
	if err := h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: []JobGroupDecl{{Path: "mpi"}, {Path: "mpi/sub", Gang: true}},
		Jobs: []JobEntry{ggMember("x", 1, 1, 2, 0, 2), ggMember("y", 2, 1, 2, 1, 2)}}, ErrInvalid); !strings.Contains(err.Msg, "inside another") {
		t.Errorf("a gang group inside the existing gang group: %v", err)
	}
	// A plain group made gang later: a group's settings do not change.
	h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: []JobGroupDecl{{Path: "plain"}}, Jobs: []JobEntry{ggPlain("p", 1, 1)}})
	h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: []JobGroupDecl{{Path: "plain", Gang: true}},
		Jobs: []JobEntry{ggMember("x", 1, 1, 2, 0, 1), ggMember("y", 2, 1, 2, 1, 1)}}, ErrConflict)
	h.Restored()
}

// TestAttackGangGroupWholeThroughRestore: a gang group's gang placed,
// snapshotted and restored mid-run, a rank failing for good after the
// restore: the restored state stops and cancels the others across spec
// groups as the live one does, and the batch completes. (Holds.)
func TestAttackGangGroupWholeThroughRestore(t *testing.T) {
	h, in := ggFleet(t)
	b := ggMPI(h, ggPlain("after", 5, 0, Range{1, 4}))
	h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, in[0]}, [3]uint32{2, 1, in[0]}, [3]uint32{3, 2, in[1]}))
	h.S = h.Restored()
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: in[1], Batch: b, Job: 4, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Now}}})
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: in[0], Batch: b, Job: 1, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
		{Instance: in[0], Batch: b, Job: 2, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
		{Instance: in[1], Batch: b, Job: 3, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
	}})
	for id, want := range map[uint32]JobState{1: Cancelled, 2: Cancelled, 3: Cancelled, 4: Failed, 5: Cancelled} {
		if st := h.JobState(b, id); st != want {
			t.Errorf("job %d is %s, want %s", id, st, want)
		}
	}
	if h.Batch(b).Completed == 0 {
		t.Errorf("batch %d never completes", b)
	}
	// Retried whole: all four back together, none alone.
	h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: RetryStates(Failed)})
	for id := uint32(1); id <= 4; id++ {
		if st := h.JobState(b, id); st != Ready {
			t.Errorf("after the retry member %d is %s, want Ready", id, st)
		}
	}
	if res := h.Must(gangPlan(h, b, 2, [3]uint32{1, 2, in[2]})).(*PlanResult); res.Placed != 0 {
		t.Errorf("part of the retried gang placed: %+v", res)
	}
	h.Restored()
}

// TestAttackGangGroupSubgroupCancelledBeforeCommit: a staged update's
// bunch declares the gang group and its members; before the commit the
// tenant cancels mpi/ranks (the group exists once its bunch is staged).
// The commit cancels the ranks as they come, and the launcher is Ready
// with a gang that can never be whole.
func TestAttackGangGroupSubgroupCancelledBeforeCommit(t *testing.T) {
	h, in := ggFleet(t)
	b := h.CreateBatch(ggPlain("first", 1, 0))
	h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, in[0]}))
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: in[0], Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeSuccess, Start: h.Now, End: h.Now}}})
	u := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 4}).(*UpdateResult)
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "mpi", Gang: true}, {Path: "mpi/ranks"}},
		Jobs: []JobEntry{ggMember("launcher", 1, 1, 4, 0, 1), ggMember("ranks", 2, 3, 4, 1, 2)}})
	id, ok := h.S.JobGroupID(b, "mpi/ranks")
	if !ok {
		t.Fatal("no group mpi/ranks")
	}
	h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: id, Reason: "attack"})
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u.Update})
	ggStuck(t, h, "ranks cancelled as they were committed", b, 2, 5)
	if h.Batch(b).Completed == 0 {
		t.Errorf("batch %d never completes", b)
	}
}

// TestAttackGangGroupSubgroupCancelledWhilePending: the launcher waits
// for a setup job, the ranks do not; the tenant cancels mpi/ranks, then
// setup succeeds: the launcher becomes Ready with no gang left to start
// with, and must be cancelled rather than wait for ever.
func TestAttackGangGroupSubgroupCancelledWhilePending(t *testing.T) {
	h, in := ggFleet(t)
	jobs := []JobEntry{
		ggMember("launcher", 1, 1, 4, 0, 1, Range{5, 5}),
		ggMember("ranks", 2, 3, 4, 1, 2),
		ggPlain("setup", 5, 0),
	}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "mpi", Gang: true}, {Path: "mpi/ranks"}}, Jobs: jobs}).(*UpdateResult).Batch
	h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 2, Reason: "attack"})
	h.Must(gangPlan(h, b, 1, [3]uint32{5, 1, in[0]}))
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: in[0], Batch: b, Job: 5, Attempt: 1, Outcome: OutcomeSuccess, Start: h.Now, End: h.Now}}})
	ggStuck(t, h, "the launcher released after its ranks were cancelled", b, 1, 4)
	if h.Batch(b).Completed == 0 {
		t.Errorf("batch %d never completes", b)
	}
}

// TestAttackGangGroupGhostFromRetriedBunch: a bunch whose IDs were all
// staged is ignored as a retry, but the job groups it declares are made
// first and kept: a "retry" that declares a new gang group, its jobs
// naming it, leaves a gang group that holds no job, which gangGroups
// forbids everywhere else ("is a gang and holds no job"). Low harm (the
// group can take nothing), but the state's rule does not hold.
func TestAttackGangGroupGhostFromRetriedBunch(t *testing.T) {
	h, _ := ggFleet(t)
	b := h.CreateBatch(ggPlain("first", 1, 0))
	u := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 2}).(*UpdateResult)
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Jobs: []JobEntry{ggPlain("a", 1, 0), ggPlain("b", 2, 0)}})
	h.Apply(&AddJobs{Now: h.Tick(), Batch: b, Update: u.Update, Groups: []JobGroupDecl{{Path: "ghost", Gang: true}},
		Jobs: []JobEntry{ggMember("a", 1, 1, 2, 0, 1), ggMember("b", 2, 1, 2, 1, 1)}})
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u.Update})
	recs, _ := h.S.JobGroups(b)
	for _, r := range recs {
		if r.Gang && r.NJobs == 0 {
			t.Errorf("job group %s is a gang holding no job (made by a bunch ignored as a retry)", r.Path)
		}
	}
	h.Restored()
}
