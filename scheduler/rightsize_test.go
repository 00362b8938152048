package scheduler

import "testing"

func TestLeftForLarger(t *testing.T) {
	two, eight := PoolSize{CPUMilli: Cores(2), Memory: 8 * GiB}, PoolSize{CPUMilli: Cores(8), Memory: 32 * GiB}
	spotTwo := PoolSize{CPUMilli: Cores(2), Memory: 8 * GiB, Spot: true}
	for _, c := range []struct {
		name                  string
		cpu, mem, total, free int64
		sizes                 []PoolSize
		noSpot                bool
		want                  bool
	}{
		{"a 1-core job, an idle 8-core machine, 2-core machines to be had", Cores(1), GiB, Cores(8), Cores(8), []PoolSize{two, eight}, false, true},
		{"the autoscaler would launch an 8-core machine for it (ranked first)", Cores(1), GiB, Cores(8), Cores(8), []PoolSize{eight, two}, false, false},
		{"exactly half the size", Cores(2), GiB, Cores(4), Cores(4), []PoolSize{two}, false, true},
		{"the machine already runs something", Cores(1), GiB, Cores(8), Cores(7), []PoolSize{two}, false, false},
		{"nothing can be launched (a fixed fleet)", Cores(1), GiB, Cores(8), Cores(8), nil, false, false},
		{"only machines as large", Cores(1), GiB, Cores(8), Cores(8), []PoolSize{eight}, false, false},
		{"the small machine lacks the memory", Cores(1), 16 * GiB, Cores(8), Cores(8), []PoolSize{two, eight}, false, false},
		{"the first that holds it is small", Cores(1), 16 * GiB, Cores(32), Cores(32), []PoolSize{two, eight}, false, true},
		{"the small machine lacks the cores", Cores(3), GiB, Cores(8), Cores(8), []PoolSize{two}, false, false},
		{"more than half the size", Cores(2), GiB, Cores(3), Cores(3), []PoolSize{two}, false, false},
		{"total unknown", Cores(1), GiB, 0, Cores(8), []PoolSize{two}, false, false},
		{"a job kept off spot: the small spot machine is never launched for it", Cores(1), GiB, Cores(8), Cores(8), []PoolSize{spotTwo, eight}, true, false},
		{"a job that may take spot: it is", Cores(1), GiB, Cores(8), Cores(8), []PoolSize{spotTwo, eight}, false, true},
	} {
		if got := LeftForLarger(c.cpu, c.mem, c.total, c.free, c.sizes, c.noSpot); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestScheduleLeavesIdleLargeMachinesToLargerJobs: with 2-core machines
// to be had, 1-core jobs leave an idle 8-core machine to the 8-core job
// that comes after them in fair-share order (a run that failed for the
// rule does not fail a larger one), fill room on a machine already busy,
// and, with nothing smaller to launch, take the large machine.
func TestScheduleLeavesIdleLargeMachinesToLargerJobs(t *testing.T) {
	build := func(sizes ...PoolSize) *Input {
		in := NewInput().
			Instance(1, Cores(8), 32*GiB).
			User("small", 0, NewRun(1, 1, 2, Cores(1), GiB)).
			User("large", Cores(1), NewRun(2, 1, 1, Cores(8), 8*GiB)).Build()
		in.Launchable = sizes
		return in
	}
	out := Schedule(build())
	if out.Jobs != 2 || out.Placements[0].Batch != 1 {
		t.Fatalf("no autoscaler: placements %+v, want the 2 small jobs on the idle machine", out.Placements)
	}
	out = Schedule(build(PoolSize{CPUMilli: Cores(2), Memory: 8 * GiB}))
	if out.Jobs != 1 || out.Placements[0].Batch != 2 {
		t.Fatalf("2-core machines to be had: placements %+v, want the 8-core job alone", out.Placements)
	}
	if len(out.Unplaced) != 1 || out.Unplaced[0].Batch != 1 || out.Unplaced[0].Why.Count(ReasonLeftForLarger) != 1 {
		t.Fatalf("unplaced %+v, want the small jobs, the machine left to larger ones", out.Unplaced)
	}
	// Another pool's sizes do not count.
	if out = Schedule(build(PoolSize{Pool: "other", CPUMilli: Cores(2), Memory: 8 * GiB})); out.Jobs != 2 {
		t.Fatalf("sizes of another pool: placed %d, want 2", out.Jobs)
	}
	// A machine already running something takes the small jobs.
	in := build(PoolSize{CPUMilli: Cores(2), Memory: 8 * GiB})
	in.Users = in.Users[:1]
	in.Instances = append(in.Instances, Instance{ID: 2, CPUMilli: Cores(16), Memory: 64 * GiB, FreeMilli: Cores(12), FreeMem: 48 * GiB})
	out = Schedule(in)
	if out.Jobs != 2 || out.Placements[0].Instance != 2 {
		t.Fatalf("placements %+v, want both small jobs on the busy 16-core machine", out.Placements)
	}
}
