package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/drover-sched/drover/placement"
)

// Attacks on gangs of several sizes (helper review of f36754f).

// agsMember is a gang member run (gang 1 of its batch).
func agsMember(batch uint64, first, n uint32, cpu, mem, gpus int64, constraint int32) Run {
	r := NewRun(batch, first, n, cpu, mem)
	r.Gang, r.GPUs, r.Constraint = 1, gpus, constraint
	return r
}

// agsCheck fails unless: no instance is given more cpu, memory or GPUs
// than it has free; GPUs go only to instances of the type the run's
// constraint asks; each job is placed at most once; each gang is placed
// whole or not at all, in one cluster.
func agsCheck(t *testing.T, in *Input, out *Output) {
	t.Helper()
	type key struct {
		batch uint64
		id    uint32
	}
	runOf := map[key]Run{}
	gangN := map[key]int64{} // batch, gang
	for _, u := range in.Users {
		for _, r := range u.Runs {
			for id := r.First; id < r.First+r.Count; id++ {
				runOf[key{r.Batch, id}] = r
			}
			if r.Gang != 0 {
				gangN[key{r.Batch, r.Gang}] += int64(r.Count)
			}
		}
	}
	byID := map[uint32]*Instance{}
	for i := range in.Instances {
		byID[in.Instances[i].ID] = &in.Instances[i]
	}
	placed := map[key]int{}
	gangGot := map[key]int64{}
	gangClusters := map[key]map[int32]bool{}
	used := map[uint32][3]int64{}
	for _, p := range out.Placements {
		inst := byID[p.Instance]
		if inst == nil {
			t.Fatalf("placement on unknown instance %d", p.Instance)
		}
		for id := p.First; id < p.First+p.Count; id++ {
			k := key{p.Batch, id}
			r, ok := runOf[k]
			if !ok {
				t.Fatalf("placed job %d/%d that is no run's", p.Batch, id)
			}
			if placed[k]++; placed[k] > 1 {
				t.Fatalf("job %d/%d placed twice: %+v", p.Batch, id, out.Placements)
			}
			u := used[p.Instance]
			u[0] += r.CPUMilli
			u[1] += r.Memory
			u[2] += r.GPUs
			used[p.Instance] = u
			if r.GPUs > 0 {
				want := ""
				if r.Constraint > 0 {
					want = in.Constraints[r.Constraint-1].GPUType
				}
				if inst.GPUType != want {
					t.Errorf("job %d/%d needs %d GPUs of %q, placed on instance %d of %q", p.Batch, id, r.GPUs, want, inst.ID, inst.GPUType)
				}
			}
			if r.Gang != 0 {
				g := key{r.Batch, r.Gang}
				gangGot[g]++
				if gangClusters[g] == nil {
					gangClusters[g] = map[int32]bool{}
				}
				gangClusters[g][inst.Cluster] = true
			}
		}
	}
	for id, u := range used {
		inst := byID[id]
		if u[0] > inst.FreeMilli || u[1] > inst.FreeMem || u[2] > inst.FreeGPUs {
			t.Errorf("instance %d given cpu %d mem %d gpus %d; it has %d/%d/%d free", id, u[0], u[1], u[2], inst.FreeMilli, inst.FreeMem, inst.FreeGPUs)
		}
	}
	for g, n := range gangN {
		if got := gangGot[g]; got != 0 && got != n {
			t.Errorf("gang %v: %d of %d members placed", g, got, n)
		}
		if len(gangClusters[g]) > 1 {
			t.Errorf("gang %v over clusters %v", g, gangClusters[g])
		}
	}
}

// TestAttackGangSizesGreedyMissesAPacking: two idle workers of 4 and 6
// cores, a gang of two 3-core ranks and two 2-core helpers (10 cores:
// exactly the fleet). It fits (4: the two helpers; 6: the two ranks).
// Packed the largest part first on the smallest worker, a 3-core rank
// goes on the 4-core one, leaving a core no helper fits, and the last
// helper finds no room: the gang never started on an idle fleet that
// holds it (found by review). The second packing, the smallest part
// first, finds it.
func TestAttackGangSizesGreedyMissesAPacking(t *testing.T) {
	in := NewInput().Instance(1, Cores(4), 32*GiB).Instance(2, Cores(6), 32*GiB).Build()
	runs := []Run{agsMember(1, 1, 2, Cores(3), GiB, 0, 0), agsMember(1, 3, 2, Cores(2), GiB, 0, 0)}
	in.Users = []User{{Name: "u", ReadyMilli: Cores(10), Runs: runs}}
	out := Schedule(in)
	agsCheck(t, in, out)
	if out.Jobs != 4 {
		t.Fatalf("placed %d of 4 members on an idle fleet that holds them (4 cores: 2+2, 6 cores: 3+3); unplaced %+v", out.Jobs, out.Unplaced)
	}
}

