package sim

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/drover-sched/drover/money"
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
			t.Logf("%s seed %d: cost %.3f of the lower bound, wait p50 %.1f p95 %.1f max %.0f min, %.1f h at a cap, utilization %.3f, peak $%s/h, waste %+v core-h",
				filepath.Base(f), seed, r.CostRatio, r.WaitP50Min, r.WaitP95Min, r.WaitMaxMin, r.AtCapHours, r.Utilization, r.PeakSpendPerHour, r.Waste)
			e, set := w.Expect, w.Settings
			for q, max := range e.QueueWaitP95MinMax {
				qw, ok := r.ByQueue[q]
				t.Logf("%s seed %d: queue %s: %+v (%d attempts preempted in all)", filepath.Base(f), seed, q, qw, r.Preempted)
				if !ok || qw.Jobs == 0 || qw.WaitP95Min > max {
					t.Errorf("%s seed %d: queue %s's jobs waited %.1f min at the 95th percentile (%d jobs); the scenario wants %.1f or less", f, seed, q, qw.WaitP95Min, qw.Jobs, max)
				}
			}
			if e.SpotCapShortensTail > 0 {
				// Today's policy: the same workload, spot or not as
				// placement finds room however often spot is lost.
				today := *w
				today.MaxSpotAttempts = 0
				r0, err := Run(context.Background(), &today, opts)
				if err != nil {
					t.Fatalf("%s seed %d without the spot cap: %v", f, seed, err)
				}
				t.Logf("%s seed %d: max_spot_attempts %d: job latency p50 %.1f p99 %.1f max %.1f min, %d attempts lost, cost $%s; without it: p50 %.1f p99 %.1f max %.1f min, %d lost, $%s",
					filepath.Base(f), seed, w.MaxSpotAttempts, r.LatencyP50Min, r.LatencyP99Min, r.LatencyMaxMin, r.LostAttempts, r.CostUSD,
					r0.LatencyP50Min, r0.LatencyP99Min, r0.LatencyMaxMin, r0.LostAttempts, r0.CostUSD)
				if r.LatencyP99Min > e.SpotCapShortensTail*r0.LatencyP99Min || r.LostAttempts >= r0.LostAttempts {
					t.Errorf("%s seed %d: with max_spot_attempts %d the p99 job latency is %.1f min and %d attempts were lost; without it %.1f min and %d: the cap should cut the tail to %.0f%% or less and lose fewer",
						f, seed, w.MaxSpotAttempts, r.LatencyP99Min, r.LostAttempts, r0.LatencyP99Min, r0.LostAttempts, 100*e.SpotCapShortensTail)
				}
			}
			switch {
			case r.CapViolations != 0:
				t.Errorf("%s seed %d: %d cap violations", f, seed, r.CapViolations)
			case r.CapacityLimitedLaunches != 0 || r.DisabledClusterLaunches != 0:
				t.Errorf("%s seed %d: %d machines launched of a capacity-limited config, %d into a disabled cluster", f, seed, r.CapacityLimitedLaunches, r.DisabledClusterLaunches)
			case r.CapacityRefusals < e.CapacityRefusalsMin:
				t.Errorf("%s seed %d: the cloud refused %d launches; the scenario wants %d or more", f, seed, r.CapacityRefusals, e.CapacityRefusalsMin)
			case r.Preempted < e.PreemptedMin:
				t.Errorf("%s seed %d: %d attempts preempted; the scenario wants %d or more", f, seed, r.Preempted, e.PreemptedMin)
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

// TestCloudPricesAreFollowed runs the price-change scenario (zone a's
// spot machines cost half as much again from hour 8 to 16, more than zone
// b's) twice: with its configs taking the cloud's price, the leader reads
// the rise within its hourly refresh and launches in zone b while it
// lasts; with the prices fixed in the placement, it goes on launching
// the machines that became dearer, and pays more.
func TestCloudPricesAreFollowed(t *testing.T) {
	w, err := ReadWorkload("testdata/scenarios/price-change.json")
	if err != nil {
		t.Fatal(err)
	}
	fixed := *w
	fixed.Configs = slices.Clone(w.Configs)
	for i := range fixed.Configs {
		fixed.Configs[i].PriceFromCloud = false
	}
	live, err := Run(context.Background(), w, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	stale, err := Run(context.Background(), &fixed, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cloud's prices: $%s (%.3f of the bound), by config %v; fixed prices: $%s (%.3f), by config %v",
		live.CostUSD, live.CostRatio, live.CostByConfig, stale.CostUSD, stale.CostRatio, stale.CostByConfig)
	if live.CostByConfig["n2-8-spot-b"] < 10*money.Dollar || stale.CostByConfig["n2-8-spot-b"] != 0 {
		t.Fatalf("zone b's spot machines cost $%s with the cloud's prices (want a share), $%s with fixed ones (want none)",
			live.CostByConfig["n2-8-spot-b"], stale.CostByConfig["n2-8-spot-b"])
	}
	if float64(live.CostUSD) > 0.9*float64(stale.CostUSD) {
		t.Fatalf("following the cloud's prices cost $%s, not 10%% less than fixed prices' $%s", live.CostUSD, stale.CostUSD)
	}
}

// TestTierOneFloodNeedsPreemption runs the tier-1 flood (tier-1 batches
// into a fleet at its node cap, full of tier-3 work) with the queues'
// preemption and without: with it, the preemption round stops tier-3
// attempts and tier-1 jobs start within minutes; without it they wait
// for tier-3 jobs to end.
func TestTierOneFloodNeedsPreemption(t *testing.T) {
	w, err := ReadWorkload("testdata/scenarios/tier1-flood.json")
	if err != nil {
		t.Fatal(err)
	}
	without := *w
	without.Queues = slices.Clone(w.Queues)
	for i := range without.Queues {
		without.Queues[i].AllowPreemptionFrom, without.Queues[i].PreemptAfter = nil, ""
	}
	with, err := Run(context.Background(), w, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	none, err := Run(context.Background(), &without, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, b := with.ByQueue["org/tier1"], none.ByQueue["org/tier1"]
	t.Logf("tier 1 with preemption: %+v (%d preempted); without: %+v (%d preempted)", a, with.Preempted, b, none.Preempted)
	if none.Preempted != 0 || with.Preempted == 0 || a.WaitP95Min*3 > b.WaitP95Min {
		t.Fatalf("tier 1's p95 wait %.1f min with preemption (%d preempted), %.1f without (%d): want a third or less",
			a.WaitP95Min, with.Preempted, b.WaitP95Min, none.Preempted)
	}
}
