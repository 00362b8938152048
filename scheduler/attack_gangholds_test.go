package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/drover-sched/drover/placement"
)

// Attacks on the room held for gangs first in line (gang.go: holdForGangs,
// reachGang, chooseHold, hold, heldTakes, heldAtEnd) and on preemption's
// use of it (preempt.go: AddHolds, Preempt's take). Helper review.

// ahGang is a gang of n members of one size in queue q (1+index; 0: none).
func ahGang(batch uint64, n uint32, cpu, mem int64, q int32) Run {
	r := NewRun(batch, 1, n, cpu, mem)
	r.Gang, r.Queue = 1, q
	return r
}

// ahPlaced sums, per instance, what the round's placements take of cores,
// memory and GPUs (sizes read from the input's runs).
func ahPlaced(in *Input, out *Output) map[uint32][3]int64 {
	type key struct {
		batch uint64
		id    uint32
	}
	size := map[key][3]int64{}
	for _, u := range in.Users {
		for _, r := range u.Runs {
			for id := r.First; id < r.First+r.Count; id++ {
				size[key{r.Batch, id}] = [3]int64{r.CPUMilli, r.Memory, r.GPUs}
			}
		}
	}
	used := map[uint32][3]int64{}
	for _, p := range out.Placements {
		u := used[p.Instance]
		for id := p.First; id < p.First+p.Count; id++ {
			s := size[key{p.Batch, id}]
			for k := range u {
				u[k] += s[k]
			}
		}
		used[p.Instance] = u
	}
	return used
}

// ahCheck fails when a placement takes more than an instance has free (in
// cores, memory or GPUs), when a gang is placed in part, or when a hold
// the round reports says an instance has free other than what it has.
func ahCheck(t *testing.T, in *Input, out *Output) {
	t.Helper()
	agCheckWhole(t, in, out)
	used := ahPlaced(in, out)
	byID := map[uint32]*Instance{}
	for i := range in.Instances {
		byID[in.Instances[i].ID] = &in.Instances[i]
	}
	for id, u := range used {
		inst := byID[id]
		if u[0] > inst.FreeMilli || u[1] > inst.FreeMem || u[2] > inst.FreeGPUs {
			t.Fatalf("instance %d given %v (cpu, mem, gpus); it has %d, %d, %d free", id, u, inst.FreeMilli, inst.FreeMem, inst.FreeGPUs)
		}
	}
	// A worker's free room counts once: each hold on it in Holds' order
	// sees what the holds before it did not count.
	counted := map[uint32][3]int64{}
	for _, h := range out.Holds {
		for _, on := range h.On {
			inst, u, c := byID[on.Instance], used[on.Instance], counted[on.Instance]
			want := [3]int64{max(inst.FreeMilli-u[0]-c[0], 0), max(inst.FreeMem-u[1]-c[1], 0), max(inst.FreeGPUs-u[2]-c[2], 0)}
			counted[on.Instance] = [3]int64{c[0] + min(want[0], on.HeldMilli), c[1] + min(want[1], on.HeldMem), c[2] + min(want[2], on.HeldGPUs)}
			if got := [3]int64{on.FreeMilli, on.FreeMem, on.FreeGPUs}; got != want {
				t.Fatalf("hold of batch %d on instance %d says %v free; the round left %v, less what holds before it counted", h.Batch, on.Instance, got, want)
			}
			if on.HeldMilli <= 0 && on.HeldMem <= 0 && on.HeldGPUs <= 0 {
				t.Fatalf("hold of batch %d on instance %d holds nothing: %+v", h.Batch, on.Instance, on)
			}
		}
	}
}

// ahQueueUse is the cores the round placed in each queue (1+index).
func ahQueueUse(in *Input, out *Output) map[int32]int64 {
	q := map[uint64]int32{}
	cpu := map[uint64]int64{}
	for _, u := range in.Users {
		for _, r := range u.Runs {
			q[r.Batch], cpu[r.Batch] = r.Queue, r.CPUMilli
		}
	}
	use := map[int32]int64{}
	for _, p := range out.Placements {
		use[q[p.Batch]] += int64(p.Count) * cpu[p.Batch]
	}
	return use
}

// TestAttackHoldPlacesGangPastItsQueueQuota: the hold is made when the
// gang's queue's quota admits it; other users of the same queue then
// place (on workers not held) and use the quota up. The gang, refused for
// the quota in the filling pass, does not start on its held workers
// either (heldTakes is tried only for a gang refused for room), nor are
// they held again. Was: 32 cores placed under a 24-core quota.
func TestAttackHoldPlacesGangPastItsQueueQuota(t *testing.T) {
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).
		Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
	in.Queues = []Queue{
		{Name: "root", Parent: -1, Weight: 1},
		{Name: "root/q", Parent: 0, Weight: 1, Quota: placement.Quota{CPUMilli: Cores(24), UsedByCluster: []int64{0}}},
	}
	in.Queues[0].Quota.UsedByCluster = []int64{0}
	stream := NewRun(2, 1, 100, Cores(1), GiB)
	stream.Queue = 2
	in.Users = []User{
		{Name: "a", Queue: 2, ReadyMilli: Cores(24), Runs: []Run{ahGang(1, 3, Cores(8), GiB, 2)}},
		{Name: "b", Queue: 2, ReadyMilli: Cores(100), Runs: []Run{stream}},
	}
	out := Schedule(in)
	ahCheck(t, in, out)
	if use := ahQueueUse(in, out)[2]; use > Cores(24) {
		t.Fatalf("queue root/q placed %d millicores under a quota of %d (placements %+v)", use, Cores(24), out.Placements)
	}
}

// TestAttackHoldFullFleetHoldsNothing: a round over a fleet with no core
// free places nothing, but still holds room for the gang first in line
// (Output.Holds), so the preemption round that follows frees the gang's
// queue's claim on the held workers. Was: the round returned before
// holding, and the claim's 16 one-core victims were spread over the 4
// workers, 4 on each, where no 8-core member can start.
func TestAttackHoldFullFleetHoldsNothing(t *testing.T) {
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).
		Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
	for i := range in.Instances {
		in.Instances[i].FreeMilli, in.Instances[i].FreeMem = 0, 24*GiB
	}
	in.Queues = []Queue{
		{Name: "mpi", Parent: -1, Weight: 1, Guarantee: placement.Resources{CPUMilli: Cores(16)}},
		{Name: "stream", Parent: -1, Weight: 1},
	}
	for i := range in.Queues {
		in.Queues[i].Quota.UsedByCluster = []int64{0}
	}
	in.Queues[1].Quota.UsedMilli = Cores(32)
	stream := NewRun(2, 100, 100, Cores(1), GiB)
	stream.Queue = 2
	in.Users = []User{
		{Name: "carol", Queue: 1, ReadyMilli: Cores(16), Runs: []Run{ahGang(1, 2, Cores(8), 8*GiB, 1)}},
		{Name: "dave", Queue: 2, RunningMilli: Cores(32), ReadyMilli: Cores(100), Runs: []Run{stream}},
	}
	out := Schedule(in)
	ahCheck(t, in, out)
	pin := gangReclaim()
	pin.AddHolds(out.Holds)
	pout := Preempt(pin)
	on := map[uint32]int{}
	for _, v := range pout.Victims {
		on[v.Instance]++
	}
	if len(out.Holds) != 1 || len(on) > 2 {
		t.Fatalf("a full fleet: holds %+v; the preemption that follows stops attempts on %d workers (%v), where a member needs a whole one", out.Holds, len(on), on)
	}
}

