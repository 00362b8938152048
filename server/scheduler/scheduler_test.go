package scheduler

import (
	"fmt"
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

func run(batch uint64, first, count uint32, cpu float64) Run {
	return Run{Batch: batch, First: first, Count: count, Attempt: 1, CPUMilli: int64(cpu * 1000), Memory: 1 << 30}
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
	in := &Input{
		Instances: []Instance{{1, 8000, 64 << 30}, {2, 2000, 64 << 30}},
		Users: []User{
			{Name: "alice", ReadyMilli: 100_000, Runs: []Run{run(1, 1, 100, 1)}},
			{Name: "bob", ReadyMilli: 100_000, Runs: []Run{run(2, 1, 100, 1)}},
		},
	}
	out := Schedule(in)
	got := placedPerUser(out, in)
	if got["alice"] != 5 || got["bob"] != 5 || out.Jobs != 10 {
		t.Fatalf("placed %v (%d jobs), want 5 each", got, out.Jobs)
	}
}

func TestScheduleFavoursUserWithFewestRunning(t *testing.T) {
	in := &Input{
		Instances: []Instance{{1, 4000, 64 << 30}},
		Users: []User{
			{Name: "busy", RunningMilli: 20_000, ReadyMilli: 50_000, Runs: []Run{run(1, 1, 50, 1)}},
			{Name: "idle", ReadyMilli: 50_000, Runs: []Run{run(2, 1, 50, 1)}},
		},
	}
	got := placedPerUser(Schedule(in), in)
	if got["idle"] != 4 || got["busy"] != 0 {
		t.Fatalf("placed %v, want all 4 cores to the idle user", got)
	}
}

func TestScheduleBestFitAndMemory(t *testing.T) {
	in := &Input{
		Instances: []Instance{{1, 4000, 64 << 30}, {2, 2000, 64 << 30}, {3, 8000, 1 << 30}},
		Users: []User{{Name: "u", ReadyMilli: 2000, Runs: []Run{
			{Batch: 1, First: 1, Count: 1, Attempt: 1, CPUMilli: 2000, Memory: 2 << 30},
		}}},
	}
	out := Schedule(in)
	if len(out.Placements) != 1 || out.Placements[0].Instance != 2 {
		t.Fatalf("placements %+v: want the 2-core instance (best fit; instance 3 lacks memory)", out.Placements)
	}
}

func TestScheduleReportsJobsThatFitNowhereAndBackfills(t *testing.T) {
	in := &Input{
		Instances: []Instance{{1, 4000, 64 << 30}},
		Users:     []User{{Name: "u", ReadyMilli: 20_000, Runs: []Run{run(1, 1, 2, 8), run(1, 3, 3, 1)}}},
	}
	out := Schedule(in)
	if out.Users[0].NotPlaced != 2 || out.Jobs != 3 {
		t.Fatalf("not placed %d, placed %d: want the 2 big jobs skipped and the 3 small ones placed", out.Users[0].NotPlaced, out.Jobs)
	}
}

func TestScheduleStartsOneJobWhenShareIsSmallerThanAJob(t *testing.T) {
	in := &Input{
		Instances: []Instance{{1, 3000, 64 << 30}},
		Users: []User{
			{Name: "a", ReadyMilli: 20_000, Runs: []Run{run(1, 1, 10, 2)}},
			{Name: "b", ReadyMilli: 20_000, Runs: []Run{run(2, 1, 10, 2)}},
		},
	}
	// Shares are 1.5 cores each; jobs need 2. One job must still start.
	out := Schedule(in)
	if out.Jobs != 1 {
		t.Fatalf("placed %d jobs, want 1", out.Jobs)
	}
}

func TestScheduleUsesLeftoversAndRespectsLimit(t *testing.T) {
	in := &Input{
		Instances: []Instance{{1, 10_000, 64 << 30}},
		Users: []User{
			// a wants one core; b's share is then 9 and it gets them all.
			{Name: "a", ReadyMilli: 1000, Runs: []Run{run(1, 1, 1, 1)}},
			{Name: "b", ReadyMilli: 50_000, Runs: []Run{run(2, 1, 50, 1)}},
		},
	}
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
			in.Instances = append(in.Instances, Instance{ID: uint32(i + 1), FreeMilli: 500 + rng.Int64N(16_000), FreeMem: 1<<30 + rng.Int64N(64<<30)})
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
			Runs: []Run{run(uint64(u+1), 1, 200, 1)}})
	}
	b.ResetTimer()
	jobs := 0
	for i := 0; i < b.N; i++ {
		jobs = Schedule(in).Jobs
	}
	b.ReportMetric(float64(jobs), "jobs/round")
}
