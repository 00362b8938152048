package scheduler

import (
	"fmt"
	"github.com/drover-sched/drover/placement"
	"math/rand/v2"
	"testing"
)

func TestFairShare(t *testing.T) {
	cases := []struct {
		name  string
		users []Demand
		free  int64
		want  []int64
	}{
		{"equal split", []Demand{{0, 100}, {0, 100}}, 10, []int64{5, 5}},
		{"fewest running first", []Demand{{10, 100}, {0, 100}}, 10, []int64{0, 10}},
		{"then equal above the next level", []Demand{{10, 100}, {0, 100}}, 14, []int64{2, 12}},
		{"capped by demand", []Demand{{0, 100}, {0, 3}}, 10, []int64{7, 3}},
		{"everything fits", []Demand{{5, 2}, {0, 3}}, 100, []int64{2, 3}},
		{"no demand", []Demand{{0, 0}, {4, 0}}, 100, []int64{0, 0}},
		{"remainder goes to fewest running", []Demand{{0, 100}, {0, 100}, {0, 100}}, 10, []int64{4, 3, 3}},
		{"three levels", []Demand{{0, 100}, {4, 100}, {8, 100}}, 12, []int64{8, 4, 0}},
		{"nothing free", []Demand{{0, 10}}, 0, []int64{0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FairShare(tc.users, tc.free)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("FairShare(%v, %d) = %v, want %v", tc.users, tc.free, got, tc.want)
			}
		})
	}
}

// TestFairShareProperties checks water filling on random inputs: the total is
// exact, nobody gets more than it asked for, and nobody ends above another
// user who still wanted more (beyond one millicore of rounding).
func TestFairShareProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		n := 1 + rng.IntN(20)
		users := make([]Demand, n)
		var total int64
		for i := range users {
			users[i] = Demand{Running: rng.Int64N(50_000), Ready: rng.Int64N(30_000)}
			total += users[i].Ready
		}
		free := rng.Int64N(200_000)
		alloc := FairShare(users, free)
		var sum int64
		for i, a := range alloc {
			if a < 0 || a > users[i].Ready {
				t.Fatalf("user %d gets %d of %d ready", i, a, users[i].Ready)
			}
			sum += a
		}
		if sum != min(free, total) {
			t.Fatalf("allocations sum to %d, want %d (%v, free %d)", sum, min(free, total), users, free)
		}
		for u := range users {
			for v := range users {
				if alloc[u] > 0 && alloc[v] < users[v].Ready &&
					users[u].Running+alloc[u] > users[v].Running+alloc[v]+1 {
					t.Fatalf("user %d ends at %d while user %d, still wanting, ends at %d", u,
						users[u].Running+alloc[u], v, users[v].Running+alloc[v])
				}
			}
		}
	}
}

// oneCore is a run of one-core, 1 GiB jobs.
func oneCore(batch uint64, first, count uint32) Run {
	return NewRun(batch, first, count, Cores(1), GiB)
}

func placedPerUser(out *Output, in *Input) map[string]int64 {
	owner := map[uint64]string{}
	for _, u := range in.Users {
		for _, r := range u.Runs {
			owner[r.Batch] = u.Name
		}
	}
	got := map[string]int64{}
	for _, p := range out.Placements {
		got[owner[p.Batch]] += int64(p.Count)
	}
	return got
}

func TestScheduleSplitsFairly(t *testing.T) {
	in := NewInput().Instance(1, Cores(8), 64*GiB).Instance(2, Cores(2), 64*GiB).
		User("alice", 0, oneCore(1, 1, 100)).
		User("bob", 0, oneCore(2, 1, 100)).Build()
	out := Schedule(in)
	got := placedPerUser(out, in)
	if got["alice"] != 5 || got["bob"] != 5 || out.Jobs != 10 {
		t.Fatalf("placed %v (%d jobs), want 5 each", got, out.Jobs)
	}
	// The rest waits because the cores are taken, not because it is too big.
	if len(out.Unplaced) != 2 || out.Unplaced[0].First != 6 || out.Unplaced[0].Count != 95 ||
		out.Unplaced[1].Why.Count(ReasonCPUFree) != 2 || len(out.Unplaced[1].Why.Filtered) != 1 {
		t.Fatalf("unplaced %+v, want both tails waiting for busy cores", out.Unplaced)
	}
}

