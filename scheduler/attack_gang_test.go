package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-sched/drover/placement"
)

// Attacks on the scheduler's gangs (helper review).

// agRuns is a gang of n members of one size, in one run.
func agRuns(batch uint64, n uint32, cpu, mem int64, uniform string) []Run {
	r := NewRun(batch, 1, n, cpu, mem)
	r.Gang, r.GangUniform = 1, uniform
	return []Run{r}
}

// agCheckWhole fails unless every gang of the input is placed whole or
// not at all, each member once, within one cluster, and no instance is
// given more than it has free.
func agCheckWhole(t *testing.T, in *Input, out *Output) {
	t.Helper()
	type key struct {
		batch uint64
		id    uint32
	}
	placed := map[key]int{}
	cluster := map[uint64]map[int32]bool{}
	used := map[uint32][2]int64{}
	size := map[uint64][2]int64{}
	gangOf := map[uint64]int64{}
	for _, u := range in.Users {
		for _, r := range u.Runs {
			size[r.Batch] = [2]int64{r.CPUMilli, r.Memory}
			if r.Gang != 0 {
				gangOf[r.Batch] += int64(r.Count)
			}
		}
	}
	byID := map[uint32]*Instance{}
	for i := range in.Instances {
		byID[in.Instances[i].ID] = &in.Instances[i]
	}
	for _, p := range out.Placements {
		for id := p.First; id < p.First+p.Count; id++ {
			placed[key{p.Batch, id}]++
			if placed[key{p.Batch, id}] > 1 {
				t.Fatalf("job %d/%d placed twice", p.Batch, id)
			}
		}
		if cluster[p.Batch] == nil {
			cluster[p.Batch] = map[int32]bool{}
		}
		cluster[p.Batch][byID[p.Instance].Cluster] = true
		u := used[p.Instance]
		u[0] += int64(p.Count) * size[p.Batch][0]
		u[1] += int64(p.Count) * size[p.Batch][1]
		used[p.Instance] = u
	}
	for id, u := range used {
		if inst := byID[id]; u[0] > inst.FreeMilli || u[1] > inst.FreeMem {
			t.Fatalf("instance %d given %v, has %d/%d free", id, u, inst.FreeMilli, inst.FreeMem)
		}
	}
	for b, n := range gangOf {
		got := int64(0)
		for k, c := range placed {
			if k.batch == b {
				got += int64(c)
			}
		}
		if got != 0 && got != n {
			t.Fatalf("gang of batch %d: %d of %d members placed", b, got, n)
		}
		if len(cluster[b]) > 1 {
			t.Fatalf("gang of batch %d placed over clusters %v", b, cluster[b])
		}
	}
}

// TestAttackGangCachedWhyIsAnothersGang: a round's second gang that fails
// where a smaller one failed before is told why with the first gang's
// numbers: `job why` then says "its gang of 20 members ... room for 16"
// of a gang of 30, or of members twice as large (room for 8 of them).
// Fixed: a gang of the same members gets the same room and its own size;
// one of larger members is told no number (-1: fewer than the other's).
func TestAttackGangCachedWhyIsAnothersGang(t *testing.T) {
	in := twoRegions() // 2 clusters of 16 cores (two 8-core instances each)
	var runs []Run
	runs = append(runs, agRuns(1, 20, Cores(1), GiB, "")...)
	runs = append(runs, agRuns(2, 30, Cores(1), GiB, "")...)
	runs = append(runs, agRuns(3, 20, Cores(2), GiB, "")...)
	in.Users = []User{{Name: "u", ReadyMilli: Cores(90), Runs: runs}}
	out := Schedule(in)
	agCheckWhole(t, in, out)
	if out.Jobs != 0 || len(out.Unplaced) != 3 {
		t.Fatalf("placed %d, unplaced %+v", out.Jobs, out.Unplaced)
	}
	want := map[uint64][2]int64{1: {20, 16}, 2: {30, 16}, 3: {20, -1}}
	for _, u := range out.Unplaced {
		w := want[u.Batch]
		if u.Why.Quota != ReasonGang || u.Why.Gang != w[0] || u.Why.GangRoom != w[1] {
			t.Errorf("batch %d: why says a gang of %d with room for %d; the gang has %d members and room for %d (%+v)",
				u.Batch, u.Why.Gang, u.Why.GangRoom, w[0], w[1], u.Why)
		}
	}
}

