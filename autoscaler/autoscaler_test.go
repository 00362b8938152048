package autoscaler

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func cfg(name string, cores int64, price float64) LaunchConfig {
	return LaunchConfig{Name: name, Cluster: "c", Region: "r", Pool: "default", MachineType: name, Zone: "z",
		CPUMilli: cores * 1000, Memory: cores << 32, PricePerHour: money.RateFromDollars(price)}
}

func shape(cores float64, n int64) Shape {
	return Shape{CPUMilli: int64(cores * 1000), Memory: int64(cores * float64(1<<30)), Count: n}
}

func TestPlanLaunchesTheCheapestConfigForTheDemand(t *testing.T) {
	in := &Input{Now: t0, Configs: []LaunchConfig{cfg("big", 64, 3.2), cfg("small", 8, 0.32), cfg("pricey", 16, 1.6)},
		Demand: []Shape{shape(1, 100)}}
	out := Plan(in)
	// small: $0.04 a core-hour; big $0.05; pricey $0.10. 100 cores: 13
	// machines of 8.
	if len(out.Launches) != 1 || out.Launches[0].Config != "small" || out.Launches[0].Count != 13 {
		t.Fatalf("launches %+v, want 13 × small", out.Launches)
	}
	if !strings.Contains(out.Launches[0].Reason, "13 × small in z") {
		t.Fatalf("reason %q", out.Launches[0].Reason)
	}
	// A job larger than small goes to the cheapest config it fits.
	in.Demand = []Shape{shape(12, 2)}
	out = Plan(in)
	if len(out.Launches) != 1 || out.Launches[0].Config != "big" || out.Launches[0].Count != 1 {
		t.Fatalf("launches %+v, want one big machine for two 12-core jobs", out.Launches)
	}
	// The prefer-large strategy takes big first.
	in.Demand, in.Strategy = []Shape{shape(1, 100)}, PreferLarge
	if out = Plan(in); out.Launches[0].Config != "big" || out.Launches[0].Count != 2 {
		t.Fatalf("prefer-large: %+v", out.Launches)
	}
}

// TestPlanLaunchesOnDemandForJobsKeptOffSpot: jobs kept off spot machines
// (placement.Constraint.NoSpot) get the cheapest on-demand config, never
// the cheaper spot one, and spot room free on a worker does not count for
// them; other jobs take spot.
func TestPlanLaunchesOnDemandForJobsKeptOffSpot(t *testing.T) {
	spot, od := cfg("spot", 8, 0.08), cfg("od", 8, 0.32)
	spot.Spot = true
	off := shape(1, 16)
	off.Constraint = placement.Constraint{NoSpot: true}
	in := &Input{Now: t0, Configs: []LaunchConfig{spot, od}, Demand: []Shape{off},
		Free: []Room{{Region: "r", Cluster: "c", Pool: "default", CPUMilli: 8000, Memory: 64 << 30, Spot: true}}}
	out := Plan(in)
	if len(out.Launches) != 1 || out.Launches[0].Config != "od" || out.Launches[0].Count != 2 {
		t.Fatalf("launches %+v, want 2 × od for 16 cores kept off spot (the free spot room does not serve them)", out.Launches)
	}
	in.Demand = []Shape{shape(1, 16)}
	if out = Plan(in); len(out.Launches) != 1 || out.Launches[0].Config != "spot" || out.Launches[0].Count != 1 {
		t.Fatalf("launches %+v, want 1 × spot beside the free spot room for jobs that may take spot", out.Launches)
	}
}

func TestPlanCountsMachinesComingUpAndFreeRoom(t *testing.T) {
	in := &Input{Now: t0, Configs: []LaunchConfig{cfg("small", 8, 0.32)}, Demand: []Shape{shape(1, 20)},
		Machines: []Machine{{ID: "m1", Config: "small", State: Launching, PricePerHour: 320_000_000, CPUMilli: 8000, Memory: 8 << 32, Created: t0.Add(-time.Minute)}},
		Free:     []Room{{Region: "r", Cluster: "c", Pool: "default", CPUMilli: 4000, Memory: 64 << 30}}}
	out := Plan(in)
	// 4 on the free room, 8 on the launching machine, 8 on one new one.
	if len(out.Launches) != 1 || out.Launches[0].Count != 1 {
		t.Fatalf("launches %+v, want one more machine", out.Launches)
	}
}

