package state

import "slices"

// maxRunsPerUser bounds how far down one user's queue a round looks for
// work that could start.
const maxRunsPerUser = 10000

// maxUnfitRunsPerUser bounds the runs a round passes on that fit no active
// instance at all (too many cores or too much memory for the largest). They
// are passed so the scheduler can say why they wait, but they count neither
// towards maxRunsPerUser nor towards the round's job bound: a queue that
// starts with a million jobs no instance can hold must not hide the jobs
// behind them.
const maxUnfitRunsPerUser = 64

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
	// fits reports whether some active instance is large enough, free or
	// not, for one job of spec; the answer is kept per spec for the round.
	fitting := map[*Spec]bool{}
	fits := func(spec *Spec) bool {
		ok, seen := fitting[spec]
		if !seen {
			for _, inst := range v.Instances {
				if inst.CPUMilli >= spec.CPUMilli && inst.Memory >= spec.Memory {
					ok = true
					break
				}
			}
			fitting[spec] = ok
		}
		return ok
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
		jobs, runs, unfit := 0, 0, 0
	batches:
		for _, b := range u.active {
			for _, r := range b.ready.items() {
				g := b.groupOf(r.Lo)
				run := ReadyRun{
					Batch: b.ID, First: r.Lo, Count: r.Len(), Attempt: b.jobs[r.Lo-1].attempt + 1,
					CPUMilli: g.spec.CPUMilli, Memory: g.spec.Memory,
				}
				if !fits(g.spec) {
					// Passed on whole for the scheduler to explain, within
					// its own bound; it never uses up the round's.
					if unfit < maxUnfitRunsPerUser {
						ud.Runs = append(ud.Runs, run)
						unfit++
					}
					continue
				}
				runs++
				if g.spec.CPUMilli > maxCPU || g.spec.Memory > maxMem {
					// Larger than anything free now: passed on, so the
					// scheduler says why, but none of it can start this
					// round, so it takes nothing from the round's bounds.
					ud.Runs = append(ud.Runs, run)
				} else {
					if maxJobs > 0 && jobs+int(run.Count) > maxJobs {
						run.Count = uint32(maxJobs - jobs)
					}
					ud.Runs = append(ud.Runs, run)
					jobs += int(run.Count)
					want += int64(run.Count) * g.spec.CPUMilli
				}
				if want >= free || (maxJobs > 0 && jobs >= maxJobs) || runs >= maxRunsPerUser {
					break batches
				}
			}
		}
		v.Users = append(v.Users, ud)
	}
	return v
}
