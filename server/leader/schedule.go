package leader

import (
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
)

// The state keeps the scheduling state and the scheduler decides; neither
// knows the other. This adapter is the only place that sees both.

// SchedulerInput builds the scheduler's input from the state's read
// model. down names the clusters whose every worker has gone silent (the
// leader's liveness view, not Raft state); nil for none. The server's
// scheduling round and the simulator both call it.
func SchedulerInput(v *state.SchedulingView, down map[string]bool) *scheduler.Input {
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

// FairShares is the scheduler's fair share as the state's reads want it
// (state.ShareFunc): the scheduling view and the autoscaler's demand trim
// each user's queue with it.
func FairShares(running, ready []int64, free int64) []int64 {
	d := make([]scheduler.Demand, len(running))
	for i := range d {
		d[i] = scheduler.Demand{Running: running[i], Ready: ready[i]}
	}
	return scheduler.FairShare(d, free)
}

// PlanOf turns the scheduler's decision into the Plan command that
// records it (now: the round's time, stamped by the leader).
func PlanOf(out *scheduler.Output, now int64) *state.Plan {
	p := &state.Plan{Now: now, Placements: make([]state.Placement, len(out.Placements))}
	for i, pl := range out.Placements {
		p.Placements[i] = state.Placement{Batch: pl.Batch, First: pl.First, Count: pl.Count, Attempt: pl.Attempt, Instance: pl.Instance}
	}
	return p
}
