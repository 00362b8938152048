package leader

import (
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
)

// The state keeps the scheduling state and the scheduler decides; neither
// knows the other. server/view reads the scheduler's input from the
// state; PlanOf turns the decision back into a command.

// PlanOf turns the scheduler's decision into the Plan command that
// records it (now: the round's time, stamped by the leader).
func PlanOf(out *scheduler.Output, now int64) *state.Plan {
	p := &state.Plan{Now: now, Placements: make([]state.Placement, len(out.Placements)), Reserve: true}
	for i, pl := range out.Placements {
		p.Placements[i] = state.Placement{Batch: pl.Batch, First: pl.First, Count: pl.Count, Attempt: pl.Attempt, Instance: pl.Instance}
	}
	return p
}
