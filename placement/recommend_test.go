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
	}, 950)
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
	recs := Recommend(tree, nil, 950)
	if r := recs[1]; r.Path != "new" || r.GuaranteeMilli != 50_000 || r.Weight != 3 || r.MaxRunningJobs != 7 {
		t.Fatalf("new: %+v", r)
	}
	if r := recs[0]; r.Path != "idle" || r.GuaranteeMilli != 0 || r.Weight != 2 {
		t.Fatalf("idle: %+v", r)
	}
}
