package autoscaler

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestPlanHail: the demand's cores less the free ones, divided by one
// worker type's cores, of the best-ranked config that fits the largest
// job; machines coming up count; no packing by shape.
func TestPlanHail(t *testing.T) {
	in := &Input{Now: t0, Configs: []LaunchConfig{cfg("big", 64, 3.2), cfg("small", 8, 0.32)},
		Demand: []Shape{shape(1, 30), shape(4, 5)}, Free: []Room{{Region: "r", Cluster: "c", Pool: "default", CPUMilli: 2000, Memory: 1 << 30}}}
	out := PlanHail(in)
	// 30 + 20 - 2 = 48 cores: 6 × small.
	if len(out.Launches) != 1 || out.Launches[0].Config != "small" || out.Launches[0].Count != 6 {
		t.Fatalf("launches %+v, want 6 × small", out.Launches)
	}
	in.Machines = []Machine{{ID: "m1", Config: "small", State: Launching, CPUMilli: 8000, PricePerHour: 320_000_000, Created: t0.Add(-time.Minute)}}
	if out = PlanHail(in); out.Launches[0].Count != 5 {
		t.Fatalf("with one machine coming up: %+v, want 5", out.Launches)
	}
	// A 12-core job: the worker type must hold it.
	in.Machines, in.Demand = nil, []Shape{shape(12, 2)}
	if out = PlanHail(in); out.Launches[0].Config != "big" || out.Launches[0].Count != 1 {
		t.Fatalf("for 12-core jobs: %+v", out.Launches)
	}
}

// TestPlanStatic keeps its fleet whatever the demand and lets it go when
// the work is done.
func TestPlanStatic(t *testing.T) {
	in := &Input{Now: t0, Configs: []LaunchConfig{cfg("small", 8, 0.32)}, Timeouts: DefaultTimeouts()}
	out := PlanStatic(in, 20_000, Shape{CPUMilli: 4000}, false)
	if len(out.Launches) != 1 || out.Launches[0].Count != 3 {
		t.Fatalf("launches %+v, want 3 × small for 20 cores", out.Launches)
	}
	idle := Machine{ID: "m1", Config: "small", State: Active, CPUMilli: 8000, PricePerHour: 320_000_000, Created: t0.Add(-time.Hour), IdleSince: t0.Add(-time.Hour)}
	in.Machines = []Machine{idle, idle, idle}
	in.Machines[1].ID, in.Machines[2].ID = "m2", "m3"
	if out = PlanStatic(in, 20_000, Shape{CPUMilli: 4000}, false); len(out.Launches)+len(out.Deletes) != 0 {
		t.Fatalf("a full static fleet, idle an hour: %+v", out)
	}
	if out = PlanStatic(in, 20_000, Shape{CPUMilli: 4000}, true); len(out.Deletes) != 3 {
		t.Fatalf("the work done: %+v, want all 3 deleted", out.Deletes)
	}
	// The fleet's machines hold the largest job: 12 cores take the
	// bigger config, though the smaller ranks first.
	in = &Input{Now: t0, Configs: []LaunchConfig{cfg("small", 8, 0.32), cfg("big", 16, 0.66)}, Timeouts: DefaultTimeouts()}
	if out = PlanStatic(in, 20_000, Shape{CPUMilli: 12_000}, false); len(out.Launches) != 1 || out.Launches[0].Config != "big" || out.Launches[0].Count != 2 {
		t.Fatalf("launches %+v, want 2 × big for 20 cores and 12-core jobs", out.Launches)
	}
}

// TestOtherPoliciesKeepTheCaps: the comparison's policies plan within
// every cap, as Plan does (checkPlan on random inputs).
func TestOtherPoliciesKeepTheCaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 3000; round++ {
		in := randomInput(rng)
		for name, out := range map[string]*Output{"hail": PlanHail(in), "static": PlanStatic(in, rng.Int64N(200_000), Shape{CPUMilli: 1000}, false)} {
			if err := checkPlan(in, out); err != nil {
				t.Fatalf("%s, round %d: %v\ninput %+v\noutput %+v", name, round, err, in, out)
			}
		}
	}
}

// TestIdleMachinesGoWhenQuotaRefuses: while a config of a cluster is
// refused for quota, idle machines of that cluster go at once, not after
// the idle timeout; a capacity refusal (not quota) leaves them their
// timeout.
func TestIdleMachinesGoWhenQuotaRefuses(t *testing.T) {
	in := &Input{Now: t0, Configs: []LaunchConfig{cfg("small", 8, 0.32), cfg("big", 64, 3.2)}, Timeouts: DefaultTimeouts(),
		Machines: []Machine{{ID: "m1", Config: "small", State: Active, CPUMilli: 8000, PricePerHour: 320_000_000, Created: t0.Add(-time.Hour), IdleSince: t0.Add(-10 * time.Second)}},
		Marks:    []Mark{{Config: "big", Until: t0.Add(time.Minute), Reason: "ZONE_RESOURCE_POOL_EXHAUSTED"}}}
	if out := Plan(in); len(out.Deletes) != 0 {
		t.Fatalf("a capacity refusal deleted %+v", out.Deletes)
	}
	in.Marks[0].Reason = "QUOTA_EXCEEDED"
	out := Plan(in)
	if len(out.Deletes) != 1 || out.Deletes[0].Machine != "m1" || !strings.Contains(out.Deletes[0].Reason, "for quota") {
		t.Fatalf("while big is refused for quota: %+v", out.Deletes)
	}
}