// TestAttackHoldOnWorkersPreemptionMayNotFree: the gang's workers are
// chosen by the room they have now (chooseHold), blind to whose attempts
// run there. Held on workers of a queue within its guarantee, what the
// held workers may not give is claimed anywhere (the general part of the
// claim). Was: the claim freed nothing, and the queue owed 16 cores
// waited for the guaranteed queue's jobs to end.
func TestAttackHoldOnWorkersPreemptionMayNotFree(t *testing.T) {
	now := 100 * minute
	// Workers 1 and 2 run 7 one-core attempts each of queue keep (within
	// its guarantee of 14), 3 and 4 eight each of the borrower stream.
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).
		Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
	in.Instances[0].FreeMilli, in.Instances[1].FreeMilli = Cores(1), Cores(1)
	in.Instances[2].FreeMilli, in.Instances[3].FreeMilli = 0, 0
	for i := range in.Instances {
		in.Instances[i].FreeMem = 16 * GiB
	}
	in.Users = []User{{Name: "carol", Queue: 1, ReadyMilli: Cores(16), Runs: []Run{ahGang(1, 2, Cores(8), GiB, 1)}}}
	in.Queues = []Queue{
		{Name: "mpi", Parent: -1, Weight: 1},
		{Name: "keep", Parent: -1, Weight: 1},
		{Name: "stream", Parent: -1, Weight: 1},
	}
	for i := range in.Queues {
		in.Queues[i].Quota.UsedByCluster = []int64{0}
	}
	out := Schedule(in)
	ahCheck(t, in, out)
	if len(out.Holds) != 1 {
		t.Fatalf("holds %+v; want the gang's", out.Holds)
	}
	held := map[uint32]bool{}
	for _, on := range out.Holds[0].On {
		held[on.Instance] = true
	}
	t.Logf("held on %v", held)

	pin := &PreemptInput{Now: now, Capacity: Res{32_000, 128 << 30}, Free: Res{2000, 64 << 30},
		Queues: []PreemptQueue{
			{Name: "mpi", Parent: -1, Guarantee: Res{16_000}, Waiting: Res{16_000, 2 << 30}, ShortSince: now - 2*minute, ReclaimGraceNs: minute},
			{Name: "keep", Parent: -1, Guarantee: Res{14_000}, Used: Res{14_000, 14 << 30}},
			{Name: "stream", Parent: -1, Used: Res{16_000, 16 << 30}, Preemptible: true},
		}}
	keep := fullOf(2, 2, 14, now, 0)
	for i := range keep {
		keep[i].Instance, keep[i].Memory = uint32(1+i/7), 1<<30
	}
	stream := fullOf(3, 3, 16, now, 0)
	for i := range stream {
		stream[i].Instance, stream[i].Memory = uint32(3+i/8), 1<<30
	}
	pin.Attempts = append(keep, stream...)
	without := Preempt(pin)
	pin.AddHolds(out.Holds)
	with := Preempt(pin)
	t.Logf("victims without holds: %d; with: %d", len(without.Victims), len(with.Victims))
	if len(without.Victims) == 0 {
		t.Fatal("the test's claim frees nothing even without holds")
	}
	if len(with.Victims) == 0 {
		t.Fatalf("with the gang held on workers %v of a queue within its guarantee, its queue's claim of 14 cores frees nothing (without the hold: %d attempts of the borrower)", held, len(without.Victims))
	}
}

// TestAttackHoldRefusedByItsOwnHold: the filling pass keeps the idle
// guarantee a queue does not lend (keeps), counting what is free from the
// trees, where held room is not: a hold given back (or made) in that pass
// moves keeps.free, so a gang that fits in what the guarantee leaves
// starts. Was: refused by its own hold every round.
func TestAttackHoldRefusedByItsOwnHold(t *testing.T) {
	zero := int64(0)
	build := func() *Input {
		in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).
			Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
		in.Instances[0].Labels = map[string]string{"x": "1"}
		in.Queues = []Queue{
			{Name: "root", Parent: -1, Weight: 1},
			{Name: "root/a", Parent: 0, Weight: 1},
			{Name: "root/b", Parent: 0, Weight: 1, Guarantee: placement.Resources{CPUMilli: Cores(8)}, Lend: placement.Limit{CPUMilli: &zero}},
		}
		for i := range in.Queues {
			in.Queues[i].Quota.UsedByCluster = []int64{0}
		}
		in.Constraints = []placement.Constraint{{Labels: []string{"x=1"}}}
		// v's jobs fit worker 1 alone; u runs 20 cores elsewhere, so
		// fair share serves v first and gives u little of the round.
		stream := NewRun(2, 1, 100, Cores(1), GiB)
		stream.Queue, stream.Constraint = 2, 1
		in.Users = []User{
			{Name: "v", Queue: 2, ReadyMilli: Cores(100), Runs: []Run{stream}},
			{Name: "u", Queue: 2, RunningMilli: Cores(20), ReadyMilli: Cores(16), Runs: []Run{ahGang(1, 2, Cores(8), GiB, 2)}},
		}
		return in
	}
	gangPlaced := func(out *Output) bool {
		return slices.ContainsFunc(out.Placements, func(p Placement) bool { return p.Batch == 1 })
	}
	defer func(n int) { maxGangHolds = n }(maxGangHolds)
	maxGangHolds = 0
	in := build()
	out := Schedule(in)
	ahCheck(t, in, out)
	if !gangPlaced(out) {
		t.Fatalf("without holds the gang does not start either (%+v); the test means it to", out.Unplaced)
	}
	maxGangHolds = 8
	in = build()
	out = Schedule(in)
	ahCheck(t, in, out)
	if !gangPlaced(out) {
		t.Fatalf("with holds the gang (16 cores; 24 free beside the 8 queue b keeps) waits: holds %+v, why %+v", out.Holds, out.Unplaced)
	}
}

