package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/drover-sched/drover/placement"
)

// Attacks on holds for gangs of several sizes (helper review of 570b25e).

// TestAttackGangHoldSizesInvariants: random busy fleets (GPUs of two
// types) and gangs of several sizes. Pins: no worker has more held than
// it has (sum of HeldOn.Held* over holds); a hold's Held* sum to the
// gang's totals and GangHold's totals are its members' sums; held GPUs
// only on workers of the hold's type; the gang alone starts on its held
// workers once they are idle; two rounds of one input hold the same.
func TestAttackGangHoldSizesInvariants(t *testing.T) {
	holds := 0
	for seed := range 400 {
		rng := rand.New(rand.NewPCG(uint64(seed), 13))
		in := NewInput().Build()
		in.Clusters = nil
		for i := range 2 + rng.IntN(6) {
			cpu := Cores(float64([]int{4, 8, 16}[rng.IntN(3)]))
			mem := []int64{16 * GiB, 64 * GiB}[rng.IntN(2)]
			inst := Instance{ID: uint32(i + 1), CPUMilli: cpu, Memory: mem, FreeMilli: cpu * int64(rng.IntN(3)) / 4, FreeMem: mem * int64(rng.IntN(3)) / 4}
			switch rng.IntN(3) {
			case 0:
				inst.GPUType, inst.GPUs, inst.FreeGPUs = "a100", 4, int64(rng.IntN(2))
			case 1:
				inst.GPUType, inst.GPUs, inst.FreeGPUs = "h100", 8, int64(rng.IntN(2))
			}
			in.Instances = append(in.Instances, inst)
		}
		in.Constraints = []placement.Constraint{{GPUType: "a100"}, {GPUType: "h100"}}
		for u := range 1 + rng.IntN(3) {
			batch := uint64(u + 1)
			typ := int32(1 + rng.IntN(2))
			var runs []Run
			first, ready := uint32(1), int64(0)
			for range 2 + rng.IntN(2) {
				n := uint32(1 + rng.IntN(3))
				r := agsMember(batch, first, n, Cores(float64([]int{0, 1, 2, 4}[rng.IntN(4)])), []int64{0, GiB, 8 * GiB}[rng.IntN(3)], 0, 0)
				if r.CPUMilli == 0 && r.Memory == 0 {
					r.CPUMilli = Cores(1)
				}
				if rng.IntN(2) == 0 {
					r.GPUs, r.Constraint = int64(1+rng.IntN(4)), typ
				}
				first += n
				ready += int64(n) * r.CPUMilli
				runs = append(runs, r)
			}
			in.Users = append(in.Users, User{Name: fmt.Sprint("u", u), ReadyMilli: ready, Runs: runs})
		}
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			out := Schedule(in)
			agsCheck(t, in, out)
			if again := Schedule(in); !reflect.DeepEqual(out.Holds, again.Holds) || !reflect.DeepEqual(out.Placements, again.Placements) {
				t.Fatalf("two rounds differ: holds %+v / %+v", out.Holds, again.Holds)
			}
			byID := map[uint32]Instance{}
			for _, inst := range in.Instances {
				byID[inst.ID] = inst
			}
			held := map[uint32][3]int64{}
			for _, h := range out.Holds {
				holds++
				var runs []Run
				for _, u := range in.Users {
					for _, r := range u.Runs {
						if r.Batch == h.Batch && r.Gang == h.Gang {
							runs = append(runs, r)
						}
					}
				}
				var want, sum [3]int64
				var members int64
				for _, r := range runs {
					n := int64(r.Count)
					members += n
					want[0] += n * r.CPUMilli
					want[1] += n * r.Memory
					want[2] += n * r.GPUs
				}
				if got := [3]int64{h.CPUMilli, h.Memory, h.GPUs}; got != want || h.Members != members {
					t.Fatalf("hold %+v: totals %v of %d members; the gang's are %v of %d", h, got, h.Members, want, members)
				}
				idle := NewInput().Build()
				idle.Clusters, idle.Constraints = nil, in.Constraints
				for _, on := range h.On {
					inst := byID[on.Instance]
					sum[0] += on.HeldMilli
					sum[1] += on.HeldMem
					sum[2] += on.HeldGPUs
					hw := held[on.Instance]
					hw[0] += on.HeldMilli
					hw[1] += on.HeldMem
					hw[2] += on.HeldGPUs
					held[on.Instance] = hw
					if hw[0] > inst.CPUMilli || hw[1] > inst.Memory || hw[2] > inst.GPUs {
						t.Fatalf("instance %d (%d/%d/%d) held %v in all", inst.ID, inst.CPUMilli, inst.Memory, inst.GPUs, hw)
					}
					if on.HeldGPUs > 0 && inst.GPUType != h.GPUType {
						t.Fatalf("hold %+v: %d GPUs held on instance %d of %q", h, on.HeldGPUs, inst.ID, inst.GPUType)
					}
					inst.FreeMilli, inst.FreeMem, inst.FreeGPUs = inst.CPUMilli, inst.Memory, inst.GPUs
					idle.Instances = append(idle.Instances, inst)
				}
				if sum != want {
					t.Fatalf("hold %+v holds %v; the gang asks %v", h, sum, want)
				}
				idle.Users = []User{{Name: "g", ReadyMilli: want[0], Runs: runs}}
				if o := Schedule(idle); int64(o.Jobs) != members {
					t.Fatalf("hold %+v: the gang alone starts %d of %d on its held workers idle (unplaced %+v)", h, o.Jobs, members, o.Unplaced)
				}
			}
		})
	}
	if holds == 0 {
		t.Fatalf("no hold made: the test tests nothing")
	}
	t.Logf("%d holds checked", holds)
}

