package state

import (
	"maps"
	"slices"
	"strings"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/placement"
)

// maxRunsPerUser bounds how far down one user's queue a round looks for
// work that could start.
const maxRunsPerUser = 10000

// maxPassedRunsPerUser bounds the runs of one user a round passes on
// only so the scheduler can say why they wait: runs that fit no active
// instance at all (too many cores or too much memory for the largest),
// and runs larger than anything free now where they may go (of runs its
// team's quota blocks, one is passed, and this many looked at). None of them counts towards maxRunsPerUser or the
// round's job bound: a queue that starts with a million jobs no instance
// can hold must not hide the jobs behind them. The scheduler explains the
// first 16 unplaced runs of a user; once the fleet is full, most of every
// queue is such runs, and passing more (it was 64 per user, 32,000 runs
// a round with 500 users) made every round try and fail them all.
const maxPassedRunsPerUser = 16

// minRunsPerUser is how many runs a user's list holds at least when fair
// share bounds it: the cores other users cannot use (their jobs fit only
// elsewhere, or not in the holes left) are shared again between the users
// that can still place, and that needs jobs of several sizes to choose
// from. A user fair share gives nothing this round (once the fleet is
// full, most users: the few cores that free up go to those holding
// least) can only take leftovers and holds at least minRunsNoShare: with
// 500 users, 16 runs each was 8,000 runs a round to place a few hundred
// jobs.
const (
	minRunsPerUser = 16
	minRunsNoShare = 4
)

// reach is what the workers one constraint allows offer: the largest
// free cores and memory, the free cores in all, and what the runs
// listed so far want of them.
type reach struct {
	slot ConstraintSlot
	// shapes: the sizes (cores, memory, GPUs) of the instances it
	// allows, free or not, that no other of them exceeds in every
	// one (a fleet has a few); many: too many to keep, so every job
	// is taken to fit (the scheduler still says why it does not).
	shapes         [][3]int64
	many           bool
	maxCPU, maxMem int64
	free, want     int64
}

// maxShapes bounds the instance sizes a reach keeps.
const maxShapes = 64

// addShape keeps an instance size unless another kept one is at least as
// large in every dimension, and drops those it exceeds.
func (r *reach) addShape(sh [3]int64) {
	if r.many {
		return
	}
	covers := func(a, b [3]int64) bool { return a[0] >= b[0] && a[1] >= b[1] && a[2] >= b[2] }
	for _, k := range r.shapes {
		if covers(k, sh) {
			return
		}
	}
	r.shapes = slices.DeleteFunc(r.shapes, func(k [3]int64) bool { return covers(sh, k) })
	if len(r.shapes) == maxShapes {
		r.many, r.shapes = true, nil
		return
	}
	r.shapes = append(r.shapes, sh)
}

// fits reports whether some instance is large enough, free or not, for
// one job of the spec.
func (r *reach) fits(spec *Spec) bool {
	if r.many {
		return true
	}
	_, gpus := spec.GPUs()
	for _, sh := range r.shapes {
		if sh[0] >= spec.CPUMilli && sh[1] >= spec.Memory && sh[2] >= gpus {
			return true
		}
	}
	return false
}

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
	// Groups of clusters, by name; clusters refer to them by index.
	Groups []ClusterGroup
	// Now is the time the view was read at: a billing project's spend is
	// weighed at it.
	Now int64
	// Projects are the billing projects with a spend limit of the runs
	// listed, with what they have spent.
	Projects []ProjectSlot
}

// ProjectSlot is a billing project's spend limit and spend for a round.
type ProjectSlot struct {
	Name   string
	Budget billing.Budget
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
	Group            int32   // 1 + index into SchedulingView.Groups (0: none)
}

// ConstraintSlot is where a run may go: placement's own constraint, so
// the state, the scheduler and the autoscaler read it with one rule.
type ConstraintSlot = placement.Constraint

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
	// and Teams (0: none), Project 1 + an index into Projects (0: its
	// billing project has no spend limit).
	Constraint int32
	Team       int32
	GPUs       int64 // per job, of the constraint's GPU type
	Project    int32
}