func TestPlanCapsAndReasons(t *testing.T) {
	base := func() *Input {
		return &Input{Now: t0, Configs: []LaunchConfig{cfg("small", 8, 0.32), cfg("big", 64, 3.2)}, Demand: []Shape{shape(1, 800)}}
	}
	in := base()
	in.Limits.MaxPerHour = money.DollarPerHour
	out := Plan(in)
	if len(out.Launches) != 1 || out.Launches[0].Count != 3 {
		t.Fatalf("launches %+v; $1/hour buys 3 small machines", out.Launches)
	}
	if len(out.Held) != 1 || !strings.Contains(out.Held[0].Reason, "$/hour cap") || out.Held[0].Jobs != 800-24 {
		t.Fatalf("held %+v", out.Held)
	}
	in = base()
	in.Configs[0].MaxNodes = 2
	in.Limits.MaxNodes = 4
	out = Plan(in)
	if len(out.Launches) != 2 || out.Launches[0].Config != "small" || out.Launches[0].Count != 2 || out.Launches[1].Config != "big" || out.Launches[1].Count != 2 {
		t.Fatalf("launches %+v; 2 small (its cap), then 2 big (the global cap)", out.Launches)
	}
	// A capacity-limited config is skipped until its mark ends.
	in = base()
	in.Marks = []Mark{{Config: "small", Until: t0.Add(time.Minute), Reason: "ZONE_RESOURCE_POOL_EXHAUSTED"}}
	out = Plan(in)
	if out.Launches[0].Config != "big" || !strings.Contains(out.Skipped["small"], "capacity-limited until 10:01:00 (ZONE_RESOURCE_POOL_EXHAUSTED)") {
		t.Fatalf("launches %+v skipped %v", out.Launches, out.Skipped)
	}
	in.Now = t0.Add(time.Minute)
	if out = Plan(in); out.Launches[0].Config != "small" {
		t.Fatalf("after the mark: %+v", out.Launches)
	}
}

func TestPlanRetiresIdleNeverBootedAndLameMachines(t *testing.T) {
	to := DefaultTimeouts()
	in := &Input{Now: t0, Timeouts: to, Configs: []LaunchConfig{cfg("small", 8, 0.32)}, Limits: Limits{MaxRemovesPerMinute: 1},
		Machines: []Machine{
			{ID: "idle-long", Config: "small", State: Active, IdleSince: t0.Add(-10 * time.Minute), Heard: t0},
			{ID: "idle-short", Config: "small", State: Active, IdleSince: t0.Add(-5 * time.Minute), Heard: t0},
			{ID: "busy", Config: "small", State: Active, Heard: t0},
			{ID: "noboot", Config: "small", State: Launching, Created: t0.Add(-11 * time.Minute)},
			{ID: "lame", Config: "small", State: Active, Heard: t0.Add(-6 * time.Minute)},
			{ID: "lame-but-up", Config: "small", State: Active, Heard: t0.Add(-6 * time.Minute), ProbeOK: true},
		}}
	out := Plan(in)
	got := map[string]string{}
	for _, d := range out.Deletes {
		got[d.Machine] = d.Reason
	}
	// One idle machine a minute (the longest idle); failures always.
	if len(got) != 3 || !strings.HasPrefix(got["idle-long"], "idle for 10m0s") || !strings.HasPrefix(got["noboot"], "boot timeout") || !strings.HasPrefix(got["lame"], "lame") {
		t.Fatalf("deletes %v", got)
	}
}

