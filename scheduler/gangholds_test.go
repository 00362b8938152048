package scheduler

import (
	"testing"
)

// gangStream runs rounds over four 8-core workers, full of one-core jobs
// that end one or two at a time, while one user waits with a gang of two
// 8-core members (first in line: it runs nothing) and another keeps a
// stream of one-core jobs Ready. It
// returns the round the gang started in (0: it never did in rounds), and
// where.
func gangStream(t *testing.T, rounds int) (int, map[uint32]int64) {
	t.Helper()
	type job struct {
		inst int
		end  int
	}
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).
		Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
	var running []job
	for w := range 4 {
		for j := range 8 {
			running = append(running, job{w, 1 + (w*8+j)*3%29})
		}
		in.Instances[w].FreeMilli, in.Instances[w].FreeMem = 0, 24*GiB
	}
	next := uint32(1)
	for tick := 1; tick <= rounds; tick++ {
		kept := running[:0]
		for _, j := range running {
			if j.end <= tick {
				in.Instances[j.inst].FreeMilli += Cores(1)
				in.Instances[j.inst].FreeMem += GiB
				continue
			}
			kept = append(kept, j)
		}
		running = kept
		gang := []Run{NewRun(1, 1, 2, Cores(8), GiB)}
		gang[0].Gang = 1
		in.Users = []User{
			{Name: "gang", ReadyMilli: Cores(16), Runs: gang},
			{Name: "stream", RunningMilli: int64(len(running)) * Cores(1), ReadyMilli: Cores(1000), Runs: []Run{NewRun(2, next, 1000, Cores(1), GiB)}},
		}
		in.Shares = nil
		out := Schedule(in)
		byInst := map[uint32]int{}
		for i := range in.Instances {
			byInst[in.Instances[i].ID] = i
		}
		on := map[uint32]int64{}
		for _, p := range out.Placements {
			w := byInst[p.Instance]
			if p.Batch == 1 {
				on[p.Instance] += int64(p.Count)
				continue
			}
			for k := range p.Count {
				running = append(running, job{w, tick + 3 + int(p.First+k)*7%11})
			}
			next += p.Count
			in.Instances[w].FreeMilli -= int64(p.Count) * Cores(1)
			in.Instances[w].FreeMem -= int64(p.Count) * GiB
		}
		if len(on) > 0 {
			return tick, on
		}
	}
	return 0, nil
}

// TestGangHoldEndsStarvation: a gang that needs two whole workers, beside
// a stream of one-core jobs that takes every core as it frees, never
// starts without room held for it; with the hold, the two workers it is
// held on drain (no new job lands below what is held) and the gang starts
// on them, each member on a worker of its own.
func TestGangHoldEndsStarvation(t *testing.T) {
	defer func(n int) { maxGangHolds = n }(maxGangHolds)
	maxGangHolds = 0
	if tick, _ := gangStream(t, 300); tick != 0 {
		t.Fatalf("without holds the gang started in round %d; the test's stream is meant to starve it", tick)
	}
	maxGangHolds = 8
	tick, on := gangStream(t, 300)
	if tick == 0 {
		t.Fatal("the gang never started in 300 rounds with room held for it")
	}
	if len(on) != 2 {
		t.Fatalf("gang placed %v; want one member on each of two workers", on)
	}
	for id, n := range on {
		if n != 1 {
			t.Fatalf("worker %d took %d members; want 1", id, n)
		}
	}
	t.Logf("the gang started in round %d", tick)
}

