package state

import "slices"

// maxRunsPerUser bounds how far down one user's queue a round looks.
const maxRunsPerUser = 10000

// SchedulingView is the read model a scheduling round starts from: every
// active instance (in no particular order) and, per user with Ready jobs, the head of the user's
// Ready queue (oldest batch first), no more than could possibly be placed
// now. The state does not know the scheduler; server/ adapts this view to
// the scheduler's input and the decision back to a Plan.
type SchedulingView struct {
	MaxJobs   int // the round's bound on placements (0: none)
	Instances []InstanceSlot
	Users     []UserDemand
}

// InstanceSlot is an active instance's size and what is free on it.
type InstanceSlot struct {
	ID        uint32
	CPUMilli  int64
	Memory    int64
	FreeMilli int64
	FreeMem   int64
}

// UserDemand is one user's running and Ready cores and the head of its
// Ready queue.
type UserDemand struct {
	Name         string
	RunningMilli int64
	ReadyMilli   int64
	Runs         []ReadyRun
}

// ReadyRun is a stretch of Ready jobs of one batch with consecutive IDs that
// share a size and are on the same attempt number.
type ReadyRun struct {
	Batch    uint64
	First    uint32
	Count    uint32
	Attempt  uint16 // the attempt number a placement creates
	CPUMilli int64
	Memory   int64
}

// SchedulingView copies what a scheduling round needs. With no cores free
// anywhere it lists no users.
func (s *State) SchedulingView(maxJobs int) *SchedulingView {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := &SchedulingView{MaxJobs: maxJobs}
	var free, maxCPU, maxMem int64
	for _, inst := range s.instances {
		if !inst.Active {
			continue
		}
		v.Instances = append(v.Instances, InstanceSlot{ID: inst.ID, CPUMilli: inst.CPUMilli, Memory: inst.Memory, FreeMilli: inst.FreeMilli, FreeMem: inst.FreeMem})
		if inst.FreeMilli > 0 && inst.FreeMem > 0 {
			free += inst.FreeMilli
			maxCPU = max(maxCPU, inst.FreeMilli)
			maxMem = max(maxMem, inst.FreeMem)
		}
	}
	if free == 0 {
		return v
	}
	names := make([]string, 0, len(s.sched))
	for name, u := range s.sched {
		if u.readyJobs > 0 || u.runningJobs > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		u := s.sched[name]
		ud := UserDemand{Name: name, RunningMilli: u.runningMilli, ReadyMilli: u.readyMilli}
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
				ud.Runs = append(ud.Runs, ReadyRun{
					Batch: b.ID, First: r.Lo, Count: n, Attempt: b.jobs[r.Lo-1].attempt + 1,
					CPUMilli: g.spec.CPUMilli, Memory: g.spec.Memory,
				})
				jobs += int(n)
				// Jobs too big for any instance are passed on (the scheduler
				// reports them) but do not count towards what could start.
				if g.spec.CPUMilli <= maxCPU && g.spec.Memory <= maxMem {
					want += int64(n) * g.spec.CPUMilli
				}
				if want >= free || (maxJobs > 0 && jobs >= maxJobs) || len(ud.Runs) >= maxRunsPerUser {
					break batches
				}
			}
		}
		v.Users = append(v.Users, ud)
	}
	return v
}