// TestPlanDisabledOnlyShrinks: a disabled autoscaler (ShrinkOnly)
// launches nothing for waiting work and drains nothing to consolidate,
// but still deletes idle machines and those whose launch config was
// removed (at once when they run nothing, not after the idle timeout).
func TestPlanDisabledOnlyShrinks(t *testing.T) {
	in := &Input{Now: t0, Timeouts: DefaultTimeouts(), Configs: []LaunchConfig{cfg("small", 8, 0.32)}, Demand: []Shape{shape(1, 100)}, Consolidate: true,
		Machines: []Machine{
			{ID: "idle", Config: "small", State: Active, IdleSince: t0.Add(-10 * time.Minute), Heard: t0},
			{ID: "half", Config: "small", State: Active, Heard: t0, CPUMilli: 8000, FreeMilli: 6000},
			{ID: "orphan-idle", Config: "removed", State: Active, IdleSince: t0.Add(-time.Second), Heard: t0},
			{ID: "orphan-busy", Config: "removed", State: Active, Heard: t0},
			{ID: "orphan-requested", Config: "removed", State: Requested, Created: t0},
		},
		Free: []Room{{Machine: "half", Region: "r", Cluster: "c", Pool: "default", CPUMilli: 6000, Memory: 6 << 32}}}
	enabled := Plan(in)
	if len(enabled.Launches) == 0 {
		t.Fatalf("enabled: no launch for 100 waiting cores: %+v", enabled)
	}
	in.ShrinkOnly = true
	out := Plan(in)
	got := map[string]string{}
	for _, d := range out.Deletes {
		got[d.Machine] = d.Reason
	}
	if len(out.Launches) != 0 || len(out.Revives) != 0 || len(out.Private) != 0 {
		t.Fatalf("disabled, it launched: %+v", out)
	}
	if len(got) != 3 || got["idle"] == "" || !strings.Contains(got["orphan-idle"], "launch config removed was removed") || got["orphan-requested"] == "" {
		t.Fatalf("disabled, deletes %v; want idle, orphan-idle and orphan-requested", got)
	}
}

// TestPlanProperties runs thousands of random rounds: no plan takes the
// live machines past a node or spend cap (counting requested and
// launching ones) or past an add rate; a config still capacity-limited is
// never launched; and a config is used only when every config ranked
// before it that fits the demand is unavailable or at a cap.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 5000; round++ {
		in := randomInput(rng)
		out := Plan(in)
		if err := checkPlan(in, out); err != nil {
			t.Fatalf("round %d: %v\ninput %+v\noutput %+v", round, err, in, out)
		}
	}
}

func randomInput(rng *rand.Rand) *Input {
	in := &Input{Now: t0.Add(time.Duration(rng.IntN(3600)) * time.Second), Timeouts: DefaultTimeouts(), Regions: map[string]string{}}
	zones := 1 + rng.IntN(4)
	for i := 0; i < 1+rng.IntN(8); i++ {
		cores := []int64{2, 4, 8, 16, 32, 64}[rng.IntN(6)]
		c := LaunchConfig{Name: fmt.Sprintf("cfg%d", i), Cluster: fmt.Sprintf("c%d", rng.IntN(2)), Pool: "default",
			MachineType: fmt.Sprintf("m%d", cores), Zone: fmt.Sprintf("z%d", rng.IntN(zones)), Spot: rng.IntN(2) == 0,
			CPUMilli: cores * 1000, Memory: cores << 32, PricePerHour: money.RateFromDollars(float64(cores) * (0.01 + rng.Float64()*0.05))}
		if rng.IntN(3) == 0 {
			c.MaxNodes = 1 + rng.IntN(5)
		}
		if rng.IntN(3) == 0 {
			c.MaxPerHour = money.RateFromDollars(rng.Float64() * 10)
		}
		if rng.IntN(3) == 0 {
			c.MaxAddsPerMinute = 1 + rng.IntN(4)
		}
		in.Configs = append(in.Configs, c)
		in.Regions[c.Cluster] = "r" + c.Cluster
	}
	if rng.IntN(2) == 0 {
		in.Limits.MaxNodes = rng.IntN(20)
	}
	if rng.IntN(2) == 0 {
		in.Limits.MaxPerHour = money.RateFromDollars(rng.Float64() * 30)
	}
	if rng.IntN(2) == 0 {
		in.Limits.MaxAddsPerMinute = rng.IntN(10)
	}
	in.Strategy = []Strategy{Cheapest, PreferLarge, PreferReserved}[rng.IntN(3)]
	for i := 0; i < rng.IntN(10); i++ {
		c := in.Configs[rng.IntN(len(in.Configs))]
		st := []State{Requested, Launching, Active, Draining, Deleted}[rng.IntN(5)]
		in.Machines = append(in.Machines, Machine{ID: fmt.Sprint("m", i), Config: c.Name, State: st, PricePerHour: c.PricePerHour,
			CPUMilli: c.CPUMilli, Memory: c.Memory, Created: in.Now.Add(-time.Duration(rng.IntN(600)) * time.Second), Heard: in.Now})
	}
	for _, c := range in.Configs {
		if rng.IntN(4) == 0 {
			in.Marks = append(in.Marks, Mark{Config: c.Name, Until: in.Now.Add(time.Duration(rng.IntN(120)-60) * time.Second), Reason: "exhausted"})
		}
	}
	if rng.IntN(5) == 0 {
		in.Unavailable = map[string]bool{"c1": true}
	}
	for i := 0; i < 1+rng.IntN(5); i++ {
		sh := shape([]float64{0.5, 1, 2, 4, 8, 16, 48}[rng.IntN(7)], 1+rng.Int64N(200))
		if rng.IntN(4) == 0 {
			sh.Constraint = placement.Constraint{Regions: []string{"rc0"}}
		}
		in.Demand = append(in.Demand, sh)
	}
	return in
}

