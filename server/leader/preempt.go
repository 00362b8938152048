package leader

import (
	"time"

	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// Preemptor runs the leader's preemption rounds: it reads the state
// (view.Preemption), decides (scheduler.Preempt) with its clocks of how
// long each queue has waited, and turns the decision into the Preempt
// command that records it. The server's leader loop and the simulator
// both run it.
type Preemptor struct {
	Timers *view.Timers
	// Holds, when set, tells the room the last scheduling round held for
	// gangs first in line, and that round's time (Scheduler.Holds): a
	// claim of a gang's queue frees room for it there. Holds older than
	// maxHoldAge are not read (the gangs may have started since).
	Holds func() ([]scheduler.GangHold, time.Time)
}

// maxHoldAge bounds how old a scheduling round's holds may be for a
// preemption round to act on them.
const maxHoldAge = time.Minute

// NewPreemptor returns a preemptor with stopped clocks (a new leader's).
func NewPreemptor() *Preemptor { return &Preemptor{Timers: view.NewTimers()} }

// Round decides at now. The command is nil when nothing is to stop; the
// input and output are the decision's (nil when no queue could preempt).
func (p *Preemptor) Round(src view.Source, now time.Time) (*state.Preempt, *scheduler.PreemptInput, *scheduler.PreemptOutput) {
	in := view.Preemption(src, now.UnixNano(), p.Timers)
	if in == nil {
		return nil, nil, nil
	}
	if holds := freshHolds(p.Holds, now); len(holds) > 0 {
		in.AddHolds(holds)
	}
	out := scheduler.Preempt(in)
	p.Timers.Update(in, out)
	if len(out.Victims) == 0 {
		return nil, in, out
	}
	cmd := &state.Preempt{Now: now.UnixNano()}
	for _, v := range out.Victims[:min(len(out.Victims), state.MaxPreemptPerEntry)] {
		cmd.Attempts = append(cmd.Attempts, state.PreemptAttempt{AttemptID: state.AttemptID{Batch: v.Batch, Job: v.Job, Attempt: v.Attempt.Attempt}, Reason: v.Reason})
	}
	return cmd, in, out
}