// TestScheduleUsesTheSharesItIsGiven: the shares in the input (the
// view's, computed once with Shares) are the first pass's allocation, as
// given; shares that do not match the users are computed again.
func TestScheduleUsesTheSharesItIsGiven(t *testing.T) {
	build := func(shares []int64) *Input {
		in := NewInput().Instance(1, Cores(8), 64*GiB).Instance(2, Cores(2), 64*GiB).
			User("alice", 0, oneCore(1, 1, 100)).
			User("bob", 0, oneCore(2, 1, 100)).Build()
		in.Shares = shares
		return in
	}
	if s := Shares(build(nil)); len(s) != 2 || s[0] != Cores(5) || s[1] != Cores(5) {
		t.Fatalf("Shares = %v, want 5 cores each", s)
	}
	in := build([]int64{Cores(8), Cores(2)})
	out := Schedule(in)
	if got := placedPerUser(out, in); got["alice"] != 8 || got["bob"] != 2 || out.Users[0].Share != Cores(8) || out.Users[1].Share != Cores(2) {
		t.Fatalf("placed %v with shares %+v, want the given 8 and 2", got, out.Users)
	}
	in = build([]int64{Cores(8)})
	if got := placedPerUser(Schedule(in), in); got["alice"] != 5 || got["bob"] != 5 {
		t.Fatalf("placed %v with one share for two users, want them computed: 5 each", got)
	}
}

func TestScheduleFavoursUserWithFewestRunning(t *testing.T) {
	in := NewInput().Instance(1, Cores(4), 64*GiB).
		User("busy", Cores(20), oneCore(1, 1, 50)).
		User("idle", 0, oneCore(2, 1, 50)).Build()
	got := placedPerUser(Schedule(in), in)
	if got["idle"] != 4 || got["busy"] != 0 {
		t.Fatalf("placed %v, want all 4 cores to the idle user", got)
	}
}

func TestScheduleBestFitAndMemory(t *testing.T) {
	in := NewInput().
		Instance(1, Cores(4), 64*GiB).
		Instance(2, Cores(2), 64*GiB).
		Instance(3, Cores(8), GiB).
		User("u", 0, NewRun(1, 1, 1, Cores(2), 2*GiB)).Build()
	out := Schedule(in)
	if len(out.Placements) != 1 || out.Placements[0].Instance != 2 {
		t.Fatalf("placements %+v: want the 2-core instance (best fit; instance 3 lacks memory)", out.Placements)
	}
}

func TestScheduleReportsJobsThatFitNowhereAndBackfills(t *testing.T) {
	in := NewInput().Instance(1, Cores(4), 64*GiB).
		User("u", 0, NewRun(1, 1, 2, Cores(8), GiB), oneCore(1, 3, 3)).Build()
	out := Schedule(in)
	if out.Users[0].NotPlaced != 2 || out.Jobs != 3 {
		t.Fatalf("not placed %d, placed %d: want the 2 big jobs skipped and the 3 small ones placed", out.Users[0].NotPlaced, out.Jobs)
	}
	want := Unplaced{User: "u", Batch: 1, First: 1, Count: 2, CPUMilli: 8000, Memory: 1 << 30,
		Why: Explanation{Instances: 1, Filtered: []ReasonCount{{ReasonCPUCapacity, 1}}}}
	if len(out.Unplaced) != 1 || fmt.Sprint(out.Unplaced[0]) != fmt.Sprint(want) {
		t.Fatalf("unplaced %+v, want %+v", out.Unplaced, want)
	}
}

