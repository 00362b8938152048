package server

import (
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// SchedulerPlanner plans with the real scheduler on the scheduling view,
// for state.Harness.
func SchedulerPlanner(s *state.State, now int64) []state.Placement {
	return leader.PlanOf(scheduler.Schedule(view.Scheduling(s, view.Options{Now: now, Unbounded: true}).Input), 0).Placements
}