func checkPlan(in *Input, out *Output) error {
	byName := map[string]*LaunchConfig{}
	for i := range in.Configs {
		byName[in.Configs[i].Name] = &in.Configs[i]
	}
	nodes, adds := 0, 0
	var spend money.Rate
	cfgNodes, cfgSpend, cfgAdds := map[string]int{}, map[string]money.Rate{}, map[string]int{}
	for _, m := range in.Machines {
		if m.State.Live() {
			nodes++
			spend += m.PricePerHour
			cfgNodes[m.Config]++
			cfgSpend[m.Config] += m.PricePerHour
		}
		if m.Created.After(in.Now.Add(-time.Minute)) {
			adds++
			cfgAdds[m.Config]++
		}
	}
	launched := 0
	for _, l := range out.Launches {
		c := byName[l.Config]
		launched += l.Count
		nodes += l.Count
		spend += money.Rate(l.Count) * c.PricePerHour
		adds += l.Count
		if n := cfgNodes[c.Name] + l.Count; c.MaxNodes > 0 && n > c.MaxNodes {
			return fmt.Errorf("%s: %d nodes, cap %d", c.Name, n, c.MaxNodes)
		}
		// Exact: no epsilon.
		if s := cfgSpend[c.Name] + money.Rate(l.Count)*c.PricePerHour; c.MaxPerHour > 0 && s > c.MaxPerHour {
			return fmt.Errorf("%s: $%s/hour, cap %s", c.Name, s, c.MaxPerHour)
		}
		if a := cfgAdds[c.Name] + l.Count; c.MaxAddsPerMinute > 0 && a > c.MaxAddsPerMinute {
			return fmt.Errorf("%s: %d adds a minute, cap %d", c.Name, a, c.MaxAddsPerMinute)
		}
		for _, m := range in.Marks {
			if m.Config == c.Name && in.Now.Before(m.Until) {
				return fmt.Errorf("%s launched while capacity-limited until %s", c.Name, m.Until)
			}
		}
		if in.Unavailable[c.Cluster] {
			return fmt.Errorf("%s launched in unavailable cluster %s", c.Name, c.Cluster)
		}
	}
	if launched > 0 {
		if l := in.Limits; l.MaxNodes > 0 && nodes > l.MaxNodes {
			return fmt.Errorf("%d live nodes, cap %d", nodes, l.MaxNodes)
		}
		if l := in.Limits; l.MaxPerHour > 0 && spend > l.MaxPerHour {
			return fmt.Errorf("$%s/hour live, cap %s", spend, l.MaxPerHour)
		}
		if l := in.Limits; l.MaxAddsPerMinute > 0 && adds > l.MaxAddsPerMinute {
			return fmt.Errorf("%d adds a minute, cap %d", adds, l.MaxAddsPerMinute)
		}
	}
	// Cheapest first: a config that got machines for a shape while a
	// better-ranked one that fits the shape was neither unavailable nor at
	// a cap is a wrong choice.
	p := newPlanner(in)
	for si, configs := range out.served {
		sh := &in.Demand[si]
		for _, name := range configs {
			for _, better := range p.ranked {
				if better.Name == name {
					break
				}
				if p.serves(better, sh) && out.Skipped[better.Name] == "" {
					return fmt.Errorf("%s launched for %+v while %s, ranked before it, was neither unavailable nor capped", name, *sh, better.Name)
				}
			}
		}
	}
	return nil
}