// TestAttackGangCacheNeverHidesRoom: the failure cache must not refuse a
// gang that fits: gangs under other uniformities, smaller gangs, and
// gangs after a left-to-larger failure.
func TestAttackGangCacheNeverHidesRoom(t *testing.T) {
	in := NewInput().
		Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).Instance(3, Cores(8), 32*GiB).Build()
	in.Instances[0].Pool, in.Instances[1].Pool, in.Instances[2].Pool = "p1", "p2", "p2"
	in.Instances[0].Labels = map[string]string{"rack": "r1"}
	in.Instances[1].Labels = map[string]string{"rack": "r2"}
	in.Instances[2].Labels = map[string]string{"rack": "r2"}
	var runs []Run
	runs = append(runs, agRuns(1, 17, Cores(1), GiB, "label:rack")...) // fails: 16 on r2
	runs = append(runs, agRuns(2, 17, Cores(1), GiB, "pool")...)       // fails too
	runs = append(runs, agRuns(3, 16, Cores(1), GiB, "pool")...)       // fits p2
	runs = append(runs, agRuns(4, 8, Cores(1), GiB, "label:rack")...)  // fits r1
	in.Users = []User{{Name: "u", ReadyMilli: Cores(58), Runs: runs}}
	out := Schedule(in)
	agCheckWhole(t, in, out)
	if out.Jobs != 24 {
		t.Fatalf("placed %d (%+v), want gangs 3 and 4 (24)", out.Jobs, out.Placements)
	}
}

// TestAttackGangFragmentsAndOrder: a gang spread over many runs (as the
// lister writes a gang whose members came back one by one) with other
// users' plain runs: placed whole or not at all, never over an
// instance's room, in one cluster.
func TestAttackGangFragmentsAndOrder(t *testing.T) {
	in := twoRegions()
	in.Instances[0].FreeMilli = Cores(3)
	in.Instances[2].FreeMilli = Cores(5)
	var runs []Run
	for i := uint32(0); i < 12; i++ {
		r := NewRun(1, 1+i, 1, Cores(1), GiB)
		r.Gang = 1
		r.Attempt = uint16(1 + i%3)
		runs = append(runs, r)
	}
	in.Users = []User{
		{Name: "a", ReadyMilli: Cores(8), Runs: []Run{NewRun(9, 1, 8, Cores(1), GiB)}},
		{Name: "u", ReadyMilli: Cores(12), Runs: runs},
		{Name: "z", ReadyMilli: Cores(20), Runs: []Run{NewRun(8, 1, 20, Cores(1), GiB)}},
	}
	out := Schedule(in)
	agCheckWhole(t, in, out)
	// The attempts the gang's members are placed with are their runs'.
	for _, p := range out.Placements {
		if p.Batch == 1 {
			for id := p.First; id < p.First+p.Count; id++ {
				if want := uint16(1 + (id-1)%3); p.Count != 1 && p.Attempt != want {
					t.Fatalf("member %d placed as attempt %d, want %d", id, p.Attempt, want)
				}
			}
		}
	}
}

// TestAttackGangManyFailingGangsBounded: a round of a few thousand gangs
// that fit nowhere, each a size no gang before it was (cores down,
// memory up: none is "at least as large" as another), one worker label
// value per worker. A plain run that fails walks nothing once 64 sizes
// were explained (maxExplained); every such gang walks every instance
// and explains itself over every instance again. The round must stay
// bounded: here within 2 s (the same round of plain runs takes a few
// milliseconds).
func TestAttackGangManyFailingGangsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	const nInst, nUsers, perUser = 2000, 200, 10
	b := NewInput()
	for i := 1; i <= nInst; i++ {
		b.Instance(uint32(i), Cores(4), 64*GiB)
	}
	in := b.Build()
	for i := range in.Instances {
		in.Instances[i].Labels = map[string]string{"rack": fmt.Sprint("r", i)}
	}
	build := func(gang bool) {
		in.Users = nil
		k := int64(0)
		for u := 0; u < nUsers; u++ {
			var runs []Run
			for g := 0; g < perUser; g++ {
				k++
				// 5 members of 13 GiB and more: no rack (64 GiB) holds 5.
				r := NewRun(uint64(k), 1, 5, Cores(0.5)+(nUsers*perUser-k), 13*GiB+k<<20)
				if gang {
					r.Gang, r.GangUniform = 1, "label:rack"
				} else {
					// The same sizes, too large for any worker.
					r.CPUMilli += Cores(4)
				}
				runs = append(runs, r)
			}
			in.Users = append(in.Users, User{Name: fmt.Sprint("u", u), ReadyMilli: Cores(50), Runs: runs})
		}
	}
	build(false)
	start := time.Now()
	out := Schedule(in)
	plain := time.Since(start)
	if out.Jobs != 0 {
		t.Fatalf("plain: placed %d", out.Jobs)
	}
	build(true)
	start = time.Now()
	out = Schedule(in)
	gangs := time.Since(start)
	agCheckWhole(t, in, out)
	if out.Jobs != 0 {
		t.Fatalf("gangs: placed %d", out.Jobs)
	}
	// Times are logged, not asserted (the machine's speed is not
	// drover's); what the round looked at is counted.
	t.Logf("a round of %d failing plain runs: %v; of %d failing gangs: %v (%d instances searched)", nUsers*perUser, plain, nUsers*perUser, gangs, out.GangSearch)
	if out.GangSearch > maxGangVisits+nInst {
		t.Fatalf("a round of %d gangs that fit nowhere looked at %d instances: the round is not bounded (at most %d and one cluster's walk)", nUsers*perUser, out.GangSearch, maxGangVisits)
	}
}

