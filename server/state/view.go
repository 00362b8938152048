package state

import (
	"maps"
	"slices"
	"strings"
)

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

// minRunsPerUser is how many runs a user's list holds at least when fair
// share bounds it: the cores other users cannot use (their jobs fit only
// elsewhere, or not in the holes left) are shared again between the users
// that can still place, and that needs jobs of several sizes to choose
// from.
const minRunsPerUser = 16

// SchedulingView is the read model a scheduling round starts from: every
// active instance (in no particular order) and, per user with Ready jobs, the head of the user's
// Ready queue (oldest batch first), no more than could possibly be placed
// now. The state does not know the scheduler; server/ adapts this view to
// the scheduler's input and the decision back to a Plan.
type SchedulingView struct {
	MaxJobs   int // the round's bound on placements (0: none)
	Instances []InstanceSlot
	Users     []UserDemand
	// Clusters, by name; instances and teams refer to them by index.
	Clusters []ClusterSlot
	// Constraints are the distinct job constraints of the runs listed.
	Constraints []ConstraintSlot
	// Teams of the runs listed, with their quota in use.
	Teams []TeamSlot
}

// InstanceSlot is an active instance's size and what is free on it.
type InstanceSlot struct {
	ID        uint32
	CPUMilli  int64
	Memory    int64
	FreeMilli int64
	FreeMem   int64
	Cluster   int32 // index into SchedulingView.Clusters
	Pool      string
	GPUType   string
	GPUs      int64
	FreeGPUs  int64
}

// ClusterSlot is a cluster's state for a round.
type ClusterSlot struct {
	Name             string
	Region           string
	Disabled         bool
	Reason           string
	By               string
	Since            int64
	PricePerCoreHour float64 // cheapest declared pool's (0: unknown)
}

// ConstraintSlot is where a run may go.
type ConstraintSlot struct {
	Regions []string
	Pool    string
	GPUType string // the run's GPUs are of this type
}

// TeamSlot is a team's quota and use for a round.
type TeamSlot struct {
	Name          string
	Strategy      string
	QuotaMilli    int64
	QuotaMemory   int64
	UsedMilli     int64
	UsedMemory    int64
	UsedByCluster []int64 // index as Clusters
	QuotaGPUs     map[string]int64
	UsedGPUs      map[string]int64
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
	// Constraint and Team are 1 + an index into SchedulingView.Constraints
	// and Teams (0: none).
	Constraint int32
	Team       int32
	GPUs       int64 // per job, of the constraint's GPU type
}

// SchedulingView copies what a scheduling round needs. With no cores free
// in any enabled cluster it lists no users.
//
// Each user's queue is read from its head until what was listed could
// fill every free core, per constraint: a run restricted to regions whose
// workers are all busy takes nothing from the round's bounds and does not
// hide the runs behind it that could start elsewhere (the region deadlock
// of Hail Batch). Runs that can never start (no worker their constraint
// allows is large enough, or their team is at its quota) are passed, a few
// per user, only so the scheduler can say why they wait.
func (s *State) SchedulingView(maxJobs int) *SchedulingView {
	return s.SchedulingViewShared(maxJobs, nil)
}

// ShareFunc splits free millicores between users given each one's running
// and Ready millicores (the scheduler's fair share); the state does not
// know the scheduler, so the caller passes it in.
type ShareFunc func(running, ready []int64, free int64) []int64