// TestAttackGangSizesHoldWithLauncherWithoutGPUs: a gang of a launcher
// without GPUs (no constraint: the view gives a spec without GPUs, pool
// or labels constraint 0) and two ranks of two a100s each, behind a
// worker whose GPUs are all taken. Listed ranks first, room is held for
// it; listed launcher first (as a job group lists it: the launcher is job
// 1) it must be held too. gangShape took the first run's constraint with
// the largest GPU count, and a constraint with no GPU type holds no GPUs
// of a type: no hold, and the gang could starve behind GPU jobs (found by
// review; it now takes the constraint of its member with the most GPUs).
func TestAttackGangSizesHoldWithLauncherWithoutGPUs(t *testing.T) {
	for _, launcherFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("launcherFirst=", launcherFirst), func(t *testing.T) {
			in := NewInput().Instance(1, Cores(16), 64*GiB).Build()
			// 8 GPUs: room for the ranks' 4 (and for three members
			// counted as the largest, as holds once counted them).
			in.Instances[0].GPUType, in.Instances[0].GPUs, in.Instances[0].FreeGPUs = "a100", 8, 0
			in.Instances[0].FreeMilli = Cores(8)
			in.Constraints = []placement.Constraint{{GPUType: "a100"}}
			var runs []Run
			if launcherFirst {
				runs = []Run{agsMember(1, 1, 1, Cores(1), GiB, 0, 0), agsMember(1, 2, 2, Cores(1), GiB, 2, 1)}
			} else {
				runs = []Run{agsMember(1, 1, 2, Cores(1), GiB, 2, 1), agsMember(1, 3, 1, Cores(1), GiB, 0, 0)}
			}
			in.Users = []User{{Name: "u", ReadyMilli: Cores(3), Runs: runs}}
			out := Schedule(in)
			agsCheck(t, in, out)
			if out.Jobs != 0 {
				t.Fatalf("placed %d with no GPU free", out.Jobs)
			}
			if len(out.Holds) != 1 {
				t.Fatalf("holds %+v; want room held for the gang on the a100 worker (unplaced %+v)", out.Holds, out.Unplaced)
			}
			if h := out.Holds[0]; h.GPUType != "a100" || h.GPUs != 4 || len(h.On) != 1 || h.On[0].HeldGPUs != 4 {
				t.Fatalf("hold %+v; want the ranks' 4 a100s held", h)
			}
		})
	}
}

// TestAttackGangSizesHeldRoomOfAnotherGPUType: the launcher (listed
// first) carries another GPU type in its constraint though it asks for no
// GPUs (the state lets a member without GPUs name any type). The hold,
// made in the first run's constraint with the largest GPU count, lands on
// the h100 worker; the gang then finds no a100 free and is placed on the
// held workers by heldTakes, which checked no GPU type (found by review;
// it now checks each part's): ranks that need a100s must never run on
// h100s.
func TestAttackGangSizesHeldRoomOfAnotherGPUType(t *testing.T) {
	in := NewInput().Instance(1, Cores(16), 64*GiB).Instance(2, Cores(16), 64*GiB).Build()
	in.Instances[0].GPUType, in.Instances[0].GPUs, in.Instances[0].FreeGPUs = "a100", 4, 0
	in.Instances[1].GPUType, in.Instances[1].GPUs, in.Instances[1].FreeGPUs = "h100", 8, 8
	in.Constraints = []placement.Constraint{{GPUType: "a100"}, {GPUType: "h100"}}
	runs := []Run{agsMember(1, 1, 1, Cores(1), GiB, 0, 2), agsMember(1, 2, 2, Cores(1), GiB, 2, 1)}
	in.Users = []User{{Name: "u", ReadyMilli: Cores(3), Runs: runs}}
	out := Schedule(in)
	agsCheck(t, in, out)
	if out.Jobs != 0 {
		t.Fatalf("placed %+v with no a100 free", out.Placements)
	}
}