func TestWindowedDemandTakesTheHeadOfEachQueue(t *testing.T) {
	users := []UserQueue{
		{Name: "a", RunningMilli: 0, Ready: []Shape{shape(1, 1000)}},
		{Name: "b", RunningMilli: 10_000, Ready: []Shape{shape(2, 1000), shape(4, 10)}},
	}
	// 31 cores of budget: a (running none) gets 10 to reach b's 10, then
	// they split the other 21: a 20.5, b 10.5. Each user's last job may
	// pass its share: a 21 one-core jobs, b 6 two-core ones.
	d := WindowedDemand(users, 31_000)
	if len(d) != 2 || d[0].CPUMilli != 1000 || d[0].Count != 21 || d[1].CPUMilli != 2000 || d[1].Count != 6 {
		t.Fatalf("demand %+v; want a's 21 one-core jobs, then b's 6 two-core ones", d)
	}
	if RoundMemory(1<<30+1, 128<<20) != 1<<30+128<<20 || RoundMemory(1<<30, 128<<20) != 1<<30 {
		t.Fatal("RoundMemory")
	}
}

// TestWindowedDemandWeighsPastUse: the autoscaler splits its budget as
// the round does: a user whose past use weighs as 10 cores stands as b
// did above, though it runs nothing.
func TestWindowedDemandWeighsPastUse(t *testing.T) {
	users := []UserQueue{
		{Name: "a", Ready: []Shape{shape(1, 1000)}},
		{Name: "b", PastMilli: 10_000, Ready: []Shape{shape(2, 1000), shape(4, 10)}},
	}
	d := WindowedDemand(users, 31_000)
	if len(d) != 2 || d[0].CPUMilli != 1000 || d[0].Count != 21 || d[1].CPUMilli != 2000 || d[1].Count != 6 {
		t.Fatalf("demand %+v; want a's 21 one-core jobs, then b's 6 two-core ones", d)
	}
}

func TestPlanConsolidatesAndRevives(t *testing.T) {
	active := func(id string, free int64) Machine {
		return Machine{ID: id, Config: "small", State: Active, PricePerHour: 320_000_000, CPUMilli: 8000, Memory: 8 << 32, FreeMilli: free, FreeMemory: 8 << 30, Heard: t0}
	}
	room := func(id string, free int64) Room {
		return Room{Machine: id, Region: "r", Cluster: "c", Pool: "default", CPUMilli: free, Memory: 8 << 30}
	}
	in := &Input{Now: t0, Consolidate: true, Configs: []LaunchConfig{cfg("small", 8, 0.32)},
		Machines: []Machine{active("busy", 1000), active("light", 7000), active("half", 4000), active("more", 6000)},
		Free:     []Room{room("busy", 1000), room("light", 7000), room("half", 4000), room("more", 6000)}}
	out := Plan(in)
	// 18 cores to spare: the machine with 1 of 8 busy drains, and 11
	// remain elsewhere.
	if len(out.Deletes) != 1 || out.Deletes[0].Machine != "light" || !strings.HasPrefix(out.Deletes[0].Reason, "underused: 1 of 8 cores busy") {
		t.Fatalf("deletes %+v", out.Deletes)
	}
	// Demand that needs the room: nothing drains.
	in.Demand = []Shape{shape(1, 17)}
	if out = Plan(in); len(out.Deletes) != 0 {
		t.Fatalf("drained while its room is needed: %+v", out.Deletes)
	}
	// Not without a machine's worth of room elsewhere.
	in.Demand = nil
	in.Free = []Room{room("busy", 1000), room("light", 7000)}
	in.Machines = in.Machines[:2]
	if out = Plan(in); len(out.Deletes) != 0 {
		t.Fatalf("drained with 1 core to spare elsewhere: %+v", out.Deletes)
	}
	// A draining machine's room is taken back before a launch.
	in = &Input{Now: t0, Configs: []LaunchConfig{cfg("small", 8, 0.32)}, Demand: []Shape{shape(1, 6)},
		Draining: []Room{room("d1", 4000), room("d2", 4000)}}
	out = Plan(in)
	if len(out.Launches) != 0 || len(out.Revives) != 2 {
		t.Fatalf("launches %+v revives %v; want both draining machines back and no launch", out.Launches, out.Revives)
	}
}

