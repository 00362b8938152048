package placement

import "testing"

const hour = 3600

// TestPercentileAllocationIsMonarchs: the seed's worked example. A tier-1
// queue in use 240 hours of a 30-day window (vacant the rest) is
// guaranteed what covers 95% of that time, 228 hours: the time units in
// use sorted by what they held, the amount of the unit at which the
// running total reaches 228 hours (tu2 of the figure), not the peak.
func TestPercentileAllocationIsMonarchs(t *testing.T) {
	samples := []UsageSample{
		{Seconds: 30 * 24 * hour / 2, CPUMilli: 0}, // vacant: left out
		{Seconds: 60 * hour, CPUMilli: 20_000, Jobs: 20},
		{Seconds: 100 * hour, CPUMilli: 10_000, Jobs: 10},
		{Seconds: 12 * hour, CPUMilli: 80_000, Jobs: 90},
		{Seconds: 36 * hour, CPUMilli: 30_000, Jobs: 30},
		{Seconds: 20 * hour, CPUMilli: 20_000, Jobs: 25},
		{Seconds: 12 * hour, CPUMilli: 40_000, Jobs: 40},
	}
	a := PercentileAllocation(samples, 950)
	// In use 240 h; sorted: 10 (100 h), 20 (80 h), 30 (36 h), 40 (12 h),
	// 80 (12 h); 100 + 80 + 36 + 12 = 228 h reaches 95% at 40 cores.
	if a.SecondsInUse != 240*hour || a.CPUMilli != 40_000 || a.SecondsCovered != 228*hour || a.PeakMilli != 80_000 || a.PeakJobs != 90 {
		t.Fatalf("allocation %+v, want 40 cores covering 228 of 240 hours, peak 80", a)
	}
	if a := PercentileAllocation(samples, 1000); a.CPUMilli != 80_000 {
		t.Fatalf("100%%: %d, want the peak", a.CPUMilli)
	}
	if a := PercentileAllocation(samples, 400); a.CPUMilli != 10_000 {
		t.Fatalf("40%% (96 h): %d, want 10 cores", a.CPUMilli)
	}
	if a := PercentileAllocation(nil, 950); a.CPUMilli != 0 || a.SecondsInUse != 0 {
		t.Fatalf("a vacant queue: %+v", a)
	}
}

// TestRecommendForATree: parents guarantee their children's sum at least,
// siblings are weighted by their guarantees, max_running leaves a fifth
// above the peak.
func TestRecommendForATree(t *testing.T) {
	tree, err := NewQueueTree([]Queue{{Path: "org"}, {Path: "org/t1"}, {Path: "org/t3"}, {Path: "other"}})
	if err != nil {
		t.Fatal(err)
	}
	recs := Recommend(tree, map[string][]UsageSample{
		"org/t1": {{Seconds: 10 * hour, CPUMilli: 40_000, Jobs: 40}},
		"org/t3": {{Seconds: 10 * hour, CPUMilli: 10_000, Jobs: 100}},
		"org":    {{Seconds: 10 * hour, CPUMilli: 30_000, Jobs: 140}},
		"other":  {{Seconds: 10 * hour, CPUMilli: 25_000, Jobs: 5}},
	}, Percentiles(tree, make([]int64, 4), 950))
	got := map[string]Recommendation{}
	for _, r := range recs {
		got[r.Path] = r
	}
	if got["org"].GuaranteeMilli != 50_000 || got["org/t1"].Weight != 4 || got["org/t3"].Weight != 1 || got["org"].Weight != 2 || got["other"].Weight != 1 {
		t.Fatalf("recommendations %+v", got)
	}
	if got["org/t3"].MaxRunningJobs != 120 || got["other"].MaxRunningJobs != 6 {
		t.Fatalf("max_running %d and %d, want 120 and 6", got["org/t3"].MaxRunningJobs, got["other"].MaxRunningJobs)
	}
}