// SchedulingViewShared is SchedulingView with each user's list bounded by
// twice what fair share will give it this round (at least minRunsPerUser
// runs), so a
// round with hundreds of users copies a few times the free cores' worth of
// jobs instead of the free cores' worth for every user. share nil: no such
// bound.
func (s *State) SchedulingViewShared(maxJobs int, share ShareFunc) *SchedulingView {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := &SchedulingView{MaxJobs: maxJobs}
	clusterIdx := make(map[string]int32, len(s.clusters))
	for _, name := range sortedKeys(s.clusters) {
		cl := s.clusters[name]
		clusterIdx[name] = int32(len(v.Clusters))
		var price float64
		for _, p := range cl.Pools {
			if p.CPUMilli > 0 && p.PricePerHour > 0 {
				if pc := p.PricePerHour * 1000 / float64(p.CPUMilli); price == 0 || pc < price {
					price = pc
				}
			}
		}
		v.Clusters = append(v.Clusters, ClusterSlot{Name: cl.Name, Region: cl.Region, Disabled: cl.Disabled,
			Reason: cl.Reason, By: cl.By, Since: cl.Since, PricePerCoreHour: price})
	}
	var free int64
	for _, inst := range s.instances {
		if !inst.Active {
			continue
		}
		slot := InstanceSlot{ID: inst.ID, CPUMilli: inst.CPUMilli, Memory: inst.Memory, FreeMilli: inst.FreeMilli,
			FreeMem: inst.FreeMem, Cluster: clusterIdx[inst.Cluster], Pool: inst.Pool,
			GPUType: inst.GPUType, GPUs: inst.GPUs, FreeGPUs: inst.FreeGPUs}
		v.Instances = append(v.Instances, slot)
		if !v.Clusters[slot.Cluster].Disabled && inst.FreeMilli > 0 && inst.FreeMem > 0 {
			free += inst.FreeMilli
		}
	}
	if free == 0 {
		return v
	}
	// reach is what the workers one constraint allows offer: the largest
	// free cores and memory, the free cores in all, and what the runs
	// listed so far want of them.
	type reach struct {
		slot           ConstraintSlot
		insts          []int // indices into v.Instances (enabled clusters only)
		maxCPU, maxMem int64
		free, want     int64
	}
	admitted := func(k *ConstraintSlot, in *InstanceSlot) bool {
		cl := &v.Clusters[in.Cluster]
		if cl.Disabled || (k.Pool != "" && k.Pool != in.Pool) || (k.GPUType != "" && k.GPUType != in.GPUType) {
			return false
		}
		return len(k.Regions) == 0 || slices.Contains(k.Regions, cl.Region)
	}
	newReach := func(k ConstraintSlot) *reach {
		r := &reach{slot: k}
		for i := range v.Instances {
			in := &v.Instances[i]
			if !admitted(&k, in) {
				continue
			}
			r.insts = append(r.insts, i)
			if in.FreeMilli > 0 && in.FreeMem > 0 {
				r.free += in.FreeMilli
				r.maxCPU = max(r.maxCPU, in.FreeMilli)
				r.maxMem = max(r.maxMem, in.FreeMem)
			}
		}
		return r
	}
	anywhere := newReach(ConstraintSlot{})
	var reaches []*reach // index = constraint index
	constraintOf := map[string]int32{}
	// fitting: whether some worker the spec's constraint allows is large
	// enough, free or not, for one job; kept per spec for the round.
	fitting := map[*Spec]bool{}
	lookup := func(spec *Spec) (int32, *reach) {
		w := spec.Where
		if w == nil || (len(w.Regions) == 0 && w.Pool == "" && w.GPUs == 0) {
			return 0, anywhere
		}
		gpuType := ""
		if w.GPUs > 0 {
			gpuType = w.GPUType
		}
		key := w.Pool + "\x00" + gpuType + "\x00" + strings.Join(w.Regions, "\x00")
		idx, ok := constraintOf[key]
		if !ok {
			idx = int32(len(reaches))
			constraintOf[key] = idx
			k := ConstraintSlot{Regions: slices.Clone(w.Regions), Pool: w.Pool, GPUType: gpuType}
			reaches = append(reaches, newReach(k))
			v.Constraints = append(v.Constraints, k)
		}
		return idx + 1, reaches[idx]
	}
	fits := func(spec *Spec, r *reach) bool {
		ok, seen := fitting[spec]
		if !seen {
			for _, i := range r.insts {
				_, gpus := spec.GPUs()
				if in := &v.Instances[i]; in.CPUMilli >= spec.CPUMilli && in.Memory >= spec.Memory && in.GPUs >= gpus {
					ok = true
					break
				}
			}
			fitting[spec] = ok
		}
		return ok
	}
	teamOf := map[*Team]int32{}
	var quotaRoom []int64 // millicores the team may still take (-1: no quota)
	var teamRoom []int64  // the same, less what this user's runs listed so far want
	team := func(b *Batch) int32 {
		t := s.projectTeam[b.BillingProject]
		if t == nil {
			return 0
		}
		idx, ok := teamOf[t]
		if !ok {
			idx = int32(len(v.Teams))
			teamOf[t] = idx
			ts := TeamSlot{Name: t.Name, Strategy: t.Strategy, QuotaMilli: t.QuotaMilli, QuotaMemory: t.QuotaMemory,
				UsedMilli: t.usedMilli, UsedMemory: t.usedMemory, UsedByCluster: make([]int64, len(v.Clusters)),
				QuotaGPUs: maps.Clone(t.QuotaGPUs), UsedGPUs: maps.Clone(t.usedGPUs)}
			for name, used := range t.usedByCluster {
				if ci, ok := clusterIdx[name]; ok {
					ts.UsedByCluster[ci] = used
				}
			}
			v.Teams = append(v.Teams, ts)
			room := int64(-1)
			if t.QuotaMilli > 0 {
				room = max(t.QuotaMilli-t.usedMilli, 0)
			}
			quotaRoom = append(quotaRoom, room)
			teamRoom = append(teamRoom, room)
		}
		return idx + 1
	}
	names := make([]string, 0, len(s.sched))
	for name, u := range s.sched {
		if u.readyJobs > 0 || u.runningJobs > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var bound []int64
	if share != nil {
		running, ready := make([]int64, len(names)), make([]int64, len(names))
		for i, name := range names {
			running[i], ready[i] = s.sched[name].runningMilli, s.sched[name].readyMilli
		}
		bound = share(running, ready, free)
	}
	for ui, name := range names {
		u := s.sched[name]
		limit := free
		if bound != nil {
			limit = min(free, 2*bound[ui])
		}
		ud := UserDemand{Name: name, RunningMilli: u.runningMilli, ReadyMilli: u.readyMilli}
		// Each user's list is counted afresh, up to its limit (all free
		// cores, or twice its fair share): what the users get of them is
		// the scheduler's to decide.
		var want int64
		anywhere.want = 0
		for _, rc := range reaches {
			rc.want = 0
		}
		copy(teamRoom, quotaRoom)
		jobs, runs, unfit := 0, 0, 0
	batches:
		for _, b := range u.active {
			ti := team(b)
			for _, r := range b.ready.items() {
				g := b.groupOf(r.Lo)
				ci, rc := lookup(g.spec)
				_, gpus := g.spec.GPUs()
				run := ReadyRun{
					Batch: b.ID, First: r.Lo, Count: r.Len(), Attempt: b.jobs[r.Lo-1].attempt + 1,
					CPUMilli: g.spec.CPUMilli, Memory: g.spec.Memory, Constraint: ci, Team: ti, GPUs: gpus,
				}
				quotaBlocked := ti > 0 && teamRoom[ti-1] >= 0 && teamRoom[ti-1] < g.spec.CPUMilli
				if quotaBlocked && unfit >= maxUnfitRunsPerUser {
					// The team has no room: the rest of this batch waits
					// for the same reason, already told.
					continue batches
				}
				if quotaBlocked || !fits(g.spec, rc) {
					// Passed on whole for the scheduler to explain, within
					// its own bound; it never uses up the round's.
					if unfit < maxUnfitRunsPerUser {
						ud.Runs = append(ud.Runs, run)
						unfit++
					}
					continue
				}
				runs++
				switch {
				case g.spec.CPUMilli > rc.maxCPU || g.spec.Memory > rc.maxMem:
					// Larger than anything free where it may go: passed on,
					// so the scheduler says why, but none of it can start
					// this round, so it takes nothing from the round's bounds.
					ud.Runs = append(ud.Runs, run)
				case rc.want >= rc.free:
					// What it may use is spoken for by the runs before it.
				default:
					if maxJobs > 0 && jobs+int(run.Count) > maxJobs {
						run.Count = uint32(maxJobs - jobs)
					}
					ud.Runs = append(ud.Runs, run)
					jobs += int(run.Count)
					cores := int64(run.Count) * g.spec.CPUMilli
					take := min(cores, rc.free-rc.want)
					rc.want += take
					want += take
					if ti > 0 && teamRoom[ti-1] >= 0 {
						teamRoom[ti-1] = max(teamRoom[ti-1]-cores, 0)
					}
				}
				if (want >= limit && (bound == nil || runs >= minRunsPerUser || want >= free)) || (maxJobs > 0 && jobs >= maxJobs) || runs >= maxRunsPerUser {
					break batches
				}
			}
		}
		v.Users = append(v.Users, ud)
	}
	return v
}
