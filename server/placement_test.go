package server

import (
	"testing"

	"github.com/drover-sched/drover/server/state"
)

// TestRegionRestrictedBatchesAllRun: one user's queue interleaves batches
// restricted to {A}, {B} and {A, B}, with room for only part of them;
// the real scheduler runs them all (no region blocks another).
func TestRegionRestrictedBatchesAllRun(t *testing.T) {
	h := state.NewHarness(t, SchedulerPlanner)
	var insts []uint32
	for _, w := range []struct{ name, region, cluster string }{{"wa", "A", "a"}, {"wb", "B", "b"}} {
		res := h.Must(&state.Activate{Now: h.Tick(), Name: w.name, CPUMilli: 2000, Memory: 4 << 30, TokenHash: "tok-" + w.name,
			NodeID: w.name, Region: w.region, Cluster: w.cluster}).(*state.ActivateResult)
		insts = append(insts, res.Instance)
	}
	var ids []uint64
	for _, regions := range [][]string{{"A"}, {"B"}, {"A", "B"}, {"A"}, {"B"}, {"A", "B"}} {
		sp := &state.Spec{Name: "j", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 64 << 20, Where: &state.Where{Regions: regions}}
		ids = append(ids, h.CreateBatch(state.JobEntry{First: 1, Count: 6, Spec: sp}))
	}
	h.RunAll(insts, nil)
	for _, id := range ids {
		for j := uint32(1); j <= 6; j++ {
			if st := h.JobState(id, j); st != state.Success {
				t.Fatalf("batch %d job %d is %s", id, j, st)
			}
		}
	}
}
