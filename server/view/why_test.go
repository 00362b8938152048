package view

import (
	"testing"
	"time"

	"github.com/drover-sched/drover/server/state"
)

func placeOf(t *testing.T, h *state.Harness, b uint64, id uint32) JobPlace {
	t.Helper()
	var jp JobPlace
	var ok bool
	h.S.Read(func(r state.Reader) { jp, ok = Place(r, b, id, h.Now) })
	if !ok {
		t.Fatalf("no job %d in batch %d", id, b)
	}
	return jp
}

// TestPlaceReadsWhatHoldsAJob: job why's read names a Pending job's
// unfinished parents, a running one's instance, the users the scheduler
// serves before a Ready job's (fewer cores running, ties by name; only
// those with Ready jobs), the workers apply lets it use (a disabled
// cluster's not among them, but named) and whether one has room.
func TestPlaceReadsWhatHoldsAJob(t *testing.T) {
	h := state.NewHarness(t, nil)
	for _, u := range []string{"alice", "bob", "carol"} {
		h.Must(&state.CreateUser{Now: h.Tick(), Name: u, TokenHash: "h-" + u})
		h.Must(&state.SetMember{Project: "default", User: u, Member: true})
	}
	a := activateIn(h, "wa", "east", "a", 8)
	activateIn(h, "wb", "east", "b", 4)
	h.Must(&state.SetCluster{Now: h.Tick(), Name: "b", Disabled: true, Reason: "maintenance", By: "ops"})
	submit := func(user string, jobs ...state.JobEntry) uint64 {
		return h.Must(&state.CreateBatch{Now: h.Tick(), User: user, BillingProject: "default", Jobs: jobs}).(*state.UpdateResult).Batch
	}
	// root runs 2 cores and waits with a 3-core job whose child waits for it.
	b := submit("root", entry(1, 2, spec("run", 1)), entry(3, 1, spec("wait", 3)),
		state.JobEntry{First: 4, Count: 1, Spec: spec("child", 1), Parents: []state.Range{{Lo: 3, Hi: 3}}})
	h.Must(&state.Plan{Now: h.Tick(), Placements: []state.Placement{place(b, 1, 2, a)}})
	// alice runs nothing and waits (ahead); bob runs 1 core and waits
	// (ahead); carol runs 3 cores and waits (behind).
	submit("alice", entry(1, 1, spec("x", 8)))
	bb := submit("bob", entry(1, 2, spec("y", 1)))
	h.Must(&state.Plan{Now: h.Tick(), Placements: []state.Placement{place(bb, 1, 1, a)}})
	cb := submit("carol", entry(1, 1, spec("z", 3)), entry(2, 1, spec("z", 8)))
	h.Must(&state.Plan{Now: h.Tick(), Placements: []state.Placement{place(cb, 1, 1, a)}})

	if jp := placeOf(t, h, b, 4); jp.State != state.Pending || len(jp.Parents) != 1 || jp.Parents[0].Range != (state.Range{Lo: 3, Hi: 3}) || jp.Parents[0].Unfinished != 1 {
		t.Fatalf("the child: %+v, want Pending on parent 3", jp)
	}
	if jp := placeOf(t, h, b, 1); jp.State != state.Running || jp.Cluster != "a" || jp.Region != "east" || jp.Instance != "wa" {
		t.Fatalf("a running job: %+v, want on wa in a/east", jp)
	}
	jp := placeOf(t, h, b, 3)
	if jp.State != state.Ready || jp.Ahead != 2 {
		t.Fatalf("the waiting job: %+v, want Ready behind 2 users (alice, bob)", jp)
	}
	if jp.Active != 2 || jp.Usable != 1 || !jp.Busy || len(jp.DisabledClusters) != 1 || jp.DisabledClusters[0] != "b" {
		t.Fatalf("the waiting job: %+v, want 2 active workers, 1 usable (b is disabled) and busy (wa has 2 of the 3 cores free)", jp)
	}
	// bob runs 1 core: alice (none) is served first; carol (1 core too)
	// after, by name. wa has 2 cores free, bob's job needs 1.
	if jp := placeOf(t, h, bb, 2); jp.Busy || jp.Ahead != 1 {
		t.Fatalf("bob's 1-core job: %+v, want not busy, behind 1 user (alice)", jp)
	}
}

