package sim

import (
	"context"
	"path/filepath"
	"testing"
)

// TestScenarios runs every scenario in testdata/scenarios on the seeds it
// names and holds each run to the scenario's bounds: no cap violation,
// never billing above max_per_hour, and the cost ratio, queue wait and
// time at the cap it expects. Each run's cost and wait are logged
// together.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata/scenarios (%v)", err)
	}
	for _, f := range files {
		w, err := ReadWorkload(f)
		if err != nil {
			t.Fatal(err)
		}
		if w.Expect == nil || len(w.Expect.Seeds) == 0 {
			t.Fatalf("%s: no \"expect\" with seeds", f)
		}
		for _, seed := range w.Expect.Seeds {
			opts := DefaultOptions()
			opts.Seed = seed
			r, err := Run(context.Background(), w, opts)
			if err != nil {
				t.Fatalf("%s seed %d: %v", f, seed, err)
			}
			t.Logf("%s seed %d: cost %.3f of the lower bound, wait p50 %.1f p95 %.1f max %.0f min, %.1f h at a cap, utilization %.3f, peak $%s/h",
				filepath.Base(f), seed, r.CostRatio, r.WaitP50Min, r.WaitP95Min, r.WaitMaxMin, r.AtCapHours, r.Utilization, r.PeakSpendPerHour)
			e, set := w.Expect, w.Settings
			switch {
			case r.CapViolations != 0:
				t.Errorf("%s seed %d: %d cap violations", f, seed, r.CapViolations)
			case set.MaxPerHour > 0 && r.PeakSpendPerHour > set.MaxPerHour:
				t.Errorf("%s seed %d: billed $%s/h, above the cap of $%s/h", f, seed, r.PeakSpendPerHour, set.MaxPerHour)
			case e.CostRatioMax > 0 && r.CostRatio > e.CostRatioMax:
				t.Errorf("%s seed %d: cost %.3f of the lower bound, above %.3f", f, seed, r.CostRatio, e.CostRatioMax)
			case e.WaitP95MinMax > 0 && r.WaitP95Min > e.WaitP95MinMax:
				t.Errorf("%s seed %d: p95 wait %.1f min, above %.1f", f, seed, r.WaitP95Min, e.WaitP95MinMax)
			case r.AtCapHours < e.AtCapHoursMin:
				t.Errorf("%s seed %d: %.2f h at a cap: the cap does not bind (want %.1f h or more)", f, seed, r.AtCapHours, e.AtCapHoursMin)
			}
		}
	}
}

// TestCompareRunsThreePolicies runs a small workload under drover's
// policy, Hail's and a static fleet: each keeps the caps and runs every
// job, and the static fleet, sized to the p95 of the demand, is held
// from the start to the end (it costs more than drover's).
func TestCompareRunsThreePolicies(t *testing.T) {
	w, err := ReadWorkload("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	r, err := Run(context.Background(), w, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(context.Background(), w, opts, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Result{c.Drover, c.Hail, c.Static} {
		t.Logf("%s: cost %.3f of the bound, wait p95 %.1f min, utilization %.3f", x.Policy, x.CostRatio, x.WaitP95Min, x.Utilization)
		if x.CapViolations != 0 || x.Jobs != r.Jobs {
			t.Fatalf("%s: %d cap violations, %d jobs (want %d)", x.Policy, x.CapViolations, x.Jobs, r.Jobs)
		}
	}
	if c.Hail.Policy != "hail" || c.Static.Policy != "static" || c.CostVsStatic >= 1 {
		t.Fatalf("comparison %+v", c)
	}
}