// TestScheduleExplainsWhyARunWaits checks that the chain tells instances
// too small for a job apart from instances too busy for it, and counts each
// instance once, against the first filter that rejects it.
func TestScheduleExplainsWhyARunWaits(t *testing.T) {
	in := NewInput().
		Instance(1, Cores(2), 64*GiB).                         // too few cores in all
		Instance(2, Cores(16), 4*GiB).                         // too little memory in all
		Instance(3, Cores(16), 64*GiB).Free(Cores(1), 60*GiB). // cores busy
		Instance(4, Cores(16), 64*GiB).Free(Cores(8), 2*GiB).  // memory busy
		Instance(5, Cores(2), 2*GiB).Free(0, 0).               // small and full: capacity wins
		Instance(6, Cores(16), 64*GiB).Free(Cores(3), 64*GiB). // takes 3 of the small jobs
		User("big", 0, NewRun(7, 1, 5, Cores(4), 8*GiB)).
		User("small", Cores(100), oneCore(8, 1, 3)).Build()
	out := Schedule(in)
	if out.Jobs != 3 {
		t.Fatalf("placed %d jobs, want the 3 small ones", out.Jobs)
	}
	if len(out.Unplaced) != 1 {
		t.Fatalf("unplaced %+v, want the big user's run only", out.Unplaced)
	}
	u := out.Unplaced[0]
	if u.User != "big" || u.Batch != 7 || u.First != 1 || u.Count != 5 || u.Why.Instances != 6 {
		t.Fatalf("unplaced %+v", u)
	}
	for r, n := range map[Reason]int{ReasonCPUCapacity: 2, ReasonMemoryCapacity: 1, ReasonCPUFree: 2, ReasonMemoryFree: 1} {
		if got := u.Why.Count(r); got != n {
			t.Errorf("%v: %d instances, want %d (%+v)", r, got, n, u.Why)
		}
	}
}

// TestScheduleExplanationSeesEarlierPlacements: a job that fit before the
// round placed others is explained with what is free after them.
func TestScheduleExplanationSeesEarlierPlacements(t *testing.T) {
	in := NewInput().Instance(1, Cores(4), 64*GiB).
		User("a", 0, NewRun(1, 1, 1, Cores(3), GiB)).
		User("b", Cores(1), NewRun(2, 1, 1, Cores(2), GiB)).Build()
	out := Schedule(in)
	if out.Jobs != 1 || len(out.Unplaced) != 1 || out.Unplaced[0].User != "b" {
		t.Fatalf("placed %d, unplaced %+v: want a placed and b waiting", out.Jobs, out.Unplaced)
	}
	if n := out.Unplaced[0].Why.Count(ReasonCPUFree); n != 1 {
		t.Fatalf("why %+v: want the one instance counted as cores busy", out.Unplaced[0].Why)
	}
}

// zoneFilter is a chain link a later issue might add: only some instances
// may take a batch's jobs.
type zoneFilter map[uint32]bool

func (z zoneFilter) Reason() Reason                     { return 200 }
func (z zoneFilter) Feasible(c *Candidate, _ *Run) bool { return z[c.ID] }

func TestScheduleWithCustomChain(t *testing.T) {
	in := NewInput().Instance(1, Cores(8), 64*GiB).Instance(2, Cores(4), 64*GiB).
		User("u", 0, oneCore(1, 1, 6)).Build()
	out := ScheduleWith([]Filter{zoneFilter{1: true}}, in)
	for _, p := range out.Placements {
		if p.Instance != 1 {
			t.Fatalf("placement %+v on an instance the chain refuses", p)
		}
	}
	if out.Jobs != 6 {
		t.Fatalf("placed %d, want 6 on instance 1", out.Jobs)
	}
	// The resource links always apply after the extra ones.
	in = NewInput().Instance(1, Cores(8), 64*GiB).Free(0, 0).User("u", 0, oneCore(1, 1, 1)).Build()
	in.Instances = append(in.Instances, Instance{ID: 2, CPUMilli: Cores(8), Memory: 64 * GiB, FreeMilli: Cores(1) / 2, FreeMem: GiB})
	out = ScheduleWith([]Filter{zoneFilter{1: true, 2: true}}, in)
	if out.Jobs != 0 || len(out.Unplaced) != 1 || out.Unplaced[0].Why.Count(ReasonCPUFree) != 2 {
		t.Fatalf("placed %d, unplaced %+v", out.Jobs, out.Unplaced)
	}
	if got := Reason(200).String(); got != "reason(200)" {
		t.Fatalf("unknown reason prints %q", got)
	}
}