// TestAttackHoldSlotsSpentOnGangsThatHoldNothing: gangs no room would
// start (larger than any cluster, or refused by their quota) do not use
// up the holds: each user is tried once (all its priorities one user),
// up to maxGangHoldTries, and maxGangHolds counts holds made. Was: one
// user with work at 8 priorities took all 8 slots, and a gang after them
// starved beside a stream. (32 users ahead with such gangs still take
// every try.)
func TestAttackHoldSlotsSpentOnGangsThatHoldNothing(t *testing.T) {
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).Build()
	in.Instances[0].FreeMilli, in.Instances[1].FreeMilli = Cores(4), Cores(4)
	var users []User
	for p := range 8 {
		users = append(users, User{Name: "hog", Priority: int32(8 - p), ReadyMilli: Cores(4096 * 8),
			Runs: []Run{ahGang(uint64(10+p), 4096, Cores(8), GiB, 0)}})
	}
	users = append(users,
		User{Name: "carol", ReadyMilli: Cores(16), Runs: []Run{ahGang(1, 2, Cores(8), GiB, 0)}},
		User{Name: "dave", RunningMilli: Cores(8), ReadyMilli: Cores(100), Runs: []Run{NewRun(2, 1, 100, Cores(1), GiB)}})
	in.Users = users[8:]
	out := Schedule(in)
	ahCheck(t, in, out)
	if len(out.Holds) != 1 || out.Holds[0].Batch != 1 {
		t.Fatalf("without the hog's gangs: holds %+v; want carol's", out.Holds)
	}
	in.Users = users
	out = Schedule(in)
	ahCheck(t, in, out)
	if len(out.Holds) != 1 || out.Holds[0].Batch != 1 {
		t.Fatalf("holds %+v, %d stream jobs placed: eight gangs that can never start took every slot, and carol's gang, which two drained workers would start, holds nothing", out.Holds, out.Jobs)
	}
}

// ahRandom builds a random round: one or two clusters of workers of mixed
// sizes, pools, rack labels and GPUs, partly busy; gang users first in
// fair-share order (no running cores, names "a…"), each with a gang of
// mixed sizes (zero-cpu, memory-bound, GPU, pool and label uniformity)
// and plain runs behind it; and plain users ("z…") with cores running.
// With queues (some with quotas) and a placement bound when asked.
func ahRandom(rng *rand.Rand, queues, limit bool) *Input {
	b := NewInput()
	nInst := 2 + rng.IntN(12)
	for i := 1; i <= nInst; i++ {
		cpu := Cores(float64([]int{4, 8, 16, 32}[rng.IntN(4)]))
		mem := []int64{8, 16, 64}[rng.IntN(3)] * GiB
		b.Instance(uint32(i), cpu, mem)
	}
	in := b.Build()
	twoClusters := rng.IntN(2) == 0
	if twoClusters {
		in.Clusters = []placement.Cluster{{Name: "c0"}, {Name: "c1"}}
	}
	for i := range in.Instances {
		inst := &in.Instances[i]
		inst.FreeMilli = inst.CPUMilli * int64(rng.IntN(5)) / 4
		inst.FreeMem = inst.Memory * int64(rng.IntN(5)) / 4
		inst.Pool = []string{"p1", "p2"}[rng.IntN(2)]
		inst.Labels = map[string]string{"rack": fmt.Sprint("r", rng.IntN(3))}
		if twoClusters {
			inst.Cluster = int32(rng.IntN(2))
		}
		if rng.IntN(3) == 0 {
			inst.GPUType, inst.GPUs = "a100", 4
			inst.FreeGPUs = int64(rng.IntN(5))
		}
	}
	for i := range in.Clusters {
		for _, inst := range in.Instances {
			if int(inst.Cluster) == i {
				in.Clusters[i].CapacityMilli += inst.CPUMilli
				in.Clusters[i].FreeMilli += inst.FreeMilli
			}
		}
	}
	in.Constraints = []placement.Constraint{{GPUType: "a100"}, {Pool: "p1"}}
	nq := int32(0)
	if queues {
		in.Queues = []Queue{{Name: "root", Parent: -1, Weight: 1}, {Name: "root/a", Parent: 0, Weight: 1}, {Name: "root/b", Parent: 0, Weight: 1}}
		if rng.IntN(2) == 0 {
			in.Queues[1].Quota.CPUMilli = Cores(float64(8 + rng.IntN(40)))
		}
		if rng.IntN(2) == 0 {
			in.Queues[2].Quota.CPUMilli = Cores(float64(8 + rng.IntN(40)))
		}
		if rng.IntN(3) == 0 {
			in.Queues[0].Quota.CPUMilli = Cores(float64(16 + rng.IntN(40)))
		}
		for i := range in.Queues {
			in.Queues[i].Quota.UsedByCluster = make([]int64, max(len(in.Clusters), 1))
		}
		nq = 2
	}
	batch := uint64(1)
	size := func() (int64, int64) {
		cpu := Cores(float64([]int{0, 1, 2, 4, 8}[rng.IntN(5)]))
		mem := []int64{0, GiB / 2, GiB, 4 * GiB, 16 * GiB}[rng.IntN(5)]
		if cpu == 0 && mem == 0 {
			mem = GiB
		}
		return cpu, mem
	}
	plain := func(q int32) Run {
		cpu, mem := size()
		r := NewRun(batch, 1, uint32(1+rng.IntN(20)), cpu, mem)
		batch++
		r.Queue = q
		if rng.IntN(6) == 0 {
			r.Constraint, r.GPUs = 1, int64(1+rng.IntN(2))
		} else if rng.IntN(6) == 0 {
			r.Constraint = 2
		}
		return r
	}
	for g := range 1 + rng.IntN(4) {
		q := int32(0)
		if nq > 0 {
			q = 2 + int32(rng.IntN(2))
		}
		cpu, mem := size()
		gang := NewRun(batch, 1, uint32(2+rng.IntN(6)), cpu, mem)
		batch++
		gang.Gang, gang.Queue = 1, q
		gang.GangUniform = []string{"", "", "pool", "label:rack"}[rng.IntN(4)]
		if rng.IntN(4) == 0 {
			gang.Constraint, gang.GPUs = 1, int64(1+rng.IntN(2))
		}
		runs := []Run{gang}
		for range rng.IntN(3) {
			runs = append(runs, plain(q))
		}
		u := User{Name: fmt.Sprint("a", g), Queue: q, Runs: runs}
		for _, r := range runs {
			u.ReadyMilli += int64(r.Count) * r.CPUMilli
		}
		in.Users = append(in.Users, u)
	}
	for z := range 1 + rng.IntN(3) {
		q := int32(0)
		if nq > 0 {
			q = 2 + int32(rng.IntN(2))
		}
		var runs []Run
		for range 1 + rng.IntN(3) {
			runs = append(runs, plain(q))
		}
		u := User{Name: fmt.Sprint("z", z), Queue: q, RunningMilli: Cores(float64(1 + rng.IntN(50))), Runs: runs}
		for _, r := range runs {
			u.ReadyMilli += int64(r.Count) * r.CPUMilli
		}
		in.Users = append(in.Users, u)
	}
	if limit {
		in.MaxPlacements = 1 + rng.IntN(30)
	}
	return in
}

// TestAttackHoldInvariantsRandom: over random rounds, no placement takes
// more than an instance has free (cores, memory, GPUs), gangs start whole
// in one cluster, each hold reports what its workers have free as the
// round leaves them, no queue goes past its quota, a worker is never held
// for more than it has, and no plain job is placed on a worker held at the
// round's end unless what is left there covers what is held (the gang
// users are first in line, so every hold is made before any plain job).
func TestAttackHoldInvariantsRandom(t *testing.T) {
	ahRandomInvariants(t)
}

// ahSkipQuota leaves the quota check out (to look past the quota bug).
var ahSkipQuota = false

