package state

import (
	"strings"
	"testing"
)

// groupGangHarness: gangHarness's fleet, and a batch whose job group
// "mpi" is a gang of a launcher (job 1) and an array of three ranks (jobs
// 2-4) in its subgroup "mpi/ranks": two specs, one size, one gang. Then a
// plain job.
func groupGangHarness(t *testing.T) (*Harness, uint64, [4]uint32) {
	h, _, insts := gangHarness(t, "")
	launcher := spec("launcher", 1)
	launcher.Retries = 1
	launcher.Run = &Run{Group: 1, Gang: &Gang{Size: 4}}
	ranks := spec("ranks", 1)
	ranks.Array = true
	ranks.Run = &Run{Group: 2, Gang: &Gang{Size: 4, Lead: 1}}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "mpi", Gang: true}, {Path: "mpi/ranks"}},
		Jobs:   []JobEntry{entry(1, 1, launcher), entry(2, 3, ranks), entry(5, 1, spec("plain", 1))}}).(*UpdateResult).Batch
	return h, b, insts
}

// TestJobGroupGangStartsWholeAndRestartsWhole: the four members of a job
// group's gang, of two specs, start together or not at all at apply; the
// launcher's failure stops the ranks, and the gang starts again whole;
// the group says it is a gang; a snapshot keeps all of it.
func TestJobGroupGangStartsWholeAndRestartsWhole(t *testing.T) {
	h, b, in := groupGangHarness(t)
	recs, _ := h.S.JobGroups(b)
	if len(recs) != 2 || !recs[0].Gang || recs[1].Gang {
		t.Fatalf("job groups %+v: want mpi a gang", recs)
	}
	for name, p := range map[string]*Plan{
		"the ranks alone":   gangPlan(h, b, 1, [3]uint32{2, 2, in[0]}, [3]uint32{4, 1, in[1]}),
		"the launcher only": gangPlan(h, b, 1, [3]uint32{1, 1, in[0]}),
		"two clusters":      gangPlan(h, b, 1, [3]uint32{1, 1, in[0]}, [3]uint32{2, 1, in[0]}, [3]uint32{3, 2, in[2]}),
		"too many on one":   gangPlan(h, b, 1, [3]uint32{1, 1, in[0]}, [3]uint32{2, 2, in[0]}, [3]uint32{4, 1, in[1]}),
	} {
		if res := h.Must(p).(*PlanResult); res.Placed != 0 || h.JobState(b, 1) != Ready || h.JobState(b, 2) != Ready {
			t.Fatalf("%s: placed %d, want the gang refused whole", name, res.Placed)
		}
	}
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, in[0]}, [3]uint32{2, 1, in[0]}, [3]uint32{3, 2, in[1]})).(*PlanResult); res.Placed != 4 {
		t.Fatalf("the whole gang in c1: %+v", res)
	}
	h.Restored()
	ev := func(job uint32, inst uint32, attempt uint16, o Outcome) Event {
		return Event{Instance: inst, Batch: b, Job: job, Attempt: attempt, Outcome: o, Start: h.Now, End: h.Now}
	}
	// The launcher fails (it has a retry): the ranks, of another spec
	// group, are told to stop.
	h.Must(&Events{Now: h.Tick(), Events: []Event{ev(1, in[0], 1, OutcomeFailed)}})
	v := h.S.WorkerView(in[1], []AttemptID{{b, 3, 1}, {b, 4, 1}})
	if len(v.Preempt) != 2 || !strings.Contains(v.Preempt[0].Reason, "member 1 of its gang ended (failed)") {
		t.Fatalf("the ranks' worker is told %+v, want members 3 and 4 stopped", v.Preempt)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{ev(2, in[0], 1, OutcomePreempted), ev(3, in[1], 1, OutcomePreempted), ev(4, in[1], 1, OutcomePreempted)}})
	var ready []ReadyRange
	var first uint32
	var whole bool
	h.S.Read(func(rd Reader) { ready, first, whole = rd.GangReady(rd.Batch(b), 3) })
	if !whole || first != 1 || len(ready) != 2 || ready[0].Range != (Range{1, 1}) || ready[1].Range != (Range{2, 4}) || ready[0].Spec.Name != "launcher" || ready[1].Spec.Name != "ranks" {
		t.Fatalf("the gang's ready runs from job 3: %+v (first %d, whole %v)", ready, first, whole)
	}
	if res := h.Must(gangPlan(h, b, 2, [3]uint32{1, 1, in[2]}, [3]uint32{2, 1, in[2]}, [3]uint32{3, 2, in[3]})).(*PlanResult); res.Placed != 4 {
		t.Fatalf("the gang's second start, in c2: %+v", res)
	}
	h.Restored()
	// A rank fails for good (no retries): the gang cannot run whole; the
	// launcher is stopped, then cancelled.
	h.Must(&Events{Now: h.Tick(), Events: []Event{ev(3, in[3], 2, OutcomeFailed)}})
	h.Must(&Events{Now: h.Tick(), Events: []Event{ev(1, in[2], 2, OutcomePreempted), ev(2, in[2], 2, OutcomePreempted), ev(4, in[3], 2, OutcomePreempted)}})
	for id, want := range map[uint32]JobState{1: Cancelled, 2: Cancelled, 3: Failed, 4: Cancelled} {
		if st := h.JobState(b, id); st != want {
			t.Errorf("member %d is %s, want %s", id, st, want)
		}
	}
	h.Restored()
}

