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
