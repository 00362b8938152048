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

// unplacedByReason counts the jobs a round could place nowhere by the
// reason that rejected the most instances (the first such reason in code
// order on a tie; no instances at all counts as cores busy).
func unplacedByReason(out *scheduler.Output) map[scheduler.Reason]int {
	counts := map[scheduler.Reason]int{}
	for _, u := range out.Unplaced {
		if u.Why.Quota != 0 {
			counts[u.Why.Quota] += int(u.Count)
			continue
		}
		why, most := scheduler.ReasonCPUFree, 0
		for _, rc := range u.Why.Filtered {
			if rc.Instances > most {
				why, most = rc.Reason, rc.Instances
			}
		}
		counts[why] += int(u.Count)
	}
	return counts
}