// TestGangHoldBackfillsAboveIt: other jobs may use a held worker's room
// above what is held there, never what is held; a job refused for that
// is told so (held_for_gang), and the gang's own reason names the
// workers held and the room they have now.
func TestGangHoldBackfillsAboveIt(t *testing.T) {
	// Two 16-core workers: 1 has 6 cores free, 2 all 16. The gang needs
	// two 12-core members: held 12 cores on each, so 4 of worker 2's
	// cores are left to others and none of worker 1's.
	in := NewInput().Instance(1, Cores(16), 64*GiB).Instance(2, Cores(16), 64*GiB).Build()
	in.Instances[0].FreeMilli = Cores(6)
	gang := []Run{NewRun(1, 1, 2, Cores(12), GiB)}
	gang[0].Gang = 1
	in.Users = []User{
		{Name: "a", ReadyMilli: Cores(24), Runs: gang},
		{Name: "b", RunningMilli: Cores(10), ReadyMilli: Cores(12), Runs: []Run{NewRun(2, 1, 3, Cores(4), GiB)}},
	}
	out := Schedule(in)
	if out.Jobs != 1 || out.Placements[0].Batch != 2 || out.Placements[0].Instance != 2 {
		t.Fatalf("placed %+v; want one 4-core job, on worker 2 above its hold", out.Placements)
	}
	if len(out.Holds) != 1 || len(out.Holds[0].On) != 2 || out.Holds[0].Members != 2 {
		t.Fatalf("holds %+v; want the gang's, on both workers", out.Holds)
	}
	for _, on := range out.Holds[0].On {
		// Worker 1: 6 cores free; worker 2: 16, less the job above the hold.
		if want := map[uint32]int64{1: Cores(6), 2: Cores(12)}[on.Instance]; on.HeldMilli != Cores(12) || on.HeldMem != GiB || on.FreeMilli != want {
			t.Fatalf("held on %+v; want 1 member's room, %d millicores free", on, want)
		}
	}
	var gangWhy, jobWhy *Explanation
	for i := range out.Unplaced {
		switch out.Unplaced[i].Batch {
		case 1:
			gangWhy = &out.Unplaced[i].Why
		case 2:
			jobWhy = &out.Unplaced[i].Why
		}
	}
	if gangWhy == nil || gangWhy.Quota != ReasonGang || gangWhy.Held != 2 || gangWhy.HeldRoom != 1 {
		t.Fatalf("gang's why %+v; want gang_room, held on 2 workers with room for 1 member now", gangWhy)
	}
	if jobWhy == nil || jobWhy.Count(ReasonGangHeld) != 2 {
		t.Fatalf("job's why %+v; want both workers counted as held for the gang", jobWhy)
	}
}

// TestGangHoldNeedsRoomThatWouldStartIt: a gang its queue's quota
// refuses, or larger than any cluster, holds nothing: the other user's
// jobs take the room.
func TestGangHoldNeedsRoomThatWouldStartIt(t *testing.T) {
	in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).Build()
	in.Instances[0].FreeMilli = Cores(4)
	gang := []Run{NewRun(1, 1, 3, Cores(8), GiB)} // 24 cores: no cluster has them
	gang[0].Gang = 1
	in.Users = []User{
		{Name: "a", ReadyMilli: Cores(24), Runs: gang},
		{Name: "b", RunningMilli: Cores(4), ReadyMilli: Cores(12), Runs: []Run{NewRun(2, 1, 12, Cores(1), GiB)}},
	}
	out := Schedule(in)
	if len(out.Holds) != 0 || out.Jobs != 12 {
		t.Fatalf("holds %+v, placed %d jobs; want no hold and all 12 small jobs placed", out.Holds, out.Jobs)
	}
}

// TestGangHoldBindsThoseServedAfterIt: the hold is made as the round's
// walk reaches the gang, so users fair share serves before the gang's
// place first, and those after keep off the held room.
func TestGangHoldBindsThoseServedAfterIt(t *testing.T) {
	round := func(gangRunning, otherRunning int64) *Output {
		in := NewInput().Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).Build()
		gang := []Run{NewRun(1, 1, 2, Cores(8), GiB)}
		gang[0].Gang = 1
		in.Users = []User{
			{Name: "g", RunningMilli: gangRunning, ReadyMilli: Cores(16), Runs: gang},
			{Name: "o", RunningMilli: otherRunning, ReadyMilli: Cores(4), Runs: []Run{NewRun(2, 1, 4, Cores(1), GiB)}},
		}
		return Schedule(in)
	}
	count := func(out *Output, batch uint64) (n uint32) {
		for _, p := range out.Placements {
			if p.Batch == batch {
				n += p.Count
			}
		}
		return n
	}
	// The gang's user runs more: the other user is served first, and
	// takes 4 cores before the gang is reached; the gang then waits with
	// room held.
	out := round(Cores(100), 0)
	if count(out, 2) != 4 || count(out, 1) != 0 || len(out.Holds) != 1 {
		t.Fatalf("gang's user behind: placed %+v, holds %+v; want the 4 small jobs placed, the gang held for", out.Placements, out.Holds)
	}
	// The gang's user runs less: room is held for it first, the other
	// user's jobs keep off it, and the gang starts in the last pass.
	out = round(0, Cores(100))
	if count(out, 1) != 2 || count(out, 2) != 0 {
		t.Fatalf("gang's user first: placed %+v; want the gang, and no small job in its room", out.Placements)
	}
}
