package server

import (
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
)

// The state keeps the scheduling state and the scheduler decides; neither
// knows the other. This adapter is the only place that sees both.

// schedulerInput builds the scheduler's input from the state's read model.
// down names the clusters whose every worker has gone silent (the
// leader's liveness view, not Raft state); nil for none.
func schedulerInput(v *state.SchedulingView, down map[string]bool) *scheduler.Input {
	in := &scheduler.Input{MaxPlacements: v.MaxJobs, Instances: make([]scheduler.Instance, len(v.Instances)), Users: make([]scheduler.User, len(v.Users)), Now: v.Now}
	for _, p := range v.Projects {
		in.Projects = append(in.Projects, scheduler.Project(p))
	}
	in.Clusters = make([]placement.Cluster, len(v.Clusters))
	for i, c := range v.Clusters {
		in.Clusters[i] = placement.Cluster{Name: c.Name, Region: c.Region, Disabled: c.Disabled, Down: down[c.Name], PricePerCoreHour: c.PricePerCoreHour, Group: c.Group}
	}
	for _, g := range v.Groups {
		in.Groups = append(in.Groups, placement.Group{Name: g.Name, Strategy: placement.Strategy(g.Strategy)})
	}
	for i, inst := range v.Instances {
		in.Instances[i] = scheduler.Instance(inst)
		if int(inst.Cluster) < len(in.Clusters) {
			c := &in.Clusters[inst.Cluster]
			c.CapacityMilli += inst.CPUMilli
			c.FreeMilli += max(inst.FreeMilli, 0)
		}
	}
	in.Constraints = v.Constraints // the state's slots are placement's constraints
	for _, t := range v.Teams {
		in.Teams = append(in.Teams, scheduler.Team{Name: t.Name, Strategy: placement.Strategy(t.Strategy), Quota: placement.Quota{
			CPUMilli: t.QuotaMilli, Memory: t.QuotaMemory, UsedMilli: t.UsedMilli, UsedMemory: t.UsedMemory, UsedByCluster: t.UsedByCluster,
			GPUs: t.QuotaGPUs, UsedGPUs: t.UsedGPUs}})
	}
	for i, u := range v.Users {
		su := scheduler.User{Name: u.Name, RunningMilli: u.RunningMilli, ReadyMilli: u.ReadyMilli, Runs: make([]scheduler.Run, len(u.Runs))}
		for k, r := range u.Runs {
			su.Runs[k] = scheduler.Run(r)
		}
		in.Users[i] = su
	}
	return in
}

// SchedulerInput is the scheduler's input from the state's view, every
// cluster taken as up (drover bench autoscale's leader-less rounds).
func SchedulerInput(v *state.SchedulingView) *scheduler.Input { return schedulerInput(v, nil) }

// fairShares is the scheduler's fair share as the state's view wants it.
func fairShares(running, ready []int64, free int64) []int64 {
	d := make([]scheduler.Demand, len(running))
	for i := range d {
		d[i] = scheduler.Demand{Running: running[i], Ready: ready[i]}
	}
	return scheduler.FairShare(d, free)
}

// planOf turns the scheduler's decision into a Plan command.
func planOf(out *scheduler.Output, now int64) *state.Plan {
	p := &state.Plan{Now: now, Placements: make([]state.Placement, len(out.Placements))}
	for i, pl := range out.Placements {
		p.Placements[i] = state.Placement{Batch: pl.Batch, First: pl.First, Count: pl.Count, Attempt: pl.Attempt, Instance: pl.Instance}
	}
	return p
}

// SchedulerPlanner plans with the real scheduler, for state.Harness.
func SchedulerPlanner(v *state.SchedulingView) []state.Placement {
	return planOf(scheduler.Schedule(schedulerInput(v, nil)), 0).Placements
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
