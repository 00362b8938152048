package leader

import (
	"sync"
	"time"

	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// The state keeps the scheduling state and the scheduler decides; neither
// knows the other. server/view reads the scheduler's input from the
// state; PlanOf turns the decision back into a command.

// Scheduler runs the leader's scheduling round: it reads the round's
// input from the state in one consistent read (view.Scheduling), adds
// what each pool can launch now (Input.Launchable, the autoscaler's last
// decision), decides (scheduler.Schedule) and turns the decision into the
// Plan command that records it. The server's leader loop and both
// simulators run it: a round in the simulator is the server's round.
type Scheduler struct {
	// Clock tells the round's time and stamps its plan.
	Clock Clock
	// MaxJobs bounds the jobs a round places (0: no bound).
	MaxJobs int
	// Launchable, when set, is what each pool can launch now.
	Launchable func() []scheduler.PoolSize
	// Silent, when set, marks the workers the leader has not heard from
	// for long enough at the round's time that their clusters read as
	// down.
	Silent func(inst uint32, now time.Time) bool
	// Read, when set, wraps the consistent read (the server measures the
	// lock waits of the round's read with it).
	Read func(read func())

	mu      sync.Mutex
	holds   []scheduler.GangHold
	holdsAt time.Time
}

// Holds returns the room the last round held for gangs first in line
// (scheduler.Output.Holds) and that round's time: the preemption round
// (Preemptor.Holds) frees room for those gangs where it is held.
func (s *Scheduler) Holds() ([]scheduler.GangHold, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds, s.holdsAt
}

func (s *Scheduler) setHolds(h []scheduler.GangHold, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds, s.holdsAt = h, at
}

// Round is what one scheduling round read, decided and records.
type Round struct {
	// Start is the round's time.
	Start time.Time
	View  *view.Round
	// Out is the decision (nil: no Ready work or no worker to decide
	// for).
	Out *scheduler.Output
	// Plan records it (nil: nothing placed); the caller applies it.
	Plan *state.Plan
	// Decided is how long the decision took, on the clock.
	Decided time.Duration
}

// Round runs one round on the state src reads.
func (s *Scheduler) Round(src view.Source) *Round {
	r := &Round{Start: s.Clock.Now()}
	o := view.Options{Now: r.Start.UnixNano(), MaxJobs: s.MaxJobs}
	if s.Silent != nil {
		o.Silent = func(inst uint32) bool { return s.Silent(inst, r.Start) }
	}
	read := func() { r.View = view.Scheduling(src, o) }
	if s.Read != nil {
		s.Read(read)
	} else {
		read()
	}
	in := r.View.Input
	if s.Launchable != nil {
		in.Launchable = s.Launchable()
	}
	if len(in.Users) == 0 || len(in.Instances) == 0 {
		s.setHolds(nil, r.Start)
		return r
	}
	decide := s.Clock.Now()
	r.Out = scheduler.Schedule(in)
	r.Decided = s.Clock.Now().Sub(decide)
	s.setHolds(r.Out.Holds, r.Start)
	if r.Out.Jobs > 0 {
		r.Plan = PlanOf(r.Out, s.Clock.Now().UnixNano())
	}
	return r
}

// PlanOf turns the scheduler's decision into the Plan command that
// records it (now: the round's time, stamped by the leader).
func PlanOf(out *scheduler.Output, now int64) *state.Plan {
	p := &state.Plan{Now: now, Placements: make([]state.Placement, len(out.Placements)), Reserve: true}
	for i, pl := range out.Placements {
		p.Placements[i] = state.Placement{Batch: pl.Batch, First: pl.First, Count: pl.Count, Attempt: pl.Attempt, Instance: pl.Instance}
	}
	return p
}
