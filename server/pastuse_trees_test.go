package server

import (
	"testing"
	"time"

	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// TestPastUseStaysInItsTree (found by a tenant's attack, helper-16):
// usage_half_life is a top queue's and gives its own tree's fair share a
// memory. Two trees of equal weight, org (half-life 1h) and other (none),
// whose users ran exactly the same (8 cores for an hour each), then both
// want much more than the 16 cores free: the trees split them evenly. The
// leaves' past use was summed up into org's node and weighed at the top
// level against other, whose use is never remembered, so a tree that
// turned memory on yielded to the trees that did not (5 / 11).
func TestPastUseStaysInItsTree(t *testing.T) {
	h := state.NewHarness(t, SchedulerPlanner)
	hour := int64(time.Hour)
	for _, u := range []string{"alice", "bob"} {
		h.Must(&state.CreateUser{Now: h.Tick(), Name: u, TokenHash: "h-" + u})
	}
	h.Must(&state.CreateBillingProject{Now: h.Tick(), Name: "pa", Members: []string{"alice"}})
	h.Must(&state.CreateBillingProject{Now: h.Tick(), Name: "pb", Members: []string{"bob"}})
	h.Must(&state.ApplyPlacement{Now: h.Tick(), Queues: []state.Queue{
		{Queue: placement.Queue{Path: "org"}, UsageHalfLifeNs: hour},
		{Queue: placement.Queue{Path: "org/a"}, Projects: []string{"pa"}},
		{Queue: placement.Queue{Path: "other"}},
		{Queue: placement.Queue{Path: "other/b"}, Projects: []string{"pb"}},
	}})
	w := h.Activate("w", 16, 64)
	sp := func() *state.Spec {
		return &state.Spec{Name: "j", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}
	}
	batch := func(user, project string, n uint32) uint64 {
		return h.Must(&state.CreateBatch{Now: h.Tick(), User: user, BillingProject: project,
			Jobs: []state.JobEntry{{First: 1, Count: n, Spec: sp()}}}).(*state.UpdateResult).Batch
	}
	ba, bb := batch("alice", "pa", 8), batch("bob", "pb", 8)
	if r := h.Schedule(); r.Placed != 16 {
		t.Fatalf("phase 1 placed %d, want 16", r.Placed)
	}
	start := h.Now
	var evs []state.Event
	for _, b := range []uint64{ba, bb} {
		for j := uint32(1); j <= 8; j++ {
			evs = append(evs, state.Event{Instance: w, Batch: b, Job: j, Attempt: 1, Outcome: state.OutcomeSuccess, Start: start, End: start + hour})
		}
	}
	h.Now = start + hour
	h.Must(&state.Events{Now: h.Tick(), Events: evs})
	// The same history on both sides; now both want 100 cores.
	ba2, bb2 := batch("alice", "pa", 100), batch("bob", "pb", 100)
	h.Schedule()
	running := func(b uint64) (n int) {
		for j := uint32(1); j <= 100; j++ {
			if h.JobState(b, j) == state.Running {
				n++
			}
		}
		return n
	}
	na, nb := running(ba2), running(bb2)
	if na+nb != 16 {
		t.Fatalf("placed %d + %d, want 16 in all", na, nb)
	}
	if na < 7 || nb > 9 {
		t.Fatalf("equal trees with identical use split 16 cores %d (org, usage_half_life) / %d (other, none): "+
			"org's remembered use is weighed against a tree whose use is not", na, nb)
	}
}
