package server

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/why"
)

// TestHarnessWithRealScheduler drives the state harness (invariants after
// every command, replay, snapshot round trip) with the real scheduler
// planning through the adapter, on a random workload of several users,
// sizes, retries and DAG edges.
func TestHarnessWithRealScheduler(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	h := state.NewHarness(t, SchedulerPlanner)
	var insts []uint32
	for i := 0; i < 6; i++ {
		insts = append(insts, h.Activate(fmt.Sprint("w", i), 2+rng.Int64N(14), 8+rng.Int64N(56)))
	}
	users := []string{"root", "alice", "bob"}
	for _, u := range users[1:] {
		h.Must(&state.CreateUser{Now: h.Tick(), Name: u, TokenHash: "h-" + u})
		h.Must(&state.SetMember{Project: "default", User: u, Member: true})
	}
	var batches []uint64
	for b := 0; b < 9; b++ {
		var entries []state.JobEntry
		id := uint32(1)
		for g := 0; g < 1+rng.IntN(4); g++ {
			n := uint32(1 + rng.IntN(40))
			sp := &state.Spec{Name: fmt.Sprint("g", g), Command: []string{"true"}, Array: true,
				CPUMilli: 250 * (1 + rng.Int64N(8)), Memory: (1 + rng.Int64N(4)) << 30, Retries: uint16(rng.IntN(2))}
			e := state.JobEntry{First: id, Count: n, Spec: sp}
			if id > 1 && rng.IntN(2) == 0 {
				e.Parents = []state.Range{{Lo: 1, Hi: id - 1}}
			}
			entries = append(entries, e)
			id += n
		}
		res := h.Must(&state.CreateBatch{Now: h.Tick(), User: users[b%3], BillingProject: "default", Jobs: entries})
		batches = append(batches, res.(*state.UpdateResult).Batch)
	}
	placed := 0
	for round := 0; round < 5000; round++ {
		res := h.Schedule()
		placed += res.Placed
		if res.Rejected != 0 {
			t.Fatalf("round %d: the state rejected %d placements of a plan made on it", round, res.Rejected)
		}
		n := 0
		for _, w := range insts {
			n += h.Complete(w, func(_ uint64, _ uint32) state.Outcome {
				if rng.IntN(10) == 0 {
					return state.OutcomeFailed
				}
				return state.OutcomeSuccess
			})
		}
		if n == 0 {
			break
		}
	}
	for _, b := range batches {
		if bt := h.Batch(b); bt.Completed == 0 {
			t.Fatalf("batch %d did not complete", b)
		}
	}
	if placed == 0 {
		t.Fatal("nothing was placed")
	}
	t.Logf("%d placements over %d batches", placed, len(batches))
	if string(state.SnapshotBytes(t, h.Replay())) != string(state.SnapshotBytes(t, h.S)) {
		t.Fatal("replaying the log gives a different state")
	}
}

// TestPlanOfCarriesEveryField checks the decision → plan round trip field
// by field, and that unplaced jobs are counted by their main reason.
func TestPlanOfCarriesEveryField(t *testing.T) {
	in := &scheduler.Input{MaxPlacements: 7,
		Instances: []scheduler.Instance{{ID: 3, CPUMilli: 4000, Memory: 8 << 30, FreeMilli: 2000, FreeMem: 1 << 30}},
		Users: []scheduler.User{{Name: "u", RunningMilli: 2000, ReadyMilli: 9000, Runs: []scheduler.Run{
			{Batch: 5, First: 2, Count: 3, Attempt: 2, CPUMilli: 1000, Memory: 1 << 29},
			{Batch: 5, First: 9, Count: 4, Attempt: 1, CPUMilli: 8000, Memory: 1 << 29},
		}}}}
	out := scheduler.Schedule(in)
	p := leader.PlanOf(out, 42)
	if p.Now != 42 || len(p.Placements) != 1 || p.Placements[0] != (state.Placement{Batch: 5, First: 2, Count: 2, Attempt: 2, Instance: 3}) {
		t.Fatalf("plan %+v", p)
	}
	got := why.Unplaced(out)
	if got[scheduler.ReasonCPUCapacity] != 4 || got[scheduler.ReasonCPUFree] != 1 || len(got) != 2 {
		t.Fatalf("unplaced by reason %v, want 4 too big and 1 waiting for cores", got)
	}
}