func TestScheduleStartsOneJobWhenShareIsSmallerThanAJob(t *testing.T) {
	in := NewInput().Instance(1, Cores(3), 64*GiB).
		User("a", 0, NewRun(1, 1, 10, Cores(2), GiB)).
		User("b", 0, NewRun(2, 1, 10, Cores(2), GiB)).Build()
	// Shares are 1.5 cores each; jobs need 2. One job must still start.
	out := Schedule(in)
	if out.Jobs != 1 {
		t.Fatalf("placed %d jobs, want 1", out.Jobs)
	}
}

func TestScheduleUsesLeftoversAndRespectsLimit(t *testing.T) {
	// a wants one core; b's share is then 9 and it gets them all.
	in := NewInput().Instance(1, Cores(10), 64*GiB).
		User("a", 0, oneCore(1, 1, 1)).
		User("b", 0, oneCore(2, 1, 50)).Build()
	out := Schedule(in)
	got := placedPerUser(out, in)
	if got["a"] != 1 || got["b"] != 9 {
		t.Fatalf("placed %v, want a=1 b=9", got)
	}
	in.MaxPlacements = 4
	if out := Schedule(in); out.Jobs != 4 {
		t.Fatalf("placed %d with a limit of 4", out.Jobs)
	}
}

func TestScheduleNeverOversubscribes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 200; iter++ {
		in := &Input{}
		for i := 0; i < 1+rng.IntN(20); i++ {
			inst := Instance{ID: uint32(i + 1), CPUMilli: 16_500, Memory: 65 << 30,
				FreeMilli: 500 + rng.Int64N(16_000), FreeMem: 1<<30 + rng.Int64N(64<<30)}
			if rng.IntN(3) == 0 {
				inst.FreeMilli, inst.FreeMem = inst.CPUMilli, inst.Memory // idle
			}
			in.Instances = append(in.Instances, inst)
		}
		// Sometimes machines the autoscaler can launch (the right-sizing
		// rule then leaves some idle instances to larger jobs).
		for i := 0; i < rng.IntN(3); i++ {
			in.Launchable = append(in.Launchable, PoolSize{CPUMilli: 1000 * (1 + rng.Int64N(8)), Memory: rng.Int64N(16 << 30)})
		}
		var batch uint64
		for u := 0; u < 1+rng.IntN(10); u++ {
			user := User{Name: fmt.Sprint("u", u), RunningMilli: rng.Int64N(10_000)}
			for r := 0; r < 1+rng.IntN(5); r++ {
				batch++
				rn := Run{Batch: batch, First: 1, Count: uint32(1 + rng.IntN(50)), Attempt: 1,
					CPUMilli: 100 + rng.Int64N(4000), Memory: rng.Int64N(8 << 30)}
				user.ReadyMilli += int64(rn.Count) * rn.CPUMilli
				user.Runs = append(user.Runs, rn)
			}
			in.Users = append(in.Users, user)
		}
		out := Schedule(in)
		used := map[uint32][2]int64{}
		size := map[uint64]Run{}
		for _, u := range in.Users {
			for _, r := range u.Runs {
				size[r.Batch] = r
			}
		}
		for _, p := range out.Placements {
			r := size[p.Batch]
			if p.First < r.First || p.First+p.Count > r.First+r.Count {
				t.Fatalf("placement %+v outside run %+v", p, r)
			}
			u := used[p.Instance]
			used[p.Instance] = [2]int64{u[0] + int64(p.Count)*r.CPUMilli, u[1] + int64(p.Count)*r.Memory}
		}
		for _, inst := range in.Instances {
			if u := used[inst.ID]; u[0] > inst.FreeMilli || u[1] > inst.FreeMem {
				t.Fatalf("instance %+v given %v", inst, u)
			}
		}
		// A run reported unplaced fits on no instance after the round, and
		// its explanation accounts for every instance once.
		for _, un := range out.Unplaced {
			r := size[un.Batch]
			total := 0
			for _, rc := range un.Why.Filtered {
				total += rc.Instances
			}
			if total != len(in.Instances) || un.Why.Instances != len(in.Instances) {
				t.Fatalf("explanation %+v covers %d of %d instances", un.Why, total, len(in.Instances))
			}
			for _, inst := range in.Instances {
				u := used[inst.ID]
				// An instance idle at the start that the run left to
				// larger jobs may have been taken in part by one later
				// in the round: the next round offers it.
				if inst.FreeMilli-u[0] >= r.CPUMilli && inst.FreeMem-u[1] >= r.Memory && !LeftForLarger(r.CPUMilli, r.Memory, inst.CPUMilli, inst.FreeMilli, in.Launchable, false) {
					t.Fatalf("run %+v reported unplaced but fits on %+v after the round", un, inst)
				}
			}
		}
	}
}