func ahRandomInvariants(t *testing.T) {
	seeds := 3000
	if testing.Short() {
		seeds = 300
	}
	holds, digs := 0, 0
	for seed := range seeds {
		for _, mode := range []struct{ queues, limit bool }{{false, false}, {true, false}, {false, true}} {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			in := ahRandom(rng, mode.queues, mode.limit)
			out := Schedule(in)
			name := fmt.Sprintf("seed %d queues %v limit %v", seed, mode.queues, mode.limit)
			t.Run(name, func(t *testing.T) {
				ahCheck(t, in, out)
			})
			if t.Failed() {
				return
			}
			holds += len(out.Holds)
			byID := map[uint32]*Instance{}
			for i := range in.Instances {
				byID[in.Instances[i].ID] = &in.Instances[i]
			}
			// Quotas: the round's use within every limit it began within.
			if mode.queues && !ahSkipQuota {
				use := ahQueueUse(in, out)
				sub := map[int32]int64{1: use[2] + use[3], 2: use[2], 3: use[3]}
				for qi := int32(1); qi <= 3; qi++ {
					if q := in.Queues[qi-1].Quota; q.CPUMilli > 0 && sub[qi] > q.CPUMilli {
						t.Fatalf("%s: queue %s placed %d millicores under a quota of %d", name, in.Queues[qi-1].Name, sub[qi], q.CPUMilli)
					}
				}
			}
			// What is held on each worker.
			held := map[uint32][3]int64{}
			for _, h := range out.Holds {
				for _, on := range h.On {
					x := held[on.Instance]
					x[0] += on.HeldMilli
					x[1] += on.HeldMem
					x[2] += on.HeldGPUs
					held[on.Instance] = x
				}
			}
			for id, x := range held {
				inst := byID[id]
				if x[0] > max(inst.CPUMilli, inst.FreeMilli) || x[1] > max(inst.Memory, inst.FreeMem) || x[2] > max(inst.GPUs, inst.FreeGPUs) {
					t.Fatalf("%s: worker %d held %v; it has %d, %d, %d", name, id, x, inst.CPUMilli, inst.Memory, inst.GPUs)
				}
			}
			if mode.queues || mode.limit || slices.ContainsFunc(out.Users, func(u UserResult) bool { return u.Name[0] == 'a' && u.Share == 0 }) {
				// A gang user with no share this round (a gang of zero-cpu
				// members) reaches its gang in the filling pass alone,
				// after plain users placed.
				continue
			}
			// No plain job of a user served after every gang below what
			// is held.
			plain := map[uint64]bool{}
			takes := map[uint64][3]int64{}
			for _, u := range in.Users {
				for _, r := range u.Runs {
					plain[r.Batch] = r.Gang == 0 && u.Name[0] == 'z'
					takes[r.Batch] = [3]int64{r.CPUMilli, r.Memory, r.GPUs}
				}
			}
			used := ahPlaced(in, out)
			for _, p := range out.Placements {
				x, ok := held[p.Instance]
				if !plain[p.Batch] || !ok {
					continue
				}
				inst, u := byID[p.Instance], used[p.Instance]
				left := [3]int64{inst.FreeMilli - u[0], inst.FreeMem - u[1], inst.FreeGPUs - u[2]}
				for k := range 3 {
					if takes[p.Batch][k] > 0 && x[k] > 0 && left[k] < x[k] {
						digs++
						t.Errorf("%s: plain batch %d placed on worker %d, which is left %v with %v held", name, p.Batch, p.Instance, left, x)
					}
				}
			}
			if t.Failed() {
				return
			}
		}
	}
	t.Logf("%d seeds, %d holds at rounds' ends", seeds, holds)
}

// ahKeptFleet is four idle 8-core workers, queue root/b keeping its idle
// guarantee of 8 cores (lend_limit 0, no work), and in root/a a user
// first in line with a gang of four 8-core members beside a user with a
// stream of one-core jobs.
func ahKeptFleet() *Input {
	zero := int64(0)
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).
		Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
	in.Queues = []Queue{
		{Name: "root", Parent: -1, Weight: 1},
		{Name: "root/a", Parent: 0, Weight: 1},
		{Name: "root/b", Parent: 0, Weight: 1, Guarantee: placement.Resources{CPUMilli: Cores(8)}, Lend: placement.Limit{CPUMilli: &zero}},
	}
	for i := range in.Queues {
		in.Queues[i].Quota.UsedByCluster = []int64{0}
	}
	stream := NewRun(2, 1, 100, Cores(1), GiB)
	stream.Queue = 2
	in.Users = []User{
		{Name: "u", Queue: 2, ReadyMilli: Cores(32), Runs: []Run{ahGang(1, 4, Cores(8), GiB, 2)}},
		{Name: "v", Queue: 2, RunningMilli: Cores(10), ReadyMilli: Cores(100), Runs: []Run{stream}},
	}
	return in
}

// TestAttackHoldIdlesFleetBesideUnlentGuarantee: a gang that the
// guarantee another queue keeps always refuses (32 cores; queue b keeps 8
// of the 32, so root/a may start 24 at most) holds nothing, and the
// stream's user runs its 24 jobs. Was: the whole idle fleet held every
// round for a gang that never starts.
func TestAttackHoldIdlesFleetBesideUnlentGuarantee(t *testing.T) {
	defer func(n int) { maxGangHolds = n }(maxGangHolds)
	maxGangHolds = 0
	in := ahKeptFleet()
	out := Schedule(in)
	ahCheck(t, in, out)
	if out.Jobs != 24 {
		t.Fatalf("without holds: placed %d; want the stream's 24 (b keeps 8)", out.Jobs)
	}
	maxGangHolds = 8
	in = ahKeptFleet()
	out = Schedule(in)
	ahCheck(t, in, out)
	if out.Jobs == 0 {
		t.Fatalf("with holds: an idle 32-core fleet placed nothing: held %+v for a gang the guarantee b keeps refuses every round", out.Holds)
	}
}

// TestAttackHoldWhySaysNoRoomOnIdleWorkers: a gang held on idle workers
// is told the room they have for it; one refused for a kept guarantee is
// not held. Was: "room for 0 of them now" on four idle workers.
func TestAttackHoldWhySaysNoRoomOnIdleWorkers(t *testing.T) {
	in := ahKeptFleet()
	out := Schedule(in)
	ahCheck(t, in, out)
	for _, u := range out.Unplaced {
		if u.Batch != 1 {
			continue
		}
		if u.Why.Held > 0 && u.Why.HeldRoom != 4 {
			t.Fatalf("gang's why %+v: held on %d idle workers with room for all 4 members; says room for %d", u.Why, u.Why.Held, u.Why.HeldRoom)
		}
		return
	}
	t.Fatalf("the gang is not listed as waiting: placed %+v", out.Placements)
}