// SchedulingView copies what a scheduling round needs. With no cores free
// in any enabled cluster it lists no users.
//
// Each user's queue is read from its head until what was listed could
// fill every free core, per constraint: a run restricted to regions whose
// workers are all busy takes nothing from the round's bounds and does not
// hide the runs behind it that could start elsewhere (the region deadlock
// of Hail Batch). Runs that can never start (no worker their constraint
// allows is large enough, their team is at its quota, or their billing
// project has reached its spend limit at now) are passed, a few per user,
// only so the scheduler can say why they wait.
func (s *State) SchedulingView(now int64, maxJobs int) *SchedulingView {
	return s.SchedulingViewShared(now, maxJobs, nil)
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
func (s *State) SchedulingViewShared(now int64, maxJobs int, share ShareFunc) *SchedulingView {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := &SchedulingView{MaxJobs: maxJobs, Now: now}
	groupIdx := make(map[string]int32, len(s.groups))
	for _, name := range sortedKeys(s.groups) {
		v.Groups = append(v.Groups, *s.groups[name])
		groupIdx[name] = int32(len(v.Groups))
	}
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
			Reason: cl.Reason, By: cl.By, Since: cl.Since, PricePerCoreHour: price, Group: groupIdx[cl.Group]})
	}
	var free int64
	for _, inst := range s.instances {
		if !inst.Active || s.reserved(inst) {
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
	admitted := func(k *ConstraintSlot, in *InstanceSlot) bool {
		cl := &v.Clusters[in.Cluster]
		return k.Admits(&placement.Cluster{Region: cl.Region, Disabled: cl.Disabled}, in.Pool) == 0 && k.AllowsGPUType(in.GPUType)
	}
	newReach := func(k ConstraintSlot) *reach {
		r := &reach{slot: k}
		for i := range v.Instances {
			in := &v.Instances[i]
			if !admitted(&k, in) {
				continue
			}
			r.addShape([3]int64{in.CPUMilli, in.Memory, in.GPUs})
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
	teamOf := map[*Team]int32{}
	// The teams' cpu quotas, and the same with what this user's runs
	// listed so far want counted as used: the listing bounds itself by
	// cores alone (memory and GPU quotas are the scheduler's to apply),
	// with placement's quota rule.
	var quotaRoom []placement.Quota
	var teamRoom []placement.Quota
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
			room := placement.Quota{CPUMilli: t.QuotaMilli, UsedMilli: t.usedMilli}
			quotaRoom = append(quotaRoom, room)
			teamRoom = append(teamRoom, room)
		}
		return idx + 1
	}
	type spend struct {
		idx     int32 // 1 + index into v.Projects (0: no limit)
		reached bool
	}
	spendOf := map[string]spend{}
	project := func(b *Batch) spend {
		sp, ok := spendOf[b.BillingProject]
		if !ok {
			if bg := s.budget(b.BillingProject); bg.Limit > 0 {
				v.Projects = append(v.Projects, ProjectSlot{Name: b.BillingProject, Budget: bg})
				sp = spend{idx: int32(len(v.Projects)), reached: bg.Reached(now)}
			}
			spendOf[b.BillingProject] = sp
		}
		return sp
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
		limit, least := free, minRunsPerUser
		if bound != nil {
			limit = min(free, 2*bound[ui])
			if bound[ui] == 0 {
				least = minRunsNoShare
			}
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
		jobs, runs, passed, blocked, quotaTold, spendTold := 0, 0, 0, 0, false, false
	batches:
		for _, b := range u.active {
			ti := team(b)
			pr := project(b)
			for _, r := range b.ready.items() {
				g := b.groupOf(r.Lo)
				if g.spec.Where != nil && g.spec.Where.MachineType != "" {
					// Runs on a machine of its own, made for it.
					continue
				}
				ci, rc := lookup(g.spec)
				_, gpus := g.spec.GPUs()
				run := ReadyRun{
					Batch: b.ID, First: r.Lo, Count: r.Len(), Attempt: b.jobs[r.Lo-1].attempt + 1,
					CPUMilli: g.spec.CPUMilli, Memory: g.spec.Memory, Constraint: ci, Team: ti, GPUs: gpus, Project: pr.idx,
				}
				if pr.reached {
					// No job of the project may start: the first run is
					// passed on for the scheduler to say why (job why
					// tells the others from the project's spend), and
					// the rest of the batch waits.
					if !spendTold {
						ud.Runs = append(ud.Runs, run)
						spendTold = true
					}
					continue batches
				}
				quotaBlocked := ti > 0 && teamRoom[ti-1].Admit(g.spec.CPUMilli, 0, "", 0) != 0
				if quotaBlocked {
					// The team's quota is the reason for every run it
					// blocks: the first is passed on for the scheduler to
					// say so (job why tells the others from the team's
					// use). Smaller runs behind it may still fit what the
					// team has left, so a few more are looked at; with
					// nothing left, the rest of the batch waits too.
					if !quotaTold {
						ud.Runs = append(ud.Runs, run)
						quotaTold = true
					}
					if blocked++; teamRoom[ti-1].Admit(1, 0, "", 0) != 0 || blocked >= maxPassedRunsPerUser {
						continue batches
					}
					continue
				}
				if !rc.fits(g.spec) {
					// Passed on whole for the scheduler to explain, within
					// its own bound; it never uses up the round's.
					if passed < maxPassedRunsPerUser {
						ud.Runs = append(ud.Runs, run)
						passed++
					}
					continue
				}
				runs++
				switch {
				case g.spec.CPUMilli > rc.maxCPU || g.spec.Memory > rc.maxMem:
					// Larger than anything free where it may go: none of it
					// can start this round, so it takes nothing from the
					// round's bounds, and it is passed on only to be
					// explained.
					if passed < maxPassedRunsPerUser {
						ud.Runs = append(ud.Runs, run)
						passed++
					}
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
					if ti > 0 {
						teamRoom[ti-1].UsedMilli += cores
					}
				}
				if (want >= limit && (bound == nil || runs >= least || want >= free)) || (maxJobs > 0 && jobs >= maxJobs) || runs >= maxRunsPerUser {
					break batches
				}
			}
		}
		v.Users = append(v.Users, ud)
	}
	return v
}