func BenchmarkFairShare10kUsers(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	users := make([]Demand, 10_000)
	for i := range users {
		users[i] = Demand{Running: rng.Int64N(100_000), Ready: rng.Int64N(100_000)}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		FairShare(users, 5_000_000)
	}
}

// BenchmarkSchedule10kInstances bin-packs 20,000 one-core jobs of 100 users
// onto 10,000 instances with 2-16 free cores each.
func BenchmarkSchedule10kInstances(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	in := &Input{}
	for i := 0; i < 10_000; i++ {
		in.Instances = append(in.Instances, Instance{ID: uint32(i + 1), FreeMilli: 2000 + 1000*rng.Int64N(15), FreeMem: 64 << 30})
	}
	for u := 0; u < 100; u++ {
		in.Users = append(in.Users, User{Name: fmt.Sprint("user", u), RunningMilli: rng.Int64N(50_000), ReadyMilli: 200_000,
			Runs: []Run{oneCore(uint64(u+1), 1, 200)}})
	}
	b.ResetTimer()
	jobs := 0
	for i := 0; i < b.N; i++ {
		jobs = Schedule(in).Jobs
	}
	b.ReportMetric(float64(jobs), "jobs/round")
}

// TestScheduleIgnoresInstanceOrder: the state hands instances over in map
// order; the decision must not depend on it.
func TestScheduleIgnoresInstanceOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	b := NewInput()
	for i := 0; i < 50; i++ {
		b.Instance(uint32(i+1), Cores(float64(2+rng.IntN(6))), 16*GiB) // many equal sizes: ties
	}
	in := b.User("a", 0, oneCore(1, 1, 70), NewRun(2, 1, 9, Cores(3), GiB)).User("b", Cores(2), oneCore(3, 1, 40)).Build()
	want := fmt.Sprint(Schedule(in).Placements)
	for k := 0; k < 20; k++ {
		rng.Shuffle(len(in.Instances), func(i, j int) { in.Instances[i], in.Instances[j] = in.Instances[j], in.Instances[i] })
		if got := fmt.Sprint(Schedule(in).Placements); got != want {
			t.Fatalf("placements depend on the order of the instances:\n%s\nvs\n%s", got, want)
		}
	}
}

// TestScheduleSplitsLeftoversFairly: a share one user cannot use (its jobs
// fit nowhere) is split between the others by fair share again, not given
// to whichever comes first. Before, y took all 4 leftover cores (8 to z's
// 4).
func TestScheduleSplitsLeftoversFairly(t *testing.T) {
	in := NewInput().Instance(1, Cores(6), 64*GiB).Instance(2, Cores(6), 64*GiB).
		User("x", 0, NewRun(1, 1, 10, Cores(8), GiB)).
		User("y", 0, oneCore(2, 1, 50)).
		User("z", 0, oneCore(3, 1, 50)).Build()
	out := Schedule(in)
	got := placedPerUser(out, in)
	if got["x"] != 0 || got["y"] != 6 || got["z"] != 6 {
		t.Fatalf("placed %v, want x=0 y=6 z=6", got)
	}
	// A user with little to run takes what it has; the other's share is
	// the rest, in as many of its jobs as fit.
	in = NewInput().Instance(1, Cores(12), 64*GiB).
		User("v", 0, oneCore(1, 1, 2)).
		User("w", 0, NewRun(2, 1, 10, Cores(4), GiB)).Build()
	out = Schedule(in)
	if got := placedPerUser(out, in); got["v"] != 2 || got["w"] != 2 {
		t.Fatalf("placed %v, want v=2 (all it has) and w=2 (10 cores left, 4 each)", got)
	}
}