// TestPlaceCountsAJobsPlaceInLine: a Ready job's place in its user's line
// counts its user's Ready jobs of a higher priority, those of its older
// batches of its priority and those of its batch queued before it, and
// not another user's.
func TestPlaceCountsAJobsPlaceInLine(t *testing.T) {
	h := state.NewHarness(t, nil)
	h.Must(&state.CreateUser{Now: h.Tick(), Name: "bob", TokenHash: "h-bob"})
	h.Must(&state.SetMember{Project: "default", User: "bob", Member: true})
	submit := func(user string, prio int32, n uint32) uint64 {
		return h.Must(&state.CreateBatch{Now: h.Tick(), User: user, BillingProject: "default", Priority: prio,
			Jobs: []state.JobEntry{entry(1, n, spec("j", 1))}}).(*state.UpdateResult).Batch
	}
	submit("root", 0, 5) // older, same priority
	submit("bob", 0, 7)  // another user's
	b := submit("root", 0, 10)
	submit("root", 0, 4) // newer
	jp := placeOf(t, h, b, 4)
	if jp.AheadOlder != 5 || jp.AheadInBatch != 3 || jp.AheadByPriority != 0 || jp.Position != 9 {
		t.Fatalf("job 4: %d older, %d in its batch, %d by priority, position %d; want 5, 3, 0 and 9", jp.AheadOlder, jp.AheadInBatch, jp.AheadByPriority, jp.Position)
	}
	if first := placeOf(t, h, b, 1); first.Position != 6 {
		t.Fatalf("job 1's position %d, want 6", first.Position)
	}
}

// TestPlaceEstimatesAStart: a Ready job's estimated start plays its line
// out: two 1-core slots (its user's running attempts, started now), each
// job of its group taking 10 minutes (two finished ones say so), and two
// jobs before it: the slots free at 10 min, take those two, free again at
// 20 min: it starts at about 20 min. Before any job of its line finished
// there is no estimate; with a worker free, it is the next round.
func TestPlaceEstimatesAStart(t *testing.T) {
	h := state.NewHarness(t, nil)
	b := h.Must(&state.CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Jobs: []state.JobEntry{entry(1, 10, spec("j", 1))}}).(*state.UpdateResult).Batch
	if e := placeOf(t, h, b, 3).Estimate; e.Known {
		t.Fatalf("no worker, no finished job: estimate %+v, want none", e)
	}
	w := h.Activate("w", 2, 16)
	if e := placeOf(t, h, b, 1).Estimate; !e.Known || !e.Now {
		t.Fatalf("a free worker: estimate %+v, want the next round", e)
	}
	h.Schedule()
	if e := placeOf(t, h, b, 5).Estimate; e.Known {
		t.Fatalf("nothing finished yet: estimate %+v, want none", e)
	}
	start := h.Now
	h.Now += int64(10 * time.Minute)
	h.Must(&state.Events{Now: h.Tick(), Events: []state.Event{
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: state.OutcomeSuccess, Start: start, End: start + int64(10*time.Minute)},
		{Instance: w, Batch: b, Job: 2, Attempt: 1, Outcome: state.OutcomeSuccess, Start: start, End: start + int64(10*time.Minute)}}})
	h.Schedule() // jobs 3 and 4 start now
	h.Must(&state.Events{Now: h.Tick(), Events: []state.Event{
		{Instance: w, Batch: b, Job: 3, Attempt: 1, Started: true, Start: h.Now},
		{Instance: w, Batch: b, Job: 4, Attempt: 1, Started: true, Start: h.Now}}})
	jp := placeOf(t, h, b, 7) // jobs 5 and 6 before it
	e := jp.Estimate
	if jp.Position != 3 || !e.Known || e.Now || e.Slots != 2 || e.Runs != 2 || e.Run != 10*time.Minute {
		t.Fatalf("job 7: position %d, estimate %+v; want position 3, 2 slots, 2 runs of 10m", jp.Position, e)
	}
	if e.In < 19*time.Minute || e.In > 20*time.Minute {
		t.Fatalf("job 7 estimated to start in %v, want about 20m", e.In)
	}
}