// TestAttackHoldSpareIsHeldForAnotherQueue: room held for a gang is free,
// but for the gang's queue alone: preemption does not count it as
// serving another queue's waiting work (spare). A queue below its
// guarantee whose plain jobs are refused on held workers (held_for_gang)
// claims what it is owed. Was: it claimed nothing, its reclaim turned off
// by another queue's gang first in line.
func TestAttackHoldSpareIsHeldForAnotherQueue(t *testing.T) {
	now := 100 * minute
	// The borrower stream runs 5 one-core jobs on workers 1 and 2, and 8
	// on 3 and 4: 6 cores free, 3 on each of 1 and 2.
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).
		Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
	per := []int64{5, 5, 8, 8}
	for i := range in.Instances {
		in.Instances[i].FreeMilli = Cores(8) - Cores(float64(per[i]))
		in.Instances[i].FreeMem = 32*GiB - per[i]*GiB
	}
	in.Queues = []Queue{
		{Name: "x", Parent: -1, Weight: 1},
		{Name: "mpi", Parent: -1, Weight: 1, Guarantee: placement.Resources{CPUMilli: Cores(16)}},
		{Name: "stream", Parent: -1, Weight: 1},
	}
	for i := range in.Queues {
		in.Queues[i].Quota.UsedByCluster = []int64{0}
	}
	in.Queues[2].Quota.UsedMilli = Cores(26)
	mpi := NewRun(2, 1, 4, Cores(1), GiB)
	mpi.Queue = 2
	stream := NewRun(3, 100, 100, Cores(1), GiB)
	stream.Queue = 3
	in.Users = []User{
		{Name: "xena", Queue: 1, ReadyMilli: Cores(16), Runs: []Run{ahGang(1, 2, Cores(8), GiB, 1)}},
		{Name: "zoe", Queue: 2, ReadyMilli: Cores(4), Runs: []Run{mpi}},
		{Name: "dave", Queue: 3, RunningMilli: Cores(26), ReadyMilli: Cores(100), Runs: []Run{stream}},
	}
	out := Schedule(in)
	ahCheck(t, in, out)
	for _, p := range out.Placements {
		if p.Batch == 2 {
			t.Skipf("mpi's jobs placed (%+v): the scenario does not arise", out.Placements)
		}
	}
	if len(out.Holds) != 1 {
		t.Fatalf("holds %+v; want xena's gang's", out.Holds)
	}
	var free Res = Res{0, 0}
	for i := range in.Instances {
		free[0] += in.Instances[i].FreeMilli
		free[1] += in.Instances[i].FreeMem
	}
	pin := &PreemptInput{Now: now, Capacity: Res{32_000, 128 << 30}, Free: free,
		Queues: []PreemptQueue{
			{Name: "x", Parent: -1, Waiting: Res{16_000, 2 << 30}},
			{Name: "mpi", Parent: -1, Guarantee: Res{16_000}, Waiting: Res{4000, 4 << 30}, ShortSince: now - 2*minute, ReclaimGraceNs: minute},
			{Name: "stream", Parent: -1, Used: Res{26_000, 26 << 30}, Preemptible: true},
		}}
	pin.Attempts = fullOf(3, 3, 26, now, 0)
	for i := range pin.Attempts {
		w := uint32(1)
		switch {
		case i >= 18:
			w = 4
		case i >= 10:
			w = 3
		case i >= 5:
			w = 2
		}
		pin.Attempts[i].Instance, pin.Attempts[i].Memory = w, 1<<30
	}
	pin.AddHolds(out.Holds)
	pout := Preempt(pin)
	if len(pout.Victims) == 0 {
		t.Fatalf("queue mpi, 16 cores below its guarantee, its 4 jobs refused on the workers held for xena's gang (%+v), claims nothing: the held room counts as free for it", out.Unplaced)
	}
}

// TestAttackHoldTwoGangsOneWorkerNeed: two gangs held on one worker share
// its free room in Holds' order (HeldOn.FreeMilli), so what preemption is
// told to free there is the held room less the free room, counted once.
// Was: each hold counted all the free room.
func TestAttackHoldTwoGangsOneWorkerNeed(t *testing.T) {
	// One 48-core worker with 16 free; gangs of 2x16 and 2x8 cores of two
	// users first in line: 48 cores held, 32 still to free.
	in := NewInput().Instance(1, Cores(48), 192*GiB).Free(Cores(16), 64*GiB).Build()
	in.Queues = []Queue{{Name: "x", Parent: -1, Weight: 1}, {Name: "mpi", Parent: -1, Weight: 1}, {Name: "stream", Parent: -1, Weight: 1}}
	for i := range in.Queues {
		in.Queues[i].Quota.UsedByCluster = []int64{0}
	}
	stream := NewRun(3, 100, 100, Cores(1), GiB)
	stream.Queue = 3
	in.Users = []User{
		{Name: "b1", Queue: 1, ReadyMilli: Cores(32), Runs: []Run{ahGang(1, 2, Cores(16), GiB, 1)}},
		{Name: "b2", Queue: 2, ReadyMilli: Cores(16), Runs: []Run{ahGang(2, 2, Cores(8), GiB, 2)}},
		{Name: "dave", Queue: 3, RunningMilli: Cores(32), ReadyMilli: Cores(100), Runs: []Run{stream}},
	}
	out := Schedule(in)
	ahCheck(t, in, out)
	if len(out.Holds) != 2 {
		t.Skipf("holds %+v, placed %+v: the scenario does not arise", out.Holds, out.Placements)
	}
	pin := &PreemptInput{Queues: []PreemptQueue{{Name: "x", Parent: -1}, {Name: "mpi", Parent: -1}, {Name: "stream", Parent: -1}}}
	pin.AddHolds(out.Holds)
	var need int64
	for _, h := range pin.Holds {
		for _, on := range h.On {
			need += max(on.Need[0], 0)
		}
	}
	if need != Cores(32) {
		t.Fatalf("holds %+v: preemption is told to free %d millicores on the worker for them; 48 cores are held and 16 free: 32 to free", out.Holds, need)
	}
}

// TestAttackHoldScale: chooseHold walks every instance of each cluster a
// held gang may use, and with label uniformity groups them by value (a
// map of value to workers, the values sorted). Rounds of 10,000 busy
// workers, 8 gang users first in line and 2,000 plain users: with a value
// of the rack label per three workers and gangs under label, pool and no
// uniformity; and with a value per worker (a label every worker has its
// own value of, as a host name), every gang under it. What each round
// took with and without holds is logged, not asserted (the machine's
// speed is not drover's); that each gang is held, on one rack or one
// pool, and that no placement passes a worker's free room, is. Then 40
// gangs no worker set holds (ahScaleTries). Measured here (10,000
// workers): +25 to +60 ms a round with 8 holds; 40 tries that hold
// nothing +5 ms (a gang shape that found no room is not tried again in
// the round, and the walks count against maxGangVisits). Before those
// bounds: +300 ms.
func TestAttackHoldScale(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	const nInst, nUsers = 10_000, 2_000
	for _, unique := range []bool{false, true} {
		ahScaleRound(t, nInst, nUsers, unique)
	}
	ahScaleTries(t, nInst)
}

