package scheduler

import (
	"math"
	"math/rand/v2"
	"testing"
)

const gib = int64(1) << 30

// near reports whether got is within tol (a fraction) of want.
func near(got, want int64, tol float64) bool {
	return math.Abs(float64(got-want)) <= tol*math.Max(float64(want), 1)
}

func TestQueueSharesFlatGivesWhatFits(t *testing.T) {
	got := QueueShares([]QueueNode{{Parent: -1, Ready: Res{40_000, 40 * gib}}}, Res{100_000, 100 * gib})
	if got[0][0] != 40_000 || got[0][1] != 40*gib {
		t.Fatalf("one queue got %v, want all it has Ready", got[0])
	}
	got = QueueShares([]QueueNode{{Parent: -1, Ready: Res{400_000, 40 * gib}}}, Res{100_000, 100 * gib})
	if got[0][0] != 100_000 || got[0][1] != 10*gib {
		t.Fatalf("one queue got %v, want its jobs' shape up to the cores", got[0])
	}
}

func TestQueueSharesFollowWeights(t *testing.T) {
	free := Res{120_000, 0}
	lots := Res{1_000_000, 0}
	for _, c := range []struct {
		name   string
		nodes  []QueueNode
		expect []int64 // millicores per node
	}{
		{"1:3", []QueueNode{{Parent: -1, Weight: 1, Ready: lots}, {Parent: -1, Weight: 3, Ready: lots}}, []int64{30_000, 90_000}},
		{"held counts", []QueueNode{{Parent: -1, Weight: 1, Used: Res{60_000, 0}, Ready: lots}, {Parent: -1, Weight: 1, Ready: lots}}, []int64{30_000, 90_000}},
		{"a queue wants less", []QueueNode{{Parent: -1, Weight: 1, Ready: Res{10_000, 0}}, {Parent: -1, Weight: 1, Ready: lots}}, []int64{10_000, 110_000}},
		// Decayed past use weighs as held between siblings of one tree,
		// for the order only; top queues (other trees) share without it.
		{"past use counts as held", []QueueNode{{Parent: -1, Weight: 1}, {Parent: 0, Weight: 1, Past: Res{60_000, 0}, Ready: lots}, {Parent: 0, Weight: 1, Ready: lots}}, []int64{120_000, 30_000, 90_000}},
		{"a subtree's past use sums up", []QueueNode{{Parent: -1, Weight: 1},
			{Parent: 0, Weight: 1}, {Parent: 1, Weight: 1, Past: Res{60_000, 0}, Ready: lots},
			{Parent: 0, Weight: 1}, {Parent: 3, Weight: 1, Ready: lots},
		}, []int64{120_000, 30_000, 30_000, 90_000, 90_000}},
		{"top queues share without past use", []QueueNode{{Parent: -1, Weight: 1, Past: Res{60_000, 0}, Ready: lots}, {Parent: -1, Weight: 1, Ready: lots}}, []int64{60_000, 60_000}},
		{"past use takes no room: a queue alone gets all", []QueueNode{{Parent: -1, Weight: 1, Past: Res{600_000, 0}, Ready: lots}}, []int64{120_000}},
		// org1 (1) {p1 (1), p2 (1)}, org2 (2) {p3}: 1/6, 1/6, 2/3.
		{"two levels", []QueueNode{
			{Parent: -1, Weight: 1}, {Parent: 0, Weight: 1, Ready: lots}, {Parent: 0, Weight: 1, Ready: lots},
			{Parent: -1, Weight: 2}, {Parent: 3, Weight: 1, Ready: lots},
		}, []int64{40_000, 20_000, 20_000, 80_000, 80_000}},
	} {
		got := QueueShares(c.nodes, free)
		for i, want := range c.expect {
			if !near(got[i][0], want, 0.001) {
				t.Errorf("%s: queue %d got %d millicores, want %d (all: %v)", c.name, i, got[i][0], want, got)
			}
		}
	}
}