// TestAttackGangSizesInterleavedRuns pins: a gang whose runs alternate
// sizes (rank, launcher, rank) places each job once, each on room of its
// own size, whole.
func TestAttackGangSizesInterleavedRuns(t *testing.T) {
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).Instance(3, Cores(3), 32*GiB).Build()
	runs := []Run{
		agsMember(1, 1, 1, Cores(8), GiB, 0, 0),
		agsMember(1, 2, 1, Cores(2), 20*GiB, 0, 0),
		agsMember(1, 3, 1, Cores(8), GiB, 0, 0),
		agsMember(1, 4, 1, Cores(1), GiB, 0, 0),
	}
	in.Users = []User{{Name: "u", ReadyMilli: Cores(19), Runs: runs}}
	out := Schedule(in)
	agsCheck(t, in, out)
	if out.Jobs != 4 {
		t.Fatalf("placed %d of 4 (unplaced %+v)", out.Jobs, out.Unplaced)
	}
}

// TestAttackGangSizesZeroSizedParts pins: members of no cpu, or no
// memory, beside others place without a panic and within the room.
func TestAttackGangSizesZeroSizedParts(t *testing.T) {
	in := NewInput().Instance(1, Cores(4), 8*GiB).Instance(2, Cores(4), 8*GiB).Build()
	runs := []Run{
		agsMember(1, 1, 3, 0, GiB, 0, 0),
		agsMember(1, 4, 2, Cores(3), 0, 0, 0),
		agsMember(1, 6, 1, Cores(1), 4*GiB, 0, 0),
	}
	in.Users = []User{{Name: "u", ReadyMilli: Cores(7), Runs: runs}}
	out := Schedule(in)
	agsCheck(t, in, out)
	if out.Jobs != 6 {
		t.Fatalf("placed %d of 6 (unplaced %+v)", out.Jobs, out.Unplaced)
	}
}

// TestAttackGangSizesFailureMemo pins: a gang of several sizes that fits
// nowhere does not make a later gang of other parts (same first run's
// size) fail by the round's memo of failures.
func TestAttackGangSizesFailureMemo(t *testing.T) {
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).Build()
	big := []Run{agsMember(1, 1, 1, Cores(2), GiB, 0, 0), agsMember(1, 2, 3, Cores(6), GiB, 0, 0)}
	small := []Run{agsMember(2, 1, 1, Cores(2), GiB, 0, 0), agsMember(2, 2, 2, Cores(6), GiB, 0, 0)}
	in.Users = []User{{Name: "a", ReadyMilli: Cores(20), Runs: big}, {Name: "b", ReadyMilli: Cores(14), Runs: small}}
	out := Schedule(in)
	agsCheck(t, in, out)
	if out.Jobs != 3 {
		t.Fatalf("placed %d; want the 3 members of the gang that fits (unplaced %+v)", out.Jobs, out.Unplaced)
	}
}

// TestAttackGangSizesFuzz: random fleets (GPUs of two types, pools,
// labels, two clusters) and gangs of several sizes (members without
// cpu, memory or GPUs; GPUs on some members only), with holds and
// queues: never an overcommitted worker, a GPU of the wrong type, a
// partial gang, a panic; the same output for the same input.
func TestAttackGangSizesFuzz(t *testing.T) {
	for seed := range 400 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		in := NewInput().Build()
		in.Clusters = nil
		nInst := 1 + rng.IntN(8)
		for i := range nInst {
			cpu := Cores(float64([]int{2, 4, 8, 16}[rng.IntN(4)]))
			mem := []int64{4 * GiB, 16 * GiB, 64 * GiB}[rng.IntN(3)]
			inst := Instance{ID: uint32(i + 1), CPUMilli: cpu, Memory: mem, FreeMilli: cpu * int64(rng.IntN(5)) / 4, FreeMem: mem * int64(rng.IntN(5)) / 4}
			inst.Pool = []string{"p1", "p2"}[rng.IntN(2)]
			inst.Labels = map[string]string{"rack": fmt.Sprint("r", rng.IntN(2))}
			switch rng.IntN(3) {
			case 0:
				inst.GPUType, inst.GPUs = "a100", 4
				inst.FreeGPUs = int64(rng.IntN(5))
			case 1:
				inst.GPUType, inst.GPUs = "h100", 8
				inst.FreeGPUs = int64(rng.IntN(9))
			}
			in.Instances = append(in.Instances, inst)
		}
		in.Constraints = []placement.Constraint{{GPUType: "a100"}, {GPUType: "h100"}}
		batch := uint64(1)
		for u := range 1 + rng.IntN(3) {
			var runs []Run
			ready := int64(0)
			for range 1 + rng.IntN(2) {
				typ := int32(1 + rng.IntN(2))
				uniform := []string{"", "", "pool", "label:rack"}[rng.IntN(4)]
				first := uint32(1)
				for range 1 + rng.IntN(3) {
					cpu := Cores(float64([]int{0, 1, 2, 4, 8}[rng.IntN(5)]))
					mem := []int64{0, GiB, 4 * GiB, 16 * GiB}[rng.IntN(4)]
					if cpu == 0 && mem == 0 {
						mem = GiB
					}
					n := uint32(1 + rng.IntN(4))
					r := agsMember(batch, first, n, cpu, mem, 0, 0)
					r.GangUniform = uniform
					if rng.IntN(3) == 0 {
						r.GPUs, r.Constraint = int64(1+rng.IntN(2)), typ
					}
					first += n
					ready += int64(n) * cpu
					runs = append(runs, r)
				}
				batch++
			}
			if rng.IntN(2) == 0 {
				runs = append(runs, NewRun(batch, 1, uint32(1+rng.IntN(10)), Cores(1), GiB))
				ready += int64(runs[len(runs)-1].Count) * Cores(1)
				batch++
			}
			in.Users = append(in.Users, User{Name: fmt.Sprint("u", u), ReadyMilli: ready, Runs: runs})
		}
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			out := Schedule(in)
			agsCheck(t, in, out)
			again := Schedule(in)
			if !reflect.DeepEqual(out.Placements, again.Placements) {
				t.Fatalf("two rounds of one input differ:\n%+v\n%+v", out.Placements, again.Placements)
			}
		})
	}
}