// TestJobGroupGangEntriesAreChecked: apply refuses a job group's gang
// that is not whole and alike: members in two places (GPUs of two types,
// even with a member without GPUs between them), a member waiting for
// another, a member outside its gang group, a job of the gang group not
// in the gang, a gang group inside another, a gang of several entries
// without a gang group, and jobs added to a gang group made before.
func TestJobGroupGangEntriesAreChecked(t *testing.T) {
	h := newHarness(t)
	member := func(name string, first, count uint32, size, lead uint32, group uint32, cpu float64) JobEntry {
		sp := spec(name, cpu)
		sp.Array = count > 1
		sp.Run = &Run{Group: group, Gang: &Gang{Size: size, Lead: lead}}
		return entry(first, count, sp)
	}
	mpi := []JobGroupDecl{{Path: "mpi", Gang: true}}
	for _, c := range []struct {
		name   string
		groups []JobGroupDecl
		jobs   []JobEntry
		says   string
	}{
		{"two GPU types", mpi, []JobEntry{withGPU(member("l", 1, 1, 3, 0, 1, 1), "a"), member("m", 2, 1, 3, 1, 1, 2), withGPU(member("r", 3, 1, 3, 2, 1, 1), "b")}, "one place"},
		{"two pools", mpi, []JobEntry{member("l", 1, 1, 2, 0, 1, 1), func() JobEntry { e := member("r", 2, 1, 2, 1, 1, 2); e.Spec.Where = &Where{Pool: "q"}; return e }()}, "one place"},
		{"part of the gang", mpi, []JobEntry{member("l", 1, 1, 3, 0, 1, 1), member("r", 2, 1, 3, 1, 1, 1)}, "a gang's jobs come together"},
		{"a plain job in the gang group", mpi, []JobEntry{member("l", 1, 1, 2, 0, 1, 1), member("r", 2, 1, 2, 1, 1, 1), entry(3, 1, func() *Spec { sp := spec("x", 1); sp.Run = &Run{Group: 1}; return sp }())}, "each is a member of its gang"},
		{"a gang group in a gang group", []JobGroupDecl{{Path: "mpi", Gang: true}, {Path: "mpi/inner", Gang: true}}, []JobEntry{member("l", 1, 1, 2, 0, 2, 1), member("r", 2, 1, 2, 1, 2, 1)}, "cannot be inside another"},
		{"several entries without a gang group", nil, []JobEntry{member("l", 1, 1, 2, 0, 0, 1), member("r", 2, 1, 2, 1, 0, 1)}, "a job group's"},
		{"an empty gang group", []JobGroupDecl{{Path: "mpi", Gang: true}, {Path: "other"}}, []JobEntry{entry(1, 1, func() *Spec { sp := spec("x", 1); sp.Run = &Run{Group: 2}; return sp }())}, "holds no job"},
	} {
		err := h.MustFail(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: c.groups, Jobs: c.jobs}, ErrInvalid)
		if !strings.Contains(err.Msg, c.says) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.says)
		}
	}
	// A member waiting for another never starts.
	l := member("l", 1, 1, 2, 0, 1, 1)
	r := member("r", 2, 1, 2, 1, 1, 1)
	r.Parents = []Range{{1, 1}}
	if err := h.MustFail(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: mpi, Jobs: []JobEntry{l, r}}, ErrInvalid); !strings.Contains(err.Msg, "members of its own gang") {
		t.Errorf("a member waiting for another: %v", err)
	}
	// A gang group takes no jobs after the command that made it.
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: mpi,
		Jobs: []JobEntry{member("l", 1, 1, 2, 0, 1, 1), member("r", 2, 1, 2, 1, 1, 1)}}).(*UpdateResult).Batch
	later := member("x", 1, 2, 2, 0, 1, 1)
	if err := h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Groups: []JobGroupDecl{{Path: "mpi"}}, Jobs: []JobEntry{later}}, ErrConflict); !strings.Contains(err.Msg, "takes no more") {
		t.Errorf("jobs added to a gang group: %v", err)
	}
}

func withGPU(e JobEntry, typ string) JobEntry {
	e.Spec.Where = &Where{GPUType: typ, GPUs: 1}
	return e
}

// TestJobGroupGangOfTwoSizes: a gang's members may differ in size (a
// launcher of two cores beside ranks of one): apply checks each
// instance's room by the size of each member placed there, and the
// queue's quota by their sum.
func TestJobGroupGangOfTwoSizes(t *testing.T) {
	h, _, in := gangHarness(t, "")
	launcher := spec("launcher", 2)
	launcher.Run = &Run{Group: 1, Gang: &Gang{Size: 3}}
	ranks := spec("ranks", 1)
	ranks.Array = true
	ranks.Run = &Run{Group: 1, Gang: &Gang{Size: 3, Lead: 1}}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []JobGroupDecl{{Path: "mpi", Gang: true}}, Jobs: []JobEntry{entry(1, 1, launcher), entry(2, 2, ranks)}}).(*UpdateResult).Batch
	// A rank beside the launcher: three cores on a worker of two.
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, in[0]}, [3]uint32{2, 1, in[0]}, [3]uint32{3, 1, in[1]})).(*PlanResult); res.Placed != 0 {
		t.Fatalf("a rank beside the launcher on a worker of 2 cores: placed %d, want the gang refused", res.Placed)
	}
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 1, in[0]}, [3]uint32{2, 2, in[1]})).(*PlanResult); res.Placed != 3 {
		t.Fatalf("the launcher on one worker, the ranks on the other: %+v", res)
	}
	h.Restored()
}
