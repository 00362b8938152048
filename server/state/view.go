package state

import (
	"sort"

	"github.com/drover-sched/drover/server/scheduler"
)

// maxRunsPerUser bounds how far down one user's queue a round looks.
const maxRunsPerUser = 10000

// SchedulingInput copies what the scheduler needs: active instances with free
// resources and, per user with Ready jobs, the head of the user's Ready queue
// (oldest batch first), no more than could possibly be placed now.
func (s *State) SchedulingInput(maxJobs int) *scheduler.Input {
	s.mu.RLock()
	defer s.mu.RUnlock()
	in := &scheduler.Input{MaxPlacements: maxJobs}
	var free, maxCPU, maxMem int64
	for _, inst := range s.instances {
		if inst.Active && inst.FreeMilli > 0 && inst.FreeMem > 0 {
			in.Instances = append(in.Instances, scheduler.Instance{ID: inst.ID, FreeMilli: inst.FreeMilli, FreeMem: inst.FreeMem})
			free += inst.FreeMilli
			maxCPU = max(maxCPU, inst.FreeMilli)
			maxMem = max(maxMem, inst.FreeMem)
		}
	}
	if free == 0 {
		return in
	}
	sort.Slice(in.Instances, func(i, j int) bool { return in.Instances[i].ID < in.Instances[j].ID })
	names := make([]string, 0, len(s.sched))
	for name, u := range s.sched {
		if u.readyJobs > 0 || u.runningJobs > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		u := s.sched[name]
		su := scheduler.User{Name: name, RunningMilli: u.runningMilli, ReadyMilli: u.readyMilli}
		var want int64
		jobs := 0
	batches:
		for _, b := range u.active {
			for _, r := range b.ready.items() {
				g := b.groupOf(r.Lo)
				n := r.Len()
				if maxJobs > 0 && jobs+int(n) > maxJobs {
					n = uint32(maxJobs - jobs)
				}
				su.Runs = append(su.Runs, scheduler.Run{
					Batch: b.ID, First: r.Lo, Count: n, Attempt: b.jobs[r.Lo-1].attempt + 1,
					CPUMilli: g.spec.CPUMilli, Memory: g.spec.Memory,
				})
				jobs += int(n)
				// Jobs too big for any instance are passed on (the scheduler
				// reports them) but do not count towards what could start.
				if g.spec.CPUMilli <= maxCPU && g.spec.Memory <= maxMem {
					want += int64(n) * g.spec.CPUMilli
				}
				if want >= free || (maxJobs > 0 && jobs >= maxJobs) || len(su.Runs) >= maxRunsPerUser {
					break batches
				}
			}
		}
		in.Users = append(in.Users, su)
	}
	return in
}

// PlanFromSchedule turns a scheduler decision into a Plan command.
func PlanFromSchedule(out *scheduler.Output, now int64) *Plan {
	p := &Plan{Now: now, Placements: make([]Placement, len(out.Placements))}
	for i, pl := range out.Placements {
		p.Placements[i] = Placement{Batch: pl.Batch, First: pl.First, Count: pl.Count, Attempt: pl.Attempt, Instance: pl.Instance}
	}
	return p
}