func TestQueueSharesGuaranteesComeFirst(t *testing.T) {
	lots := Res{1_000_000, 0}
	// a is guaranteed 40 cores and wants 50; b has no guarantee: a gets
	// its 40, then the two share the other 60 evenly from where they
	// stand (a at 40, b at 0): a 10 more, b 50.
	got := QueueShares([]QueueNode{
		{Parent: -1, Guarantee: Res{40_000, 0}, Ready: Res{50_000, 0}},
		{Parent: -1, Ready: lots},
	}, Res{100_000, 0})
	if got[0][0] != 50_000 || got[1][0] != 50_000 {
		t.Fatalf("guarantee then sharing: %v", got)
	}
	// A guarantee held already is not given twice, and an idle one is
	// lent: a holds 40 of its 60 and wants nothing more; b borrows the
	// rest.
	got = QueueShares([]QueueNode{
		{Parent: -1, Guarantee: Res{60_000, 0}, Used: Res{40_000, 0}},
		{Parent: -1, Ready: lots},
	}, Res{60_000, 0})
	if got[0][0] != 0 || got[1][0] != 60_000 {
		t.Fatalf("idle guarantee lent: %v", got)
	}
	// ... unless the owner lends only 5 of its idle 20.
	got = QueueShares([]QueueNode{
		{Parent: -1, Guarantee: Res{60_000, 0}, Used: Res{40_000, 0}, Lend: Res{5_000, 0}},
		{Parent: -1, Ready: lots},
	}, Res{60_000, 0})
	if got[1][0] != 45_000 {
		t.Fatalf("lend limit: %v, want b to borrow 45 of the 60 free (a keeps 15 of its idle 20)", got)
	}
	// A cap (guarantee + borrow limit) bounds what a queue is given.
	got = QueueShares([]QueueNode{
		{Parent: -1, Guarantee: Res{10_000, 0}, Cap: Res{30_000, Unbounded}, Used: Res{5_000, 0}, Ready: lots},
		{Parent: -1, Weight: 1, Ready: Res{20_000, 0}},
	}, Res{100_000, 0})
	if got[0][0] != 25_000 || got[1][0] != 20_000 {
		t.Fatalf("cap: %v, want a up to its cap of 30 (it holds 5) and b all it wants", got)
	}
	// Guarantees larger than the level's holding shrink alike.
	got = QueueShares([]QueueNode{
		{Parent: -1, Guarantee: Res{60_000, 0}, Ready: lots},
		{Parent: -1, Guarantee: Res{60_000, 0}, Ready: lots},
	}, Res{60_000, 0})
	if got[0][0] != 30_000 || got[1][0] != 30_000 {
		t.Fatalf("overcommitted guarantees: %v", got)
	}
}

// TestQueueSharesAreDominantResourceFair is the example of the DRF paper:
// 9 cores and 18 GB; a's tasks take 1 core and 4 GB, b's 3 cores and
// 1 GB. DRF gives a 3 tasks and b 2, each two thirds of its dominant
// resource.
func TestQueueSharesAreDominantResourceFair(t *testing.T) {
	got := QueueShares([]QueueNode{
		{Parent: -1, Ready: Res{100_000, 400 * gib}},
		{Parent: -1, Ready: Res{300_000, 100 * gib}},
	}, Res{9_000, 18 * gib})
	if !near(got[0][0], 3_000, 0.01) || !near(got[0][1], 12*gib, 0.01) || !near(got[1][0], 6_000, 0.01) || !near(got[1][1], 2*gib, 0.01) {
		t.Fatalf("DRF: a %v, b %v; want a 3 cores 12 GB, b 6 cores 2 GB", got[0], got[1])
	}
	// A GPU queue (a core a GPU) and a CPU queue: the GPU queue's
	// dominant resource is its GPUs, the other's its cores, and each ends
	// with the same share of it: 100/108 (the cores run out).
	got = QueueShares([]QueueNode{
		{Parent: -1, Ready: Res{16_000, 64 * gib, 16}},
		{Parent: -1, Ready: Res{1_000_000, 100 * gib, 0}},
	}, Res{100_000, 1000 * gib, 8})
	if got[0][2] != 7 || !near(got[0][0], 7_407, 0.001) || !near(got[1][0], 92_592, 0.001) {
		t.Fatalf("GPUs: %v, want 7 GPUs (7.4 of 8) and 92.6 of 100 cores", got)
	}
}

