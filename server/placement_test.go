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

// TestClusterGroupThroughTheAdapter: a group's strategy reaches the
// scheduler through the state's view. Clusters a and b pack as group
// "gpu"; c is in none; the team spreads: c and the group get the same
// use per cluster, and the group's share fills a before b.
func TestClusterGroupThroughTheAdapter(t *testing.T) {
	h := state.NewHarness(t, SchedulerPlanner)
	h.Must(&state.ApplyPlacement{Now: h.Tick(), Groups: []state.ClusterGroup{{Name: "gpu", Strategy: "pack"}},
		Clusters: []state.Cluster{{Name: "a", Region: "r", Group: "gpu"}, {Name: "b", Region: "r", Group: "gpu"}, {Name: "c", Region: "r"}},
		Teams:    []state.Team{{Name: "t", Projects: []string{"default"}, Strategy: "spread"}}})
	for _, w := range []struct{ name, cluster string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}, {"b2", "b"}, {"c1", "c"}, {"c2", "c"}} {
		h.Must(&state.Activate{Now: h.Tick(), Name: w.name, CPUMilli: 8000, Memory: 32 << 30, TokenHash: "tok-" + w.name,
			NodeID: w.name, Region: "r", Cluster: w.cluster})
	}
	h.CreateBatch(state.JobEntry{First: 1, Count: 24, Spec: &state.Spec{Name: "j", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}})
	if res := h.Schedule(); res.Placed != 24 {
		t.Fatalf("placed %d, want 24", res.Placed)
	}
	used := map[string]int64{}
	for _, c := range h.S.Clusters() {
		used[c.Name] = (c.CapacityMilli - c.FreeMilli) / 1000
	}
	if used["a"] != 16 || used["b"] != 0 || used["c"] != 8 {
		t.Fatalf("cores used per cluster %v; want a 16 (packed), b 0, c 8", used)
	}
}