func TestPlanPrivateMachines(t *testing.T) {
	big := cfg("big", 16, 0.9)
	big.MachineType = "n2-highmem-16"
	cheap := cfg("cheap", 16, 0.5)
	cheap.MachineType = "n2-highmem-16"
	cheap.Zone = "z2"
	in := &Input{Now: t0, Configs: []LaunchConfig{cfg("small", 8, 0.32), big, cheap}, Limits: Limits{MaxNodes: 2},
		Private: []PrivateDemand{{Ref: "1/1", MachineType: "n2-highmem-16", CPUMilli: 4000, Memory: 1 << 30},
			{Ref: "1/2", MachineType: "n2-highmem-16", CPUMilli: 4000, Memory: 1 << 30},
			{Ref: "1/3", MachineType: "n2-highmem-16", CPUMilli: 4000, Memory: 1 << 30},
			{Ref: "2/1", MachineType: "m1-ultramem", CPUMilli: 4000, Memory: 1 << 30}},
		Demand: []Shape{shape(1, 4)}}
	out := Plan(in)
	// Two machines under the node cap, each of the cheaper config; the
	// third job held by the cap, the last for want of its type; the
	// shared jobs get no room on private machines (and none is left).
	if len(out.Private) != 2 || out.Private[0].Config != "cheap" || out.Private[1].Ref != "1/2" || len(out.Launches) != 0 {
		t.Fatalf("private %+v launches %+v", out.Private, out.Launches)
	}
	reasons := ""
	for _, h := range out.Held {
		reasons += h.Reason + "; "
	}
	if !strings.Contains(reasons, "node cap") || !strings.Contains(reasons, "no launch config of machine type m1-ultramem") {
		t.Fatalf("held %+v", out.Held)
	}
}

// TestCheapestComparesPricesPerCoreExactly: $0.67 for a core and $2.01
// for three are the same price per core, which float64 division got
// wrong (0.67 against 0.6699999999999999: the three cores "cheaper"), so
// the smaller machine, Cheapest's tie break, lost. Compared as integers
// they tie and the smaller machine wins, whichever order they come in;
// a nano-dollar an hour less makes the larger one the cheaper.
func TestCheapestComparesPricesPerCoreExactly(t *testing.T) {
	one := LaunchConfig{Name: "b-one", CPUMilli: 1000, PricePerHour: 670_000_000}
	three := LaunchConfig{Name: "a-three", CPUMilli: 3000, PricePerHour: 2_010_000_000}
	if c := ComparePricePerCore(&one, &three); c != 0 {
		t.Fatalf("the same price per core compares %d", c)
	}
	if Cheapest(&one, &three) >= 0 || Cheapest(&three, &one) <= 0 {
		t.Fatal("at one price per core the smaller machine is not preferred")
	}
	in := &Input{Now: t0, Configs: []LaunchConfig{three, one}, Demand: []Shape{shape(1, 1)}}
	for i := range in.Configs {
		in.Configs[i].Cluster, in.Configs[i].Pool, in.Configs[i].Memory = "c", "default", 1<<40
	}
	if out := Plan(in); len(out.Launches) != 1 || out.Launches[0].Config != "b-one" {
		t.Fatalf("launches %+v, want one b-one", out.Launches)
	}
	three.PricePerHour--
	if Cheapest(&three, &one) >= 0 {
		t.Fatal("a nano-dollar an hour less is not cheaper")
	}
	if got := one.PricePerCoreHour(); got != 670_000_000 {
		t.Fatalf("price per core-hour %s", got)
	}
	if got := (&LaunchConfig{PricePerHour: 1}).PricePerCoreHour(); got != money.MaxRate {
		t.Fatalf("a config with no cores costs %s a core-hour", got)
	}
}