// TestAttackGangHugeGangOneRound: a gang of 4,096 one-core members on 64
// 64-core workers starts whole in one round, bounded in time, and one of
// 4,097 does not (nothing placed, why: room for 4,096).
func TestAttackGangHugeGangOneRound(t *testing.T) {
	b := NewInput()
	for i := 1; i <= 64; i++ {
		b.Instance(uint32(i), Cores(64), 256*GiB)
	}
	in := b.Build()
	for _, n := range []uint32{4096, 4097} {
		in.Users = []User{{Name: "u", ReadyMilli: Cores(float64(n)), Runs: agRuns(1, n, Cores(1), GiB, "")}}
		start := time.Now()
		out := Schedule(in)
		t.Logf("a gang of %d: %v, %d instances searched", n, time.Since(start), out.GangSearch)
		agCheckWhole(t, in, out)
		if n == 4096 && out.Jobs != 4096 {
			t.Fatalf("placed %d of 4096", out.Jobs)
		}
		if n == 4097 && (out.Jobs != 0 || len(out.Unplaced) != 1 || out.Unplaced[0].Why.GangRoom != 4096) {
			t.Fatalf("a gang of 4097: placed %d, unplaced %+v", out.Jobs, out.Unplaced)
		}
	}
}

// TestAttackGangQuotaWhyNamesTheLimit: a gang its queues' quotas leave
// room for only in part is told which limit and which queue: the leaf's
// max_running, or a parent's cpu quota. fitGang says "cpu quota of the
// leaf" whenever the path leaves room for some members.
func TestAttackGangQuotaWhyNamesTheLimit(t *testing.T) {
	for _, c := range []struct {
		name   string
		queues []Queue
		reason Reason
		queue  string
	}{
		{"the leaf's max_running", []Queue{
			{Name: "root", Parent: -1, Weight: 1},
			{Name: "root/leaf", Parent: 0, Weight: 1, Quota: placement.Quota{MaxJobs: 3}},
		}, ReasonMaxRunning, "root/leaf"},
		{"the parent's cpu quota", []Queue{
			{Name: "root", Parent: -1, Weight: 1, Quota: placement.Quota{CPUMilli: Cores(3)}},
			{Name: "root/leaf", Parent: 0, Weight: 1},
		}, ReasonQuotaCPU, "root"},
		{"the leaf's memory quota", []Queue{
			{Name: "root", Parent: -1, Weight: 1},
			{Name: "root/leaf", Parent: 0, Weight: 1, Quota: placement.Quota{Memory: 3 * GiB}},
		}, ReasonQuotaMemory, "root/leaf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := twoRegions()
			in.Queues = c.queues
			for i := range in.Queues {
				in.Queues[i].Quota.UsedByCluster = []int64{0, 0}
			}
			runs := agRuns(1, 4, Cores(1), GiB, "")
			runs[0].Queue = 2
			in.Users = []User{{Name: "u", Queue: 2, ReadyMilli: Cores(4), Runs: runs}}
			out := Schedule(in)
			agCheckWhole(t, in, out)
			if out.Jobs != 0 || len(out.Unplaced) != 1 {
				t.Fatalf("placed %d, unplaced %+v", out.Jobs, out.Unplaced)
			}
			if w := out.Unplaced[0].Why; w.Quota != c.reason || w.Queue != c.queue {
				t.Fatalf("why: %s of queue %q; the limit is %s of %q (%+v)", w.Quota, w.Queue, c.reason, c.queue, w)
			}
		})
	}
}

// TestAttackGangTakesUnlentGuarantee: a queue whose idle guarantee is not
// lent (lend_limit 0) keeps it from every other queue's work in a round:
// plain runs are held to what is left (their budgets, then keeps in the
// filling pass). A gang of another queue is placed in the first pass,
// where nothing keeps the guarantee, whole: it takes the idle queue's
// guarantee.
func TestAttackGangTakesUnlentGuarantee(t *testing.T) {
	zero := int64(0)
	for _, gang := range []bool{false, true} {
		in := NewInput().
			Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
		in.Queues = []Queue{
			{Name: "root", Parent: -1, Weight: 1},
			{Name: "root/a", Parent: 0, Weight: 1},
			{Name: "root/b", Parent: 0, Weight: 1, Guarantee: placement.Resources{CPUMilli: Cores(16)}, Lend: placement.Limit{CPUMilli: &zero}},
		}
		runs := agRuns(1, 24, Cores(1), GiB, "")
		if !gang {
			runs[0].Gang = 0
		}
		runs[0].Queue = 2
		in.Users = []User{{Name: "u", Queue: 2, ReadyMilli: Cores(24), Runs: runs}}
		out := Schedule(in)
		agCheckWhole(t, in, out)
		t.Logf("gang %v: placed %d", gang, out.Jobs)
		if out.Jobs > 16 {
			t.Fatalf("gang %v: queue a placed %d one-core jobs on 32 cores; queue b keeps 16 of them (its guarantee, lend_limit 0)", gang, out.Jobs)
		}
	}
}