// TestRecommendKeepsWhatItHasNoDataFor: a queue with no recorded use
// keeps its guarantee, weight and max_running (set up for work to come,
// it is not cut to nothing).
func TestRecommendKeepsWhatItHasNoDataFor(t *testing.T) {
	tree, err := NewQueueTree([]Queue{{Path: "new", Weight: 3, Guarantee: Resources{CPUMilli: 50_000}, Limits: QueueLimits{MaxRunningJobs: 7}},
		{Path: "idle", Weight: 2}})
	if err != nil {
		t.Fatal(err)
	}
	recs := Recommend(tree, nil, Percentiles(tree, make([]int64, 2), 950))
	if r := recs[1]; r.Path != "new" || r.GuaranteeMilli != 50_000 || r.Weight != 3 || r.MaxRunningJobs != 7 {
		t.Fatalf("new: %+v", r)
	}
	if r := recs[0]; r.Path != "idle" || r.GuaranteeMilli != 0 || r.Weight != 2 {
		t.Fatalf("idle: %+v", r)
	}
}

// tieredUse: 100 hours in use, 90 of them at 10 cores and 10 at 40.
func tieredUse() []UsageSample {
	return []UsageSample{{Seconds: 90 * hour, CPUMilli: 10_000, Jobs: 10}, {Seconds: 10 * hour, CPUMilli: 40_000, Jobs: 40}}
}

// TestRecommendPercentilePerTier: each queue takes its own percentile,
// else its nearest ancestor's, else the default (Monarch's thresholds by
// tier); the same use gives tier 1 (95%) 40 cores and tier 3 (80%) 10;
// and the checks say the percentiles decrease and usage/capacity
// increases from tier to tier, or that they do not.
func TestRecommendPercentilePerTier(t *testing.T) {
	tree, err := NewQueueTree([]Queue{{Path: "org"}, {Path: "org/gen"}, {Path: "org/gen/tier1"}, {Path: "org/gen/tier3"},
		{Path: "org/phy"}, {Path: "org/phy/tier1"}})
	if err != nil {
		t.Fatal(err)
	}
	idx := func(path string) int { i, _ := tree.Find(path); return int(i) }
	own := make([]int64, len(tree.Queues))
	own[idx("org")], own[idx("org/gen/tier3")] = 950, 800
	pcts := Percentiles(tree, own, 500)
	for path, want := range map[string]int64{"org": 950, "org/gen": 950, "org/gen/tier1": 950, "org/gen/tier3": 800, "org/phy/tier1": 950} {
		if pcts[idx(path)] != want {
			t.Errorf("%s: percentile %d, want %d", path, pcts[idx(path)], want)
		}
	}
	recs := Recommend(tree, map[string][]UsageSample{"org/gen/tier1": tieredUse(), "org/gen/tier3": tieredUse(), "org/phy/tier1": tieredUse()}, pcts)
	if g1, g3 := recs[idx("org/gen/tier1")].GuaranteeMilli, recs[idx("org/gen/tier3")].GuaranteeMilli; g1 != 40_000 || g3 != 10_000 {
		t.Fatalf("tier 1 %d, tier 3 %d millicores: want 40 and 10 cores", g1, g3)
	}
	checks := CheckTiers(tree, recs, 30*24*hour)
	if len(checks) != 2 || !checks[0].OK || !checks[1].OK || checks[0].Detail != "tier1 95%, tier3 80%" {
		t.Fatalf("checks %+v", checks)
	}
	// tier 3 above tier 1: the first check fails (and tier 3 has as
	// much headroom as tier 1).
	own[idx("org/gen/tier3")] = 990
	recs = Recommend(tree, map[string][]UsageSample{"org/gen/tier1": tieredUse(), "org/gen/tier3": tieredUse(), "org/phy/tier1": tieredUse()}, Percentiles(tree, own, 500))
	own[idx("org/gen/tier3")] = 0
	checks = CheckTiers(tree, recs, 30*24*hour)
	if len(checks) != 2 || checks[0].OK || !checks[1].OK || checks[1].Detail != "tier1 0.05, tier3 0.05" {
		t.Fatalf("tier 3 at 99%%: checks %+v", checks)
	}
}

