package scheduler

import (
	"testing"
	"time"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
)

// TestScheduleStartsNothingForAProjectAtItsSpendLimit: a billing project
// whose accrued and running cost has reached its limit at the round's time
// gets no placement, with room to spare, and the round says why (the
// spend limit, naming the project, whatever else is free); a project with
// a limit it has not reached, and work of projects without one, place as
// usual. The same project a second before its crossing places: the round's
// time decides, not what was true when its input was read.
func TestScheduleStartsNothingForAProjectAtItsSpendLimit(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC).UnixNano()
	// "lab": $10 accrued, $3600 an hour running since t0 ($1 a second),
	// $15 limit: reached at t0+5s. "ok": the same, with a $100 limit.
	running := billing.Budget{Accrued: 10 * money.Dollar}
	running.Run.Add(billing.PriceOf(3600*money.DollarPerHour), t0)
	lab, ok := running, running
	lab.Limit, ok.Limit = 15*money.Dollar, 100*money.Dollar
	build := func(now int64) *Input {
		in := NewInput().Instance(1, Cores(16), 64*GiB).
			User("alice", 0, withProject(NewRun(1, 1, 4, Cores(1), GiB), 1), NewRun(2, 1, 2, Cores(1), GiB)).
			User("bob", 0, withProject(NewRun(3, 1, 3, Cores(1), GiB), 2)).Build()
		in.Now = now
		in.Projects = []Project{{Name: "lab", Budget: lab}, {Name: "ok", Budget: ok}}
		return in
	}
	out := Schedule(build(t0 + 5*int64(time.Second)))
	placed := map[uint64]uint32{}
	for _, p := range out.Placements {
		placed[p.Batch] += p.Count
	}
	if placed[1] != 0 || placed[2] != 2 || placed[3] != 3 {
		t.Fatalf("placed by batch %v: want none of lab's batch 1, both of batch 2 and all 3 of ok's batch 3", placed)
	}
	if len(out.Unplaced) != 1 {
		t.Fatalf("unplaced %+v: want lab's run", out.Unplaced)
	}
	u := out.Unplaced[0]
	if u.Batch != 1 || u.Count != 4 || u.Project != 1 || u.Why.Quota != ReasonSpendLimit || u.Why.Project != "lab" || u.Why.Instances != 1 {
		t.Fatalf("unplaced %+v: want batch 1's 4 jobs, at lab's spend limit", u)
	}
	if ReasonSpendLimit.String() != "spend_limit" {
		t.Fatalf("reason code %q", ReasonSpendLimit)
	}
	if out := Schedule(build(t0 + 4*int64(time.Second))); out.Jobs != 9 || len(out.Unplaced) != 0 {
		t.Fatalf("a second before lab's crossing: placed %d, unplaced %+v; want all 9", out.Jobs, out.Unplaced)
	}
}

func withProject(r Run, project int32) Run {
	r.Project = project
	return r
}