// ahScaleTries: 40 users first in line, each with a gang under a label
// every worker has its own value of that no worker set holds (admission
// lets in a gang the autoscaler could make room for, or the fleet shrank
// since): each of the round's tries (maxGangHoldTries) walks every worker
// and groups them by value, and holds nothing. Logged: what the round
// took with and without holds.
func ahScaleTries(t *testing.T, nInst int) {
	b := NewInput()
	for i := 1; i <= nInst; i++ {
		b.Instance(uint32(i), Cores(16), 64*GiB)
	}
	in := b.Build()
	for i := range in.Instances {
		in.Instances[i].FreeMilli = Cores(float64(i % 3))
		in.Instances[i].Labels = map[string]string{"host": fmt.Sprint("h", i)}
	}
	for g := range 40 {
		r := ahGang(uint64(1+g), 64, Cores(16), GiB, 0)
		r.GangUniform = "label:host"
		in.Users = append(in.Users, User{Name: fmt.Sprint("a", g), ReadyMilli: Cores(16), Runs: []Run{r}})
	}
	for u := range 100 {
		in.Users = append(in.Users, User{Name: fmt.Sprint("z", u), RunningMilli: Cores(float64(1 + u%50)), ReadyMilli: Cores(20),
			Runs: []Run{NewRun(uint64(100+u), 1, 20, Cores(1), GiB)}})
	}
	var took [2]time.Duration
	for k, n := range []int{0, 8} {
		func() {
			defer func(n int) { maxGangHolds = n }(maxGangHolds)
			maxGangHolds = n
			for range 3 {
				start := time.Now()
				out := Schedule(in)
				if d := time.Since(start); took[k] == 0 || d < took[k] {
					took[k] = d
				}
				ahCheck(t, in, out)
				if len(out.Holds) != 0 {
					t.Fatalf("holds %+v for gangs no worker set holds", out.Holds)
				}
			}
		}()
	}
	t.Logf("a round of %d workers (a host label value each), 40 gangs first in line that no host holds: %v without holds, %v with", nInst, took[0], took[1])
}

func ahScaleRound(t *testing.T, nInst, nUsers int, unique bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := NewInput()
	for i := 1; i <= nInst; i++ {
		b.Instance(uint32(i), Cores(16), 64*GiB)
	}
	in := b.Build()
	for i := range in.Instances {
		in.Instances[i].FreeMilli = Cores(float64(rng.IntN(3)))
		in.Instances[i].FreeMem = 16 * GiB
		rack := i / 3
		if unique {
			rack = i
		}
		in.Instances[i].Labels = map[string]string{"rack": fmt.Sprint("r", rack)}
		in.Instances[i].Pool = fmt.Sprint("p", i/10)
	}
	var users []User
	for g := range 8 {
		r := ahGang(uint64(1+g), 3, Cores(16), GiB, 0)
		r.GangUniform = []string{"label:rack", "pool", ""}[g%3]
		if unique {
			r = ahGang(uint64(1+g), 2, Cores(8), GiB, 0)
			r.GangUniform = "label:rack"
		}
		users = append(users, User{Name: fmt.Sprint("a", g), ReadyMilli: Cores(48), Runs: []Run{r}})
	}
	for u := range nUsers {
		users = append(users, User{Name: fmt.Sprint("z", u), RunningMilli: Cores(float64(1 + u%50)), ReadyMilli: Cores(20),
			Runs: []Run{NewRun(uint64(100+u), 1, 20, Cores(1), GiB)}})
	}
	in.Users = users
	var took [2]time.Duration
	var outs [2]*Output
	for k, n := range []int{0, 8} {
		func() {
			defer func(n int) { maxGangHolds = n }(maxGangHolds)
			maxGangHolds = n
			for range 3 { // the least of 3
				start := time.Now()
				outs[k] = Schedule(in)
				if d := time.Since(start); took[k] == 0 || d < took[k] {
					took[k] = d
				}
			}
		}()
		ahCheck(t, in, outs[k])
	}
	t.Logf("a round of %d workers (a rack label value per worker: %v), %d users: %v without holds (%d placed), %v with %d holds (%d placed)",
		nInst, unique, nUsers+8, took[0], outs[0].Jobs, took[1], len(outs[1].Holds), outs[1].Jobs)
	out := outs[1]
	if len(out.Holds) != 8 {
		t.Fatalf("holds %d; want the 8 gangs'", len(out.Holds))
	}
	byID := map[uint32]*Instance{}
	for i := range in.Instances {
		byID[in.Instances[i].ID] = &in.Instances[i]
	}
	for _, h := range out.Holds {
		racks, pools := map[string]bool{}, map[string]bool{}
		for _, on := range h.On {
			racks[byID[on.Instance].Labels["rack"]] = true
			pools[byID[on.Instance].Pool] = true
		}
		switch g := h.Batch - 1; {
		case (unique || g%3 == 0) && len(racks) != 1:
			t.Fatalf("gang %d (label:rack) held on racks %v", h.Batch, racks)
		case !unique && g%3 == 1 && len(pools) != 1:
			t.Fatalf("gang %d (pool) held on pools %v", h.Batch, pools)
		}
	}
}

// ahWorld runs scheduling and preemption rounds over one cluster of
// equal workers: attempts start where rounds place them, victims stop at
// once (no grace), and nothing else ends.
type ahWorld struct {
	t       *testing.T
	cpu     int64
	mem     int64
	workers int
	queues  []PreemptQueue // as preemption reads them (Used, Waiting: filled each round)
	running []ahAttempt
	now     int64
	next    uint32
	// users returns each round's users (queue: 1+index), given what runs.
	users   func(w *ahWorld) []User
	victims map[string]int // by the queue they were stopped for
	started map[uint64]int // jobs started, by batch
}

type ahAttempt struct {
	batch uint64
	job   uint32
	queue int32 // 1+index
	cpu   int64
	mem   int64
	inst  uint32
	start int64
}

func (w *ahWorld) free() []Instance {
	b := NewInput()
	for i := 1; i <= w.workers; i++ {
		b.Instance(uint32(i), w.cpu, w.mem)
	}
	in := b.Build()
	for _, a := range w.running {
		in.Instances[a.inst-1].FreeMilli -= a.cpu
		in.Instances[a.inst-1].FreeMem -= a.mem
	}
	return in.Instances
}

func (w *ahWorld) used(q int32) (cpu, mem int64) {
	for _, a := range w.running {
		if a.queue == q {
			cpu += a.cpu
			mem += a.mem
		}
	}
	return cpu, mem
}

