package scheduler

import (
	"github.com/drover-sched/drover/placement"

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

// TestGangOfSeveralSizes: a job group's gang holds members of several
// sizes (a launcher beside its ranks). They are packed by their own
// sizes, the largest first: all start when the room holds them, none
// when it does not, and no worker gets more than it has.
func TestGangOfSeveralSizes(t *testing.T) {
	member := func(first, n uint32, cpu, mem int64) Run {
		r := NewRun(1, first, n, cpu, mem)
		r.Gang = 1
		return r
	}
	for _, c := range []struct {
		name  string
		runs  []Run
		fits  bool
		total int64
	}{
		// A small launcher first: room counted in launchers is not
		// room for ranks of 6 cores (three on three 8-core workers).
		{"small launcher, large ranks", []Run{member(1, 1, Cores(2), 16*GiB), member(2, 3, Cores(6), 8*GiB)}, true, 4},
		// A launcher of a whole worker and ranks of half of one: only
		// packed largest first do the three workers hold them.
		{"large launcher", []Run{member(1, 1, Cores(8), 8*GiB), member(2, 4, Cores(4), 8*GiB)}, true, 5},
		// Memory is the launcher's limit: it fits no worker beside a
		// rank, and three ranks take a worker each.
		{"launcher of much memory", []Run{member(1, 1, Cores(1), 30*GiB), member(2, 3, Cores(5), 8*GiB)}, false, 4},
		{"one core too many", []Run{member(1, 1, Cores(1), GiB), member(2, 4, Cores(6), 8*GiB)}, false, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).Instance(3, Cores(8), 32*GiB).Build()
			in.Users = []User{{Name: "u", ReadyMilli: Cores(24), Runs: c.runs}}
			out := Schedule(in)
			size := map[uint32]Run{}
			for _, r := range c.runs {
				for id := r.First; id < r.First+r.Count; id++ {
					size[id] = r
				}
			}
			cpu, mem := map[uint32]int64{}, map[uint32]int64{}
			for _, pl := range out.Placements {
				for id := pl.First; id < pl.First+pl.Count; id++ {
					cpu[pl.Instance] += size[id].CPUMilli
					mem[pl.Instance] += size[id].Memory
				}
			}
			for inst := range cpu {
				if cpu[inst] > Cores(8) || mem[inst] > 32*GiB {
					t.Errorf("worker %d got %d millicores and %d GiB, more than its 8 cores and 32 GiB: %+v", inst, cpu[inst], mem[inst]/GiB, out.Placements)
				}
			}
			if !c.fits {
				if out.Jobs != 0 {
					t.Fatalf("placed %d members of a gang that does not fit: %+v", out.Jobs, out.Placements)
				}
				if len(out.Unplaced) == 0 || out.Unplaced[0].Why.Quota != ReasonGang || out.Unplaced[0].Why.Gang != c.total {
					t.Fatalf("unplaced %+v; want the gang of %d waiting for room", out.Unplaced, c.total)
				}
				return
			}
			if int64(out.Jobs) != c.total {
				t.Fatalf("placed %d of %d members: %+v (unplaced %+v)", out.Jobs, c.total, out.Placements, out.Unplaced)
			}
		})
	}
}

// TestGangOfSeveralSizesWithinQuota: a queue's quota counts a gang of
// several sizes by the sum of its members; the reason it waits names the
// limit the sum passes, though each size alone is within it.
func TestGangOfSeveralSizesWithinQuota(t *testing.T) {
	for _, c := range []struct {
		name      string
		launcher  int64
		placed    int
		wantQuota Reason
	}{
		{"within", Cores(2), 5, 0},
		{"the sum past the cpu quota", Cores(4), 0, ReasonQuotaCPU},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := twoRegions()
			in.Queues = []Queue{
				{Name: "root", Parent: -1, Weight: 1},
				{Name: "root/leaf", Parent: 0, Weight: 1, Quota: placement.Quota{CPUMilli: Cores(10)}},
			}
			for i := range in.Queues {
				in.Queues[i].Quota.UsedByCluster = []int64{0, 0}
			}
			l := NewRun(1, 1, 1, c.launcher, GiB)
			r := NewRun(1, 2, 4, Cores(2), GiB)
			l.Gang, r.Gang, l.Queue, r.Queue = 1, 1, 2, 2
			in.Users = []User{{Name: "u", Queue: 2, ReadyMilli: Cores(12), Runs: []Run{l, r}}}
			out := Schedule(in)
			if out.Jobs != c.placed {
				t.Fatalf("placed %d, want %d (unplaced %+v)", out.Jobs, c.placed, out.Unplaced)
			}
			if c.placed == 0 {
				if len(out.Unplaced) == 0 || out.Unplaced[0].Why.Quota != c.wantQuota || out.Unplaced[0].Why.Queue != "root/leaf" {
					t.Fatalf("why %+v, want %s of root/leaf", out.Unplaced, c.wantQuota)
				}
			}
		})
	}
}
