package scheduler

import (
	"testing"
)

func gangRuns(batch uint64, first uint32, parts ...uint32) []Run {
	var out []Run
	for _, n := range parts {
		r := NewRun(batch, first, n, Cores(1), GiB)
		r.Gang = 1
		out = append(out, r)
		first += n
	}
	return out
}

// TestGangStartsWholeInOneCluster: a gang of 12 one-core members, split
// over two runs, starts whole in one cluster when one has room for it,
// never spread over two, and not at all when none has: then the round
// places what fits behind it, and says how many members the roomiest
// cluster could take.
func TestGangStartsWholeInOneCluster(t *testing.T) {
	// Clusters a and b, 16 cores each, a half full: only b has room
	// for 12 (a has 8; the two together would have 24).
	in := twoRegions()
	in.Instances[0].FreeMilli = 0
	in.Clusters[0].FreeMilli -= Cores(8)
	in.Users = []User{{Name: "u", ReadyMilli: Cores(12), Runs: gangRuns(1, 1, 5, 7)}}
	out := Schedule(in)
	if got := placedOn(out, in); got["b"] != 12 || got["a"] != 0 || out.Jobs != 12 {
		t.Fatalf("placed %v (%d jobs); want all 12 in b", got, out.Jobs)
	}
	// Members 1-12 each once.
	seen := map[uint32]int{}
	for _, p := range out.Placements {
		for id := p.First; id < p.First+p.Count; id++ {
			seen[id]++
		}
	}
	for id := uint32(1); id <= 12; id++ {
		if seen[id] != 1 {
			t.Fatalf("member %d placed %d times: %+v", id, seen[id], out.Placements)
		}
	}

	// A gang of 20 fits no cluster: nothing of it starts; a plain run
	// behind it takes the room; why names the gang and the most room.
	in = twoRegions()
	runs := gangRuns(1, 1, 20)
	runs = append(runs, NewRun(2, 1, 3, Cores(1), GiB))
	in.Users = []User{{Name: "u", ReadyMilli: Cores(23), Runs: runs}}
	out = Schedule(in)
	if out.Jobs != 3 {
		t.Fatalf("placed %d jobs (%+v); want only the 3 plain ones", out.Jobs, out.Placements)
	}
	for _, p := range out.Placements {
		if p.Batch == 1 {
			t.Fatalf("a member of the gang that fits nowhere was placed: %+v", p)
		}
	}
	if len(out.Unplaced) != 1 || out.Unplaced[0].Why.Quota != ReasonGang || out.Unplaced[0].Why.Gang != 20 || out.Unplaced[0].Why.GangRoom != 16 {
		t.Fatalf("unplaced %+v; want the gang, 20 members, room for 16", out.Unplaced)
	}
}

// TestGangUniformity: a gang that asks for one pool, or one value of a
// label, starts within one, though the cluster as a whole has room.
func TestGangUniformity(t *testing.T) {
	in := NewInput().
		Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).Instance(3, Cores(8), 32*GiB).Build()
	in.Instances[0].Pool, in.Instances[1].Pool, in.Instances[2].Pool = "p1", "p2", "p2"
	in.Instances[0].Labels = map[string]string{"rack": "r1"}
	in.Instances[1].Labels = map[string]string{"rack": "r2"}
	in.Instances[2].Labels = map[string]string{"rack": "r1"}
	for _, c := range []struct {
		uniform string
		n       uint32
		want    int
	}{
		{"", 24, 24},
		{"pool", 16, 16},
		{"pool", 17, 0},
		{"label:rack", 16, 16},
		{"label:rack", 17, 0},
		{"label:zone", 1, 0}, // no worker carries it
	} {
		in.Users = []User{{Name: "u", ReadyMilli: Cores(float64(c.n)), Runs: gangRuns(1, 1, c.n)}}
		for i := range in.Users[0].Runs {
			in.Users[0].Runs[i].GangUniform = c.uniform
		}
		out := Schedule(in)
		if out.Jobs != c.want {
			t.Fatalf("%q gang of %d: placed %d, want %d", c.uniform, c.n, out.Jobs, c.want)
		}
		if c.want == 0 {
			continue
		}
		pools, racks := map[string]bool{}, map[string]bool{}
		for _, p := range out.Placements {
			inst := in.Instances[p.Instance-1]
			pools[inst.Pool], racks[inst.Labels["rack"]] = true, true
		}
		if (c.uniform == "pool" && len(pools) != 1) || (c.uniform == "label:rack" && len(racks) != 1) {
			t.Fatalf("%q gang spread over pools %v, racks %v", c.uniform, pools, racks)
		}
	}
}

// TestGangWithinTheRoundsBound: a gang larger than what the round may
// still place waits for the next round whole, and is not listed as
// fitting nowhere.
func TestGangWithinTheRoundsBound(t *testing.T) {
	in := twoRegions()
	in.MaxPlacements = 10
	in.Users = []User{{Name: "u", ReadyMilli: Cores(12), Runs: gangRuns(1, 1, 12)}}
	out := Schedule(in)
	if out.Jobs != 0 || len(out.Unplaced) != 0 {
		t.Fatalf("placed %d, unplaced %+v; want nothing this round", out.Jobs, out.Unplaced)
	}
}