// round runs one scheduling round and one preemption round.
func (w *ahWorld) round() *Output {
	w.now += minute / 4
	in := &Input{Instances: w.free()}
	for i, pq := range w.queues {
		q := Queue{Name: pq.Name, Parent: pq.Parent, Weight: 1}
		if len(pq.Guarantee) > 0 {
			q.Guarantee.CPUMilli = pq.Guarantee[0]
		}
		q.Quota.UsedMilli, q.Quota.UsedMemory = w.used(int32(i + 1))
		q.Quota.UsedByCluster = []int64{q.Quota.UsedMilli}
		in.Queues = append(in.Queues, q)
	}
	in.Users = w.users(w)
	out := Schedule(in)
	ahCheck(w.t, in, out)
	size := map[uint64]Run{}
	for _, u := range in.Users {
		for _, r := range u.Runs {
			size[r.Batch] = r
		}
	}
	for _, p := range out.Placements {
		r := size[p.Batch]
		for j := p.First; j < p.First+p.Count; j++ {
			w.running = append(w.running, ahAttempt{p.Batch, j, r.Queue, r.CPUMilli, r.Memory, p.Instance, w.now})
			w.started[p.Batch]++
		}
	}
	pin := &PreemptInput{Now: w.now, Capacity: Res{int64(w.workers) * w.cpu, int64(w.workers) * w.mem}, Free: Res{0, 0}}
	for _, inst := range w.free() {
		pin.Free[0] += inst.FreeMilli
		pin.Free[1] += inst.FreeMem
	}
	for i, q := range w.queues {
		q.Used = Res{0, 0}
		q.Used[0], q.Used[1] = w.used(int32(i + 1))
		q.Waiting = Res{0, 0}
		for _, u := range in.Users {
			if u.Queue == int32(i+1) {
				for _, r := range u.Runs {
					q.Waiting[0] += int64(r.Count) * r.CPUMilli
					q.Waiting[1] += int64(r.Count) * r.Memory
				}
			}
		}
		// Short since long ago, for the test.
		q.ShortSince = 1
		pin.Queues = append(pin.Queues, q)
	}
	// Subtract what this round placed from Waiting (placed work is not
	// waiting).
	for _, p := range out.Placements {
		r := size[p.Batch]
		pin.Queues[r.Queue-1].Waiting[0] -= int64(p.Count) * r.CPUMilli
		pin.Queues[r.Queue-1].Waiting[1] -= int64(p.Count) * r.Memory
	}
	for _, a := range w.running {
		pin.Attempts = append(pin.Attempts, Attempt{Batch: a.batch, Job: a.job, Attempt: 1, Queue: a.queue, CPUMilli: a.cpu, Memory: a.mem, Start: a.start, Instance: a.inst})
	}
	pin.AddHolds(out.Holds)
	pout := Preempt(pin)
	stop := map[[2]uint64]bool{}
	for _, v := range pout.Victims {
		stop[[2]uint64{v.Batch, uint64(v.Job)}] = true
		w.victims[v.For]++
	}
	kept := w.running[:0]
	for _, a := range w.running {
		if !stop[[2]uint64{a.batch, uint64(a.job)}] {
			kept = append(kept, a)
		}
	}
	w.running = kept
	return out
}

// ahReclaim runs rounds of a queue guaranteed guarantee cores whose
// waiting work is a gang of two 8-core members, beside a borrower whose
// one-core jobs fill four 8-core workers but for one core, until the gang
// starts (or 40 rounds); it returns the world.
func ahReclaim(t *testing.T, guarantee int64) *ahWorld {
	w := &ahWorld{t: t, cpu: Cores(8), mem: 32 * GiB, workers: 4, victims: map[string]int{}, started: map[uint64]int{},
		queues: []PreemptQueue{
			{Name: "mpi", Parent: -1, Guarantee: Res{guarantee}, ReclaimGraceNs: 1},
			{Name: "stream", Parent: -1, Preemptible: true},
		}}
	// The stream's 31 attempts, one core left free (a full fleet holds
	// nothing: TestAttackHoldFullFleetHoldsNothing).
	for i := range 31 {
		w.running = append(w.running, ahAttempt{batch: 2, job: uint32(i + 1), queue: 2, cpu: Cores(1), mem: GiB, inst: uint32(1 + i/8), start: -int64(100-i) * minute})
	}
	w.next = 32
	w.users = func(w *ahWorld) []User {
		var users []User
		if w.started[1] == 0 {
			users = append(users, User{Name: "carol", Queue: 1, ReadyMilli: Cores(16), Runs: []Run{ahGang(1, 2, Cores(8), GiB, 1)}})
		}
		stream := NewRun(2, w.next, 1000, Cores(1), GiB)
		stream.Queue = 2
		cpu, _ := w.used(2)
		users = append(users, User{Name: "dave", Queue: 2, RunningMilli: cpu, ReadyMilli: Cores(1000), Runs: []Run{stream}})
		return users
	}
	for r := 0; r < 40 && w.started[1] == 0; r++ {
		out := w.round()
		for _, p := range out.Placements {
			if p.Batch == 2 {
				w.next = max(w.next, p.First+p.Count)
			}
		}
	}
	return w
}

// TestAttackHoldReclaimsPastTheGuarantee: a queue with a guarantee of 8
// cores whose waiting work is a gang of two 8-core members, beside a
// borrower whose one-core jobs fill the fleet. What reclaim frees for the
// gang sits held, unused until the gang starts: it counts as the queue's
// own against its guarantee, so reclaim stops at 8 attempts. Was: each
// round claimed 8 cores again, 16 stopped for an 8-core guarantee.
func TestAttackHoldReclaimsPastTheGuarantee(t *testing.T) {
	w := ahReclaim(t, Cores(8))
	t.Logf("gang started: %v; attempts stopped for mpi: %d", w.started[1] == 2, w.victims["mpi"])
	if w.victims["mpi"] > 8 {
		t.Fatalf("reclaim for a queue guaranteed 8 cores stopped %d one-core attempts (its gang started: %v)", w.victims["mpi"], w.started[1] == 2)
	}
}

// TestAttackHoldReclaimStartsTheGang: the same with a guarantee of 16
// cores, the gang's size: reclaim stops 16 attempts or fewer, and the
// gang starts. A regression test of preemption on held workers.
func TestAttackHoldReclaimStartsTheGang(t *testing.T) {
	w := ahReclaim(t, Cores(16))
	t.Logf("gang started: %v; attempts stopped for mpi: %d", w.started[1] == 2, w.victims["mpi"])
	if w.started[1] != 2 || w.victims["mpi"] > 16 {
		t.Fatalf("gang started: %v; attempts stopped for mpi: %d; want it started, 16 stopped at most", w.started[1] == 2, w.victims["mpi"])
	}
}

// TestAttackHoldOthersClaimFreesHeldRoom: a claim of a queue with no gang
// held takes no victims on workers held for another queue's gang (what
// they free there is that gang's, not the claimant's). Was: victims
// anywhere, youngest first, held workers included.
func TestAttackHoldOthersClaimFreesHeldRoom(t *testing.T) {
	in := gangReclaim() // 32 one-core attempts over 4 workers, the youngest spread
	in.Queues[0].Waiting = Res{8000, 8 << 30}
	in.Queues = append(in.Queues, PreemptQueue{Name: "x", Parent: -1, Waiting: Res{16_000, 16 << 30}})
	in.AddHolds([]GangHold{{Batch: 9, Gang: 1, Queue: "x", Members: 2, CPUMilli: 16000, Memory: 2 << 30,
		On: []HeldOn{{Instance: 3, HeldMilli: 8000, HeldMem: 1 << 30}, {Instance: 4, HeldMilli: 8000, HeldMem: 1 << 30}}}})
	out := Preempt(in)
	on := map[uint32]int{}
	for _, v := range out.Victims {
		on[v.Instance]++
	}
	if len(out.Victims) == 0 {
		t.Fatal("mpi's claim freed nothing")
	}
	if on[3]+on[4] > 0 {
		t.Fatalf("mpi's claim of 8 cores stopped attempts on workers held for queue x's gang: %v (by worker)", on)
	}
}

