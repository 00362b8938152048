package placement

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestTallySLO: runs by workflow within a project, cancelled batches
// beside, the threshold inclusive (9 of 10 is SLO-successful at 0.9), a
// tier judged by its share of successful workflows, a workflow's tier
// that of its latest run; and the answer does not depend on the order of
// the runs.
func TestTallySLO(t *testing.T) {
	var runs []WorkflowRun
	add := func(project, wf, queue string, at int64, met, cancelled bool) {
		runs = append(runs, WorkflowRun{Project: project, Workflow: wf, Queue: queue, Completed: at, Met: met, Cancelled: cancelled})
	}
	for i := int64(0); i < 10; i++ {
		add("gen", "nightly", "org/gen/tier1", 100+i, i != 3, false) // 9 of 10
	}
	add("gen", "nightly", "org/gen/tier1", 50, true, true) // cancelled: no run
	add("gen", "weekly", "org/gen/tier1", 10, true, false)
	add("gen", "weekly", "org/gen/tier1", 20, false, false) // 1 of 2
	add("phy", "weekly", "org/phy/tier2", 5, true, false)   // another project's "weekly"
	add("phy", "moved", "org/phy/tier3", 5, true, false)
	add("phy", "moved", "org/phy/tier2", 6, true, false) // latest run: tier2
	add("phy", "cancelled-only", "org/phy/tier2", 7, false, true)

	want := SLOTally{
		Workflows: []WorkflowSLO{
			{Project: "gen", Workflow: "nightly", Queue: "org/gen/tier1", Tier: "tier1", Runs: 10, Met: 9, Cancelled: 1, Ratio: 0.9, Successful: true},
			{Project: "gen", Workflow: "weekly", Queue: "org/gen/tier1", Tier: "tier1", Runs: 2, Met: 1, Ratio: 0.5},
			{Project: "phy", Workflow: "cancelled-only", Queue: "org/phy/tier2", Tier: "tier2", Cancelled: 1},
			{Project: "phy", Workflow: "moved", Queue: "org/phy/tier2", Tier: "tier2", Runs: 2, Met: 2, Ratio: 1, Successful: true},
			{Project: "phy", Workflow: "weekly", Queue: "org/phy/tier2", Tier: "tier2", Runs: 1, Met: 1, Ratio: 1, Successful: true},
		},
		Tiers: []TierSLO{
			{Tier: "tier1", Workflows: 2, Successful: 1, Ratio: 0.5, Runs: 12, Met: 10, Cancelled: 1},
			{Tier: "tier2", Workflows: 2, Successful: 2, Ratio: 1, Runs: 3, Met: 3, Cancelled: 1},
		},
		Queues: []QueueRuns{
			{Queue: "org/gen/tier1", Runs: 12, Met: 10, Cancelled: 1},
			{Queue: "org/phy/tier2", Runs: 2, Met: 2, Cancelled: 1},
			{Queue: "org/phy/tier3", Runs: 1, Met: 1},
		},
	}
	got := TallySLO(runs, 0.9)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tally\n%+v\nwant\n%+v", got, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		if got := TallySLO(runs, 0.9); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled runs tally differently:\n%+v", got)
		}
	}
	if got := TallySLO(runs, 0.95); got.Workflows[0].Successful || got.Tiers[0].Successful != 0 {
		t.Fatalf("at 0.95, 9 of 10 is SLO-successful: %+v", got.Workflows[0])
	}
}
