package autoscaler

import (
	"strings"
	"testing"
)

func gangShape(cores float64, n int64, id uint64) Shape {
	sh := shape(cores, n)
	sh.Gang = id
	return sh
}

// TestPlanLaunchesAGangWholeInOneCluster: a gang's machines come from one
// config, in one cluster, for all its members, or none is launched. The
// cheapest config's cluster may hold only part of it (its node cap): then
// the next config that holds it whole, where plain jobs of the same size
// would have been split over both.
func TestPlanLaunchesAGangWholeInOneCluster(t *testing.T) {
	a, b := cfg("a", 8, 0.32), cfg("b", 8, 0.48)
	b.Cluster = "d"
	a.MaxNodes = 2
	in := &Input{Now: t0, Configs: []LaunchConfig{a, b}, Demand: []Shape{shape(8, 4)}}
	out := Plan(in)
	if len(out.Launches) != 2 {
		t.Fatalf("plain jobs: launches %+v; want 2 × a and 2 × b", out.Launches)
	}
	in.Demand = []Shape{gangShape(8, 4, 1)}
	out = Plan(in)
	if len(out.Launches) != 1 || out.Launches[0].Config != "b" || out.Launches[0].Count != 4 {
		t.Fatalf("gang: launches %+v; want 4 × b, the gang whole in cluster d", out.Launches)
	}
	// Neither holds it whole: nothing launched, the gang held with why.
	b.MaxNodes = 3
	in.Configs = []LaunchConfig{a, b}
	out = Plan(in)
	if len(out.Launches) != 0 || len(out.Held) != 1 || out.Held[0].Jobs != 4 || !strings.Contains(out.Held[0].Reason, "node cap") {
		t.Fatalf("gang no config holds: launches %+v, held %+v; want none, and the gang held by a node cap", out.Launches, out.Held)
	}
}

// TestPlanGangCountsRoomInItsCluster: room free in one cluster that holds
// the whole gang needs no machine; room split over two clusters does not
// count as one, and a cluster's own room counts with its new machines.
func TestPlanGangCountsRoomInItsCluster(t *testing.T) {
	a := cfg("a", 8, 0.32)
	room := func(cluster string, cores int64) Room {
		return Room{Region: "r", Cluster: cluster, Pool: "default", CPUMilli: cores * 1000, Memory: cores << 32}
	}
	in := &Input{Now: t0, Configs: []LaunchConfig{a}, Demand: []Shape{gangShape(2, 8, 1)},
		Free: []Room{room("c", 8), room("c", 8)}}
	if out := Plan(in); len(out.Launches) != 0 {
		t.Fatalf("room for the gang in cluster c: launches %+v; want none", out.Launches)
	}
	// 8 cores free in c and 8 in e: 4 members each; a new machine in c
	// with c's room holds the 8.
	in.Free = []Room{room("c", 8), room("e", 8)}
	out := Plan(in)
	if len(out.Launches) != 1 || out.Launches[0].Config != "a" || out.Launches[0].Count != 1 {
		t.Fatalf("room split over clusters: launches %+v; want 1 × a beside c's room", out.Launches)
	}
	// A gang of one label value counts only its config's own machines.
	in.Free = []Room{room("c", 8), room("c", 8)}
	in.Demand[0].GangUniform = "label:rack"
	out = Plan(in)
	if len(out.Launches) != 1 || out.Launches[0].Count != 2 {
		t.Fatalf("label gang: launches %+v; want 2 × a", out.Launches)
	}
}

// TestWindowedDemandKeepsGangsWhole: a gang is one shape of all its
// members, never merged with another gang or with plain jobs, never cut
// at the user's share.
func TestWindowedDemandKeepsGangsWhole(t *testing.T) {
	users := []UserQueue{{Name: "u", Ready: []Shape{gangShape(1, 8, 1), gangShape(1, 8, 2), shape(1, 4)}}}
	d := WindowedDemand(users, 3000)
	if len(d) != 1 || d[0].Count != 8 || d[0].Gang != 1 {
		t.Fatalf("demand %+v; want the first gang whole (8 members past a share of 3 cores), nothing after it", d)
	}
	d = WindowedDemand(users, 100_000)
	if len(d) != 3 || d[0].Count != 8 || d[1].Count != 8 || d[2].Count != 4 {
		t.Fatalf("demand %+v; want two gangs of 8 apart and the 4 plain jobs", d)
	}
}

// TestPlanLaunchesForAGangOfSeveralSizes: a gang of a launcher of 1 core
// and two ranks of 8 GPUs asks for machines by its members' own sizes:
// the two ranks' machines hold the launcher too (two 8-GPU machines, not
// three as for members each as large as the largest); a launcher no
// machine of a config holds rules the config out.
func TestPlanLaunchesForAGangOfSeveralSizes(t *testing.T) {
	gpu := cfg("gpu", 16, 8)
	gpu.GPUType, gpu.GPUs = "a100", 8
	launcher := Shape{CPUMilli: 1000, Memory: 1 << 30, Count: 1}
	ranks := Shape{CPUMilli: 8000, Memory: 8 << 30, GPUs: 8, Count: 2}
	sh := Shape{CPUMilli: 8000, Memory: 8 << 30, GPUs: 8, Count: 3, Gang: 1, Parts: []Shape{ranks, launcher}}
	sh.Constraint.GPUType = "a100"
	in := &Input{Now: t0, Configs: []LaunchConfig{gpu}, Demand: []Shape{sh}}
	out := Plan(in)
	if len(out.Launches) != 1 || out.Launches[0].Count != 2 {
		t.Fatalf("launches %+v; want 2 × gpu for the ranks, the launcher beside one", out.Launches)
	}
	// A launcher of 64 GiB: no gpu machine (64 GiB) holds it beside a
	// rank, so a third machine; of 128 GiB, none holds it at all.
	for mem, want := range map[int64]int{56 << 30: 2, 64 << 30: 3, 128 << 30: 0} {
		big := sh
		big.Parts = []Shape{ranks, {CPUMilli: 1000, Memory: mem, Count: 1}}
		big.Memory = max(ranks.Memory, mem)
		in.Demand = []Shape{big}
		out = Plan(in)
		got := 0
		for _, l := range out.Launches {
			got += l.Count
		}
		if got != want {
			t.Fatalf("a launcher of %d GiB: launches %+v (held %+v); want %d machines", mem>>30, out.Launches, out.Held, want)
		}
	}
}