// BenchmarkScheduleQueues is a round of the tree drover bench sched
// -queues makes (10 x 10 x 10 leaves, each guaranteed 80% of an even
// split), 1,000 users one per leaf, over 500 workers of 64 cores with a
// tenth free.
func BenchmarkScheduleQueues(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 9))
	in := &Input{}
	for i := range 500 {
		in.Instances = append(in.Instances, Instance{ID: uint32(i + 1), CPUMilli: Cores(64), Memory: 256 << 30, FreeMilli: 1000 * rng.Int64N(13), FreeMem: 64 << 30})
	}
	leaf := Cores(64) * 500 * 8 / 10 / 1000
	for o := range 10 {
		org := int32(len(in.Queues))
		in.Queues = append(in.Queues, Queue{Name: fmt.Sprint("o", o), Parent: -1, Weight: 1, Guarantee: placement.Resources{CPUMilli: leaf * 100}})
		for p := range 10 {
			proj := int32(len(in.Queues))
			in.Queues = append(in.Queues, Queue{Name: fmt.Sprint("o", o, "/p", p), Parent: org, Weight: 1, Guarantee: placement.Resources{CPUMilli: leaf * 10}})
			for t := range 10 {
				in.Queues = append(in.Queues, Queue{Name: fmt.Sprint("o", o, "/p", p, "/t", t), Parent: proj, Weight: int64(10 - t),
					Guarantee: placement.Resources{CPUMilli: leaf}, Quota: placement.Quota{UsedMilli: rng.Int64N(2 * leaf)}})
			}
		}
	}
	for u := range 1000 {
		q := int32(0)
		for i := range in.Queues {
			if in.Queues[i].Name == fmt.Sprint("o", u/100, "/p", u/10%10, "/t", u%10) {
				q = int32(i + 1)
			}
		}
		r := NewRun(uint64(u+1), 1, 1000, 1000*(1+rng.Int64N(4)), 2<<30)
		r.Queue = q
		in.Users = append(in.Users, User{Name: fmt.Sprint("user", u), RunningMilli: rng.Int64N(50_000), ReadyMilli: 1000 * r.CPUMilli, Runs: []Run{r}, Queue: q})
	}
	in.Shares = Shares(in)
	b.ResetTimer()
	jobs := 0
	for b.Loop() {
		jobs = Schedule(in).Jobs
	}
	b.ReportMetric(float64(jobs), "jobs/round")
}

func BenchmarkScheduleQueuesFlat(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 9))
	in := &Input{}
	for i := range 500 {
		in.Instances = append(in.Instances, Instance{ID: uint32(i + 1), CPUMilli: Cores(64), Memory: 256 << 30, FreeMilli: 1000 * rng.Int64N(13), FreeMem: 64 << 30})
	}
	for u := range 1000 {
		r := NewRun(uint64(u+1), 1, 1000, 1000*(1+rng.Int64N(4)), 2<<30)
		in.Users = append(in.Users, User{Name: fmt.Sprint("user", u), RunningMilli: rng.Int64N(50_000), ReadyMilli: 1000 * r.CPUMilli, Runs: []Run{r}})
	}
	in.Shares = Shares(in)
	b.ResetTimer()
	for b.Loop() {
		Schedule(in)
	}
}

// TestPastUseWeighsInFairShare: a user whose past use weighs as 4 cores
// is given 4 fewer of 10 free cores than one who ran nothing, and is
// served second; with no past use they split evenly.
func TestPastUseWeighsInFairShare(t *testing.T) {
	in := NewInput().Instance(1, Cores(8), 64*GiB).Instance(2, Cores(2), 64*GiB).
		User("alice", 0, oneCore(1, 1, 100)).
		User("bob", 0, oneCore(2, 1, 100)).Build()
	in.Users[0].PastMilli = 4000
	out := Schedule(in)
	if got := placedPerUser(out, in); got["alice"] != 3 || got["bob"] != 7 {
		t.Fatalf("placed %v, want alice 3 and bob 7 (alice's past use weighs as 4 cores)", got)
	}
	if !ServedBefore(in.Users[1].standing(), "bob", in.Users[0].standing(), "alice") {
		t.Fatal("alice, with past use, is served before bob")
	}
}