// TestAttackHoldPreemptGPUHold: a hold for a gang of GPU members frees,
// on its held worker, attempts that hold GPUs of its type, not the
// cpu-only ones there nor GPU attempts elsewhere, and no more than the
// held worker needs. A regression test of AddHolds' GPU index.
func TestAttackHoldPreemptGPUHold(t *testing.T) {
	now := 100 * minute
	in := &PreemptInput{Now: now, GPUTypes: []string{"a100", "h100"}, Capacity: Res{64_000, 256 << 30, 0, 8},
		Queues: []PreemptQueue{
			{Name: "mpi", Parent: -1, Guarantee: Res{0, 0, 0, 4}, Waiting: Res{8000, 8 << 30, 0, 4}, ShortSince: now - 2*minute, ReclaimGraceNs: minute},
			{Name: "stream", Parent: -1, Used: Res{16_000, 16 << 30, 0, 8}, Preemptible: true},
		}}
	// Workers 5 and 6: four h100s each, each held by a one-core attempt,
	// and four cpu-only attempts each.
	for w := uint32(5); w <= 6; w++ {
		for j := range 8 {
			a := Attempt{Batch: uint64(w), Job: uint32(j + 1), Attempt: 1, Queue: 2, CPUMilli: 1000, Memory: 1 << 30, Start: now - int64(j+1)*minute, Instance: w}
			if j%2 == 0 {
				a.GPU, a.GPUs = 3, 1
			}
			in.Attempts = append(in.Attempts, a)
		}
	}
	in.AddHolds([]GangHold{{Batch: 9, Gang: 1, Queue: "mpi", Members: 2, CPUMilli: 2000, Memory: 2 << 30, GPUs: 4, GPUType: "h100",
		On: []HeldOn{{Instance: 5, HeldMilli: 2000, HeldMem: 2 << 30, HeldGPUs: 4, FreeMilli: 4000, FreeMem: 4 << 30}}}})
	if len(in.Holds) != 1 || in.Holds[0].On[0].Need[3] != 4 || in.Holds[0].Demand[3] != 4 {
		t.Fatalf("holds %+v; want 4 h100s to free on worker 5", in.Holds)
	}
	out := Preempt(in)
	for _, v := range out.Victims {
		if v.Instance != 5 || v.GPU != 3 {
			t.Fatalf("victim %+v: want h100 attempts of worker 5 alone", v.Attempt)
		}
	}
	if len(out.Victims) != 4 {
		t.Fatalf("victims %d; want the 4 h100 attempts of worker 5", len(out.Victims))
	}
}

// ahStealRounds runs rounds over four 8-core workers kept full by a
// stream of one-core jobs (3 to 13 rounds each), with zed's gang of two
// 8-core members waiting from the first round, and, when attack is set,
// aaa's gang of the same size, run for 2 rounds, resubmitted one round
// after it ends (fair share ties by name: aaa, running nothing, is first
// in line whenever its gang does not run). It returns the round zed's
// gang started in (0: not in rounds) and how many times aaa's started.
func ahStealRounds(t *testing.T, rounds int, attack bool) (int, int) {
	t.Helper()
	type job struct {
		inst int
		end  int
		cpu  int64
	}
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).
		Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
	var running []job
	for w := range 4 {
		for j := range 8 {
			running = append(running, job{w, 1 + (w*8+j)*5%23, Cores(1)})
		}
	}
	next, aaaBatch := uint32(1), uint64(100)
	aaaStarts, aaaEnded, aaaRunning := 0, -10, false
	rng := rand.New(rand.NewPCG(3, 4))
	for tick := 1; tick <= rounds; tick++ {
		kept := running[:0]
		for _, j := range running {
			if j.end > tick {
				kept = append(kept, j)
			} else if j.cpu == Cores(8) && aaaRunning {
				aaaRunning, aaaEnded = false, tick
			}
		}
		running = kept
		for w := range in.Instances {
			in.Instances[w].FreeMilli, in.Instances[w].FreeMem = Cores(8), 32*GiB
		}
		var streamRunning int64
		for _, j := range running {
			in.Instances[j.inst].FreeMilli -= j.cpu
			in.Instances[j.inst].FreeMem -= j.cpu / 1000 * GiB
			if j.cpu == Cores(1) {
				streamRunning += j.cpu
			}
		}
		in.Users = []User{{Name: "zed", ReadyMilli: Cores(16), Runs: []Run{ahGang(1, 2, Cores(8), 8*GiB, 0)}}}
		if attack && !aaaRunning && tick > aaaEnded+1 {
			in.Users = append(in.Users, User{Name: "aaa", ReadyMilli: Cores(16), Runs: []Run{ahGang(aaaBatch, 2, Cores(8), 8*GiB, 0)}})
		} else if aaaRunning {
			in.Users = append(in.Users, User{Name: "aaa", RunningMilli: Cores(16)})
		}
		in.Users = append(in.Users, User{Name: "stream", RunningMilli: streamRunning, ReadyMilli: Cores(1000), Runs: []Run{NewRun(2, next, 1000, Cores(1), GiB)}})
		in.Shares = nil
		out := Schedule(in)
		ahCheck(t, in, out)
		for _, p := range out.Placements {
			w := int(p.Instance - 1)
			switch p.Batch {
			case 1:
				return tick, aaaStarts
			case 2:
				for range p.Count {
					running = append(running, job{w, tick + 3 + rng.IntN(11), Cores(1)})
				}
				next += p.Count
			default:
				running = append(running, job{w, tick + 2, Cores(8)})
				if !aaaRunning {
					aaaStarts++
					aaaBatch++
				}
				aaaRunning = true
			}
		}
	}
	return 0, aaaStarts
}

// TestAttackHoldBesideAResubmittingGang: holds are made afresh each
// round, in the round's order, on the workers with the most room now, so
// a gang ahead in line (fair share ties by name: "aaa", running nothing
// whenever its gang does not run) may take workers drained for zed's
// gang, and does once here. Tried as an attack (aaa resubmits a gang of
// the same size one round after the last ends): zed's gang still starts,
// since aaa's gang's own room frees for it as it ends, and zed is first
// in line while aaa's runs. A regression test.
func TestAttackHoldBesideAResubmittingGang(t *testing.T) {
	alone, _ := ahStealRounds(t, 400, false)
	if alone == 0 {
		t.Fatal("zed's gang alone beside the stream never started in 400 rounds")
	}
	tick, starts := ahStealRounds(t, 400, true)
	t.Logf("zed's gang alone started in round %d; beside aaa: round %d (0: never), aaa's gang started %d times", alone, tick, starts)
	if tick == 0 {
		t.Fatalf("zed's gang never started in 400 rounds while aaa's started %d times (alone: round %d)", starts, alone)
	}
}