// TestPlanRightSizes: an idle machine at least twice the size of a config
// that can be launched is no room for small jobs (scheduler.LeftForLarger,
// which the scheduling round applies with the decision's Sizes); it is
// room for a job of its size, and for small jobs again once nothing
// smaller can be launched (capacity-limited, at a node cap).
func TestPlanRightSizes(t *testing.T) {
	base := func(sh Shape) *Input {
		return &Input{Now: t0, Configs: []LaunchConfig{cfg("two", 2, 0.08), cfg("eight", 8, 0.32)}, Demand: []Shape{sh},
			Free: []Room{{Machine: "m1", Region: "r", Cluster: "c", Pool: "default", CPUMilli: 8000, Memory: 8 << 32, TotalMilli: 8000}}}
	}
	out := Plan(base(shape(1, 2)))
	if len(out.Launches) != 1 || out.Launches[0].Config != "two" || out.Launches[0].Count != 1 {
		t.Fatalf("launches %+v, want one 2-core machine for two 1-core jobs beside the idle 8-core one", out.Launches)
	}
	want := []scheduler.PoolSize{{Cluster: "c", Pool: "default", CPUMilli: 2000, Memory: 2 << 32}, {Cluster: "c", Pool: "default", CPUMilli: 8000, Memory: 8 << 32}}
	if fmt.Sprint(out.Sizes) != fmt.Sprint(want) {
		t.Fatalf("sizes %+v, want %+v", out.Sizes, want)
	}
	if out = Plan(base(shape(8, 1))); len(out.Launches) != 0 {
		t.Fatalf("an 8-core job: launches %+v, want it on the idle machine", out.Launches)
	}
	// A machine running something is room for anyone.
	in := base(shape(1, 2))
	in.Free[0].CPUMilli = 6000
	if out = Plan(in); len(out.Launches) != 0 {
		t.Fatalf("a busy machine: launches %+v, want the small jobs in its room", out.Launches)
	}
	// Nothing smaller to be had: the large machine takes them.
	in = base(shape(1, 2))
	in.Marks = []Mark{{Config: "two", Until: t0.Add(time.Minute), Reason: "ZONE_RESOURCE_POOL_EXHAUSTED"}}
	if out = Plan(in); len(out.Launches) != 0 || len(out.Sizes) != 1 || out.Sizes[0].CPUMilli != 8000 {
		t.Fatalf("2-core capacity-limited: launches %+v sizes %+v, want none and the 8-core size alone", out.Launches, out.Sizes)
	}
	in = base(shape(1, 2))
	in.Limits.MaxNodes = 1
	in.Machines = []Machine{{ID: "m1", Config: "eight", State: Active, PricePerHour: money.RateFromDollars(0.32), CPUMilli: 8000, Memory: 8 << 32, FreeMilli: 8000, FreeMemory: 8 << 32}}
	if out = Plan(in); len(out.Launches) != 0 || len(out.Sizes) != 0 || len(out.Held) != 0 {
		t.Fatalf("at the node cap: launches %+v sizes %+v held %+v, want the jobs on the idle machine", out.Launches, out.Sizes, out.Held)
	}
	// The add rate only delays a launch: the rule still holds.
	in = base(shape(1, 2))
	in.Limits.MaxAddsPerMinute = 1
	in.Machines = []Machine{{ID: "m0", Config: "two", State: Active, PricePerHour: money.RateFromDollars(0.08), CPUMilli: 2000, Memory: 2 << 32, Created: t0.Add(-10 * time.Second)}}
	if out = Plan(in); len(out.Launches) != 0 || len(out.Sizes) != 2 || len(out.Held) != 1 {
		t.Fatalf("at the add rate: launches %+v sizes %+v held %+v, want the jobs held for the next minute", out.Launches, out.Sizes, out.Held)
	}
	// A strategy that prefers large machines would launch an 8-core one
	// for them: the idle one takes them.
	in = base(shape(1, 2))
	in.Strategy = PreferLarge
	if out = Plan(in); len(out.Launches) != 0 || len(out.Sizes) != 2 || out.Sizes[0].CPUMilli != 8000 {
		t.Fatalf("prefer-large: launches %+v sizes %+v, want the jobs on the idle machine", out.Launches, out.Sizes)
	}
	// Disabled: nothing can be launched, no sizes.
	in = base(shape(1, 2))
	in.ShrinkOnly = true
	if out = Plan(in); len(out.Sizes) != 0 {
		t.Fatalf("disabled: sizes %+v", out.Sizes)
	}
}