// TestQueueSharesHold checks, on random trees, what every split must
// hold: no queue is given more than it has Ready or its cap allows, the
// children of a queue share at most what it was given, and what is left
// over is left because nobody who wants it can take it.
func TestQueueSharesHold(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := 1 + rng.IntN(12)
		nodes := make([]QueueNode, n)
		for i := range nodes {
			nodes[i].Parent = int32(rng.IntN(i+1)) - 1
			nodes[i].Weight = 1 + rng.Int64N(5)
			if rng.IntN(3) == 0 {
				nodes[i].Guarantee = Res{rng.Int64N(50_000), rng.Int64N(50 * gib), rng.Int64N(4)}
			}
			if rng.IntN(4) == 0 {
				nodes[i].Cap = Res{rng.Int64N(100_000), Unbounded, Unbounded}
			}
		}
		isParent := make([]bool, n)
		for _, q := range nodes {
			if q.Parent >= 0 {
				isParent[q.Parent] = true
			}
		}
		for i := range nodes {
			if !isParent[i] {
				nodes[i].Used = Res{rng.Int64N(40_000), rng.Int64N(40 * gib), rng.Int64N(3)}
				nodes[i].Ready = Res{rng.Int64N(80_000), rng.Int64N(80 * gib), rng.Int64N(4) * rng.Int64N(2)}
			}
		}
		free := Res{rng.Int64N(200_000), rng.Int64N(200 * gib), rng.Int64N(8)}
		got := QueueShares(nodes, free)
		given := map[int32]Res{-1: free}
		for i, q := range nodes {
			given[int32(i)] = got[i]
			for r := range free {
				if got[i][r] < 0 {
					t.Fatalf("trial %d: queue %d given %v", trial, i, got[i])
				}
				if !isParent[i] && got[i][r] > q.Ready[r] {
					t.Fatalf("trial %d: leaf %d given %v beyond its Ready %v", trial, i, got[i], q.Ready)
				}
			}
			if q.Cap != nil && !isParent[i] && got[i][0] > max(q.Cap[0]-q.Used[0], 0) {
				t.Fatalf("trial %d: leaf %d given %d cores beyond its cap %d (holds %d)", trial, i, got[i][0], q.Cap[0], q.Used[0])
			}
		}
		sums := map[int32]Res{}
		for i, q := range nodes {
			s := sums[q.Parent]
			if s == nil {
				s = make(Res, len(free))
				sums[q.Parent] = s
			}
			for r := range free {
				s[r] += got[i][r]
			}
		}
		for p, s := range sums {
			for r := range free {
				if s[r] > given[p][r] {
					t.Fatalf("trial %d: the children of %d were given %v, more than its %v", trial, p, s, given[p])
				}
			}
		}
		// Work conservation: a queue given less than it has Ready, below
		// its cap, needs a resource its level has given out (within a
		// unit a child, for rounding).
		ready := make([]Res, n)
		used := make([]Res, n)
		for i := n - 1; i >= 0; i-- {
			if ready[i] == nil {
				ready[i], used[i] = make(Res, len(free)), make(Res, len(free))
			}
			if !isParent[i] {
				copy(ready[i], nodes[i].Ready)
				copy(used[i], nodes[i].Used)
			}
			if p := nodes[i].Parent; p >= 0 {
				if ready[p] == nil {
					ready[p], used[p] = make(Res, len(free)), make(Res, len(free))
				}
				for r := range free {
					ready[p][r] += ready[i][r]
					used[p][r] += used[i][r]
				}
			}
		}
		kids := map[int32]int{}
		for _, q := range nodes {
			kids[q.Parent]++
		}
		for i, q := range nodes {
			short, capped := false, q.Cap != nil && used[i][0]+got[i][0]+int64(kids[q.Parent])+2 >= q.Cap[0]
			for r := range free {
				if got[i][r]+int64(kids[q.Parent])+1 < ready[i][r] {
					short = true
				}
			}
			if !short || capped {
				continue
			}
			full := false
			for r := range free {
				if ready[i][r] > 0 && sums[q.Parent][r]+int64(kids[q.Parent])+2 >= given[q.Parent][r] {
					full = true
				}
			}
			if !full {
				t.Fatalf("trial %d: queue %d (%+v) was given %v of its Ready %v, and its level gave %v of %v: something it needs is left",
					trial, i, q, got[i], ready[i], sums[q.Parent], given[q.Parent])
			}
		}
	}
}

// BenchmarkQueueShares splits a round between 1,000 leaves of a 3-level
// tree (10 organizations × 10 projects × 10 tiers, weights and
// guarantees set), the tree `bench sched -queues` schedules with.
func BenchmarkQueueShares(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	var nodes []QueueNode
	for range 10 {
		org := int32(len(nodes))
		nodes = append(nodes, QueueNode{Parent: -1, Weight: 1 + rng.Int64N(3), Guarantee: Res{200_000, 0, 0}})
		for range 10 {
			proj := int32(len(nodes))
			nodes = append(nodes, QueueNode{Parent: org, Weight: 1 + rng.Int64N(3)})
			for tier := range 10 {
				nodes = append(nodes, QueueNode{Parent: proj, Weight: int64(10 - tier),
					Used: Res{rng.Int64N(50_000), rng.Int64N(50 * gib), 0}, Ready: Res{rng.Int64N(100_000), rng.Int64N(100 * gib), 0}})
			}
		}
	}
	free := Res{5_000_000, 5000 * gib, 0}
	b.ResetTimer()
	for range b.N {
		QueueShares(nodes, free)
	}
}