// TestAttackGangHoldSizesPreemptNeed pins: a launcher without GPUs and two
// ranks of two a100s, held on a 4-GPU worker whose GPUs are all taken and
// 8 of whose 16 cores are free: preemption's demand is the gang's (3
// cores, 3 GiB, 4 GPUs), its need on the worker the 4 GPUs (cores and
// memory free enough: none), what is held now 3 cores and 3 GiB.
func TestAttackGangHoldSizesPreemptNeed(t *testing.T) {
	in := NewInput().Instance(1, Cores(16), 64*GiB).Build()
	in.Instances[0].GPUType, in.Instances[0].GPUs, in.Instances[0].FreeGPUs = "a100", 4, 0
	in.Instances[0].FreeMilli = Cores(8)
	in.Constraints = []placement.Constraint{{GPUType: "a100"}}
	in.Queues = []Queue{{Name: "q", Parent: -1, Weight: 1}}
	runs := []Run{agsMember(1, 1, 1, Cores(1), GiB, 0, 0), agsMember(1, 2, 2, Cores(1), GiB, 2, 1)}
	for i := range runs {
		runs[i].Queue = 1
	}
	in.Users = []User{{Name: "u", Queue: 1, ReadyMilli: Cores(3), Runs: runs}}
	out := Schedule(in)
	if len(out.Holds) != 1 {
		t.Fatalf("holds %+v; want one", out.Holds)
	}
	pin := &PreemptInput{Queues: []PreemptQueue{{Name: "q", Parent: -1}}, GPUTypes: []string{"a100"}}
	pin.AddHolds(out.Holds)
	if len(pin.Holds) != 1 || len(pin.Holds[0].On) != 1 {
		t.Fatalf("preempt holds %+v", pin.Holds)
	}
	ph := pin.Holds[0]
	if !reflect.DeepEqual(ph.Demand, Res{Cores(3), 3 * GiB, 4}) {
		t.Fatalf("demand %v; want 3 cores, 3 GiB, 4 GPUs", ph.Demand)
	}
	on := ph.On[0]
	if on.Need[2] != 4 || on.Need[0] > 0 || on.Need[1] > 0 || on.Free[0] != Cores(3) || on.Free[1] != 3*GiB || on.Free[2] != 0 {
		t.Fatalf("on %+v; want need of 4 GPUs only, 3 cores and 3 GiB held free", on)
	}
}

// TestAttackGangHoldSizesHugeAndZero pins: a gang of 4096 members of no
// cores beside 4096 one-GPU ranks, and a gang of GPU members only, on a
// busy fleet: no panic, every worker's holds within it.
func TestAttackGangHoldSizesHugeAndZero(t *testing.T) {
	b := NewInput()
	for i := 1; i <= 64; i++ {
		b.Instance(uint32(i), Cores(64), 512*GiB)
	}
	in := b.Build()
	for i := range in.Instances {
		in.Instances[i].GPUType, in.Instances[i].GPUs, in.Instances[i].FreeGPUs = "a100", 8, 0
	}
	in.Constraints = []placement.Constraint{{GPUType: "a100"}}
	in.Users = []User{
		{Name: "a", ReadyMilli: Cores(4096), Runs: []Run{agsMember(1, 1, 4096, 0, GiB/16, 0, 0), agsMember(1, 4097, 4096, Cores(1), GiB/16, 1, 1)}},
		{Name: "b", ReadyMilli: 1, Runs: []Run{agsMember(2, 1, 8, 0, 0, 8, 1), agsMember(2, 9, 8, 0, 0, 4, 1)}},
	}
	out := Schedule(in)
	agsCheck(t, in, out)
	held := map[uint32][3]int64{}
	for _, h := range out.Holds {
		for _, on := range h.On {
			x := held[on.Instance]
			x[0], x[1], x[2] = x[0]+on.HeldMilli, x[1]+on.HeldMem, x[2]+on.HeldGPUs
			held[on.Instance] = x
			if x[0] > Cores(64) || x[1] > 512*GiB || x[2] > 8 {
				t.Fatalf("instance %d held %v", on.Instance, x)
			}
		}
	}
	t.Logf("holds: %d", len(out.Holds))
}