// TestRecommendKeepsTheWeightOfASiblingWithoutSamples: a tier-1 queue
// with no samples beside a tier-3 queue with some keeps its weight and is
// named as such; its sibling's weight is not made to outweigh it.
func TestRecommendKeepsTheWeightOfASiblingWithoutSamples(t *testing.T) {
	tree, err := NewQueueTree([]Queue{{Path: "org"}, {Path: "org/tier1", Weight: 8}, {Path: "org/tier3", Weight: 2}})
	if err != nil {
		t.Fatal(err)
	}
	recs := Recommend(tree, map[string][]UsageSample{"org/tier3": tieredUse()}, Percentiles(tree, make([]int64, 3), 950))
	t1, t3 := recs[1], recs[2]
	if !t1.NoSamples || t1.Weight != 8 || t3.NoSamples || t3.Weight != 2 {
		t.Fatalf("tier 1 %+v, tier 3 %+v: want 8 (no samples) and 2", t1, t3)
	}
}

// TestBoundedSteps: each setting moves at most max_change of its value
// now a step (from 0: of the target), a parent still guarantees its
// children's sum, and a queue with no max_running gets none.
func TestBoundedSteps(t *testing.T) {
	for _, c := range []struct{ now, target, step, floor, want int64 }{
		{100, 200, 250, 0, 125}, {100, 50, 250, 0, 75}, {100, 110, 250, 0, 110}, {0, 40_000, 250, 0, 10_000},
		{1, 8, 250, 1, 2}, {2, 1, 250, 1, 1}, {7, 7, 250, 0, 7},
	} {
		if got := StepToward(c.now, c.target, c.step, c.floor); got != c.want {
			t.Errorf("StepToward(%d, %d, %d) = %d, want %d", c.now, c.target, c.step, got, c.want)
		}
	}
	tree, err := NewQueueTree([]Queue{{Path: "org", Guarantee: Resources{CPUMilli: 20_000}},
		{Path: "org/tier1", Weight: 4, Guarantee: Resources{CPUMilli: 16_000}, Limits: QueueLimits{MaxRunningJobs: 100}},
		{Path: "org/tier3", Weight: 1, Guarantee: Resources{CPUMilli: 4_000}}})
	if err != nil {
		t.Fatal(err)
	}
	recs := []Recommendation{{Path: "org", GuaranteeMilli: 80_000}, {Path: "org/tier1", GuaranteeMilli: 64_000, Weight: 16, MaxRunningJobs: 10},
		{Path: "org/tier3", GuaranteeMilli: 16_000, Weight: 1, MaxRunningJobs: 30}}
	got := Bounded(tree, recs, 250)
	if got[1].GuaranteeMilli != 20_000 || got[1].Weight != 5 || got[1].MaxRunningJobs != 75 || got[2].GuaranteeMilli != 5_000 || got[2].MaxRunningJobs != 0 {
		t.Fatalf("bounded %+v", got)
	}
	if got[0].GuaranteeMilli != 25_000 {
		t.Fatalf("org guarantees %d, want 25 cores (its own step, and its children's 25)", got[0].GuaranteeMilli)
	}
	if _, err := NewQueueTree([]Queue{{Path: "org", Guarantee: Resources{CPUMilli: got[0].GuaranteeMilli}},
		{Path: "org/tier1", Guarantee: Resources{CPUMilli: got[1].GuaranteeMilli}}, {Path: "org/tier3", Guarantee: Resources{CPUMilli: got[2].GuaranteeMilli}}}); err != nil {
		t.Fatalf("the bounded tree is not valid: %v", err)
	}
}