// TestAttackGangSizesOneLabelValue pins: a gang of a 2-core launcher and
// two 8-core ranks asking one rack starts in the rack that holds all of
// it (r1: a 2-core and two 8-core workers), never split with r2 (an
// 8-core worker met first by the smallest-first walk), and waits whole
// when no rack holds it.
func TestAttackGangSizesOneLabelValue(t *testing.T) {
	for _, holds := range []bool{true, false} {
		in := NewInput().Instance(1, Cores(2), 8*GiB).Instance(2, Cores(8), 32*GiB).Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
		racks := []string{"r1", "r2", "r1", "r1"}
		if !holds {
			racks[3] = "r2"
		}
		for i := range in.Instances {
			in.Instances[i].Labels = map[string]string{"rack": racks[i]}
		}
		runs := []Run{agsMember(1, 1, 1, Cores(2), GiB, 0, 0), agsMember(1, 2, 2, Cores(8), GiB, 0, 0)}
		for i := range runs {
			runs[i].GangUniform = "label:rack"
		}
		in.Users = []User{{Name: "u", ReadyMilli: Cores(18), Runs: runs}}
		out := Schedule(in)
		agsCheck(t, in, out)
		seen := map[string]bool{}
		for _, p := range out.Placements {
			seen[racks[p.Instance-1]] = true
		}
		if holds && (out.Jobs != 3 || len(seen) != 1 || !seen["r1"]) {
			t.Fatalf("placed %d over racks %v: %+v", out.Jobs, seen, out.Placements)
		}
		if !holds && out.Jobs != 0 {
			t.Fatalf("no rack holds it: placed %+v", out.Placements)
		}
	}
}

// TestAttackGangSizesHoldCountsEachMembersGPUs: two ranks of two a100s
// and a launcher without GPUs need 4 GPUs: the whole of a 4-GPU worker,
// busy now. Holds counted every member as the largest (2 GPUs each: 6),
// more than the worker has, so room was never held for it and a stream
// of GPU jobs could starve it (found by review). Holds now pack the
// members by their own sizes: the worker is held, its 4 GPUs and the
// members' 3 cores.
func TestAttackGangSizesHoldCountsEachMembersGPUs(t *testing.T) {
	in := NewInput().Instance(1, Cores(16), 64*GiB).Build()
	in.Instances[0].GPUType, in.Instances[0].GPUs, in.Instances[0].FreeGPUs = "a100", 4, 0
	in.Instances[0].FreeMilli = Cores(8)
	in.Constraints = []placement.Constraint{{GPUType: "a100"}}
	runs := []Run{agsMember(1, 1, 1, Cores(1), GiB, 0, 0), agsMember(1, 2, 2, Cores(1), GiB, 2, 1)}
	in.Users = []User{{Name: "u", ReadyMilli: Cores(3), Runs: runs}}
	out := Schedule(in)
	agsCheck(t, in, out)
	if len(out.Holds) != 1 || len(out.Holds[0].On) != 1 {
		t.Fatalf("holds %+v; want room held on the one worker that holds the gang once drained", out.Holds)
	}
	if on := out.Holds[0].On[0]; on.HeldGPUs != 4 || on.HeldMilli != Cores(3) || on.HeldMem != 3*GiB {
		t.Fatalf("held %+v; want 4 GPUs, 3 cores and 3 GiB", on)
	}
}
