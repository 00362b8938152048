package view

import (
	"cmp"
	"maps"
	"slices"

	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
)

// Source is what the read models are read from: *state.State, or
// anything else that offers a consistent read of one.
type Source interface{ Read(fn func(r state.Reader)) }

var _ Source = (*state.State)(nil)

// Autoscale is what the autoscaler's leader loop reads before a
// decision: its settings, configs, machines and marks, the clusters, and
// what every active worker has free.
type Autoscale struct {
	Settings state.Autoscaler
	Configs  []state.LaunchConfig
	Machines []state.Machine
	Marks    []state.CapacityMark
	Clusters []AutoscaleCluster
	Free     []FreeRoom
	// DrainingFree is what draining machines' workers have free.
	DrainingFree []FreeRoom
	// Running maps an active instance to the attempts it runs (for idle
	// machines).
	Running   map[uint32]int
	Decisions []state.Decision
	// Providers: what each cluster declares makes its machines.
	Providers map[string]ClusterProvider
	// Private lists Ready jobs that want a machine of their own (oldest
	// batch first, at most maxPrivatePerDecision).
	Private []PrivateJob
}

// AutoscaleCluster is a cluster as the autoscaler reads it.
type AutoscaleCluster struct {
	Name, Region string
	Disabled     bool
}

// PrivateJob is a Ready job that names a machine type.
type PrivateJob struct {
	Batch       uint64
	Job         uint32
	User        string
	MachineType string
	// Constraint is where the job may run: placement's, its queue's
	// routing included (its own, not the state's).
	Constraint placement.Constraint
	CPUMilli   int64
	Memory     int64
	GPUs       int64
}

// maxPrivatePerDecision bounds the private jobs one decision considers.
const maxPrivatePerDecision = 256

// ClusterProvider is a cluster's declared provider and its settings.
type ClusterProvider struct {
	Kind     string
	Settings map[string]string
}

// FreeRoom is what one active worker has free, and where it is.
type FreeRoom struct {
	Instance                       uint32
	Machine                        string
	Region, Cluster, Pool, GPUType string
	CPUMilli, Memory, GPUs         int64
	// TotalMilli: the worker's cores in all, free or not.
	TotalMilli int64
	// Spot: the worker is a spot machine (state.Reader.Spot).
	Spot bool
}

// AutoscaleState copies the autoscaler's state from src in one
// consistent read.
func AutoscaleState(src Source) *Autoscale {
	var v *Autoscale
	src.Read(func(r state.Reader) { v = autoscaleState(r) })
	return v
}

func autoscaleState(r state.Reader) *Autoscale {
	v := &Autoscale{Settings: r.Autoscaler(), Running: map[uint32]int{}, Decisions: slices.Clone(r.Decisions()), Providers: map[string]ClusterProvider{}}
	for c := range r.LaunchConfigs() {
		v.Configs = append(v.Configs, *c)
	}
	for m := range r.Machines() {
		v.Machines = append(v.Machines, *m)
	}
	for mk := range r.Marks() {
		v.Marks = append(v.Marks, *mk)
	}
	disabled := map[string]bool{}
	for cl := range r.Clusters() {
		v.Clusters = append(v.Clusters, AutoscaleCluster{Name: cl.Name, Region: cl.Region, Disabled: cl.Disabled})
		disabled[cl.Name] = cl.Disabled
		if cl.Provider != "" {
			v.Providers[cl.Name] = ClusterProvider{Kind: cl.Provider, Settings: maps.Clone(cl.ProviderSettings)}
		}
	}
	v.Private = privateJobs(r)
	var insts []*state.Instance
	for inst := range r.Instances() {
		insts = append(insts, inst)
	}
	slices.SortFunc(insts, func(a, b *state.Instance) int { return cmp.Compare(a.ID, b.ID) })
	for _, inst := range insts {
		v.Running[inst.ID] = r.Attempts(inst)
		if disabled[inst.Cluster] || r.PrivateMachine(inst) || inst.Leaving {
			continue // a private machine's room is its job's; a leaving worker's is going
		}
		room := FreeRoom{Instance: inst.ID, Machine: inst.Machine, Region: inst.Region, Cluster: inst.Cluster, Pool: inst.Pool, GPUType: inst.GPUType,
			CPUMilli: max(inst.FreeMilli, 0), Memory: max(inst.FreeMem, 0), GPUs: max(inst.FreeGPUs, 0), TotalMilli: inst.CPUMilli, Spot: r.Spot(inst)}
		if r.Draining(inst) {
			v.DrainingFree = append(v.DrainingFree, room)
			continue
		}
		v.Free = append(v.Free, room)
	}
	return v
}

// privateJobs lists Ready jobs that want a machine of their own, by user
// name, then each user's oldest batch first.
func privateJobs(r state.Reader) []PrivateJob {
	var out []PrivateJob
	for _, q := range r.UserQueues() {
		for _, b := range q.Batches() {
			if !r.HasPrivate(b) {
				continue
			}
			for rg := range r.Ready(b) {
				sp := rg.Spec
				w := sp.Where
				if w == nil || w.MachineType == "" {
					continue
				}
				_, gpus := sp.GPUs()
				k := r.Constraint(b, sp).Clone()
				for id := rg.Lo; id <= rg.Hi; id++ {
					if len(out) >= maxPrivatePerDecision {
						return out
					}
					out = append(out, PrivateJob{Batch: b.ID, Job: id, User: b.User, MachineType: w.MachineType, Constraint: k,
						CPUMilli: sp.CPUMilli, Memory: sp.Memory, GPUs: gpus})
				}
			}
		}
	}
	return out
}

// DemandUser is one user's windowed ready work, head of the queue first.
type DemandUser struct {
	Name         string
	RunningMilli int64
	Shapes       []DemandShape
	// PastMilli: the user's decayed past use as cores (scheduler.User).
	PastMilli int64
}

// DemandShape is jobs of one size and constraint in a user's queue.
type DemandShape struct {
	CPUMilli, Memory, GPUs int64
	// Constraint is 1 + an index into Demand.Constraints (0: none).
	Constraint int32
	Count      int64
	// Gang, when not 0, names the gang (batch ID above the gang's first
	// job) whose Count members the shape is, whole (autoscaler.Shape).
	Gang        uint64
	GangUniform string
	// Parts, for a gang of members of several sizes, are its members by
	// size (the largest first), each with its Count (autoscaler.Shape).
	Parts []DemandShape
}

// Demand is the head of every user's ready queue within the autoscaler's
// window.
type Demand struct {
	Users       []DemandUser
	Constraints []placement.Constraint
}

// maxDemandShapes bounds the shapes one user's window lists: a queue of
// distinct jobs of every size would otherwise list each.
const maxDemandShapes = 4096

// AutoscaleDemand reads, in one consistent read of s, the head of each
// user's Ready queue up to the user's fair share of budget millicores
// (the scheduler's FairShare), one job past it, with memory rounded up to
// memStep so jobs of nearly one size are one shape. Only the heads are
// read: a backlog of millions costs what the window holds.
func AutoscaleDemand(src Source, budget, memStep, now int64) *Demand {
	var d *Demand
	src.Read(func(r state.Reader) { d = autoscaleDemand(r, budget, memStep, now) })
	return d
}

func autoscaleDemand(r state.Reader, budget, memStep, now int64) *Demand {
	d := &Demand{}
	var queues []state.UserQueue
	var demands []scheduler.Demand
	var past []int64
	for _, q := range r.UserQueues() {
		if q.ReadyJobs() > 0 {
			// Past use as the round weighs it, read in the tree of the
			// user's oldest batch with Ready jobs.
			p := int64(0)
			if bs := q.Batches(); len(bs) > 0 {
				p = r.PastMilli(r.Queue(bs[0]), q.Name(), now)
			}
			queues = append(queues, q)
			past = append(past, p)
			demands = append(demands, scheduler.Demand{Running: q.RunningMilli() + p, Ready: q.ReadyMilli()})
		}
	}
	shares := scheduler.FairShare(demands, budget)
	constraintOf := map[string]int32{}
	// constraintIndex is 1 + the index of k in d.Constraints (0: none).
	constraintIndex := func(k placement.Constraint) int32 {
		if k.Empty() {
			return 0
		}
		kk := k.Key()
		ci, ok := constraintOf[kk]
		if !ok {
			d.Constraints = append(d.Constraints, k.Clone()) // the demand outlives the read
			ci = int32(len(d.Constraints))
			constraintOf[kk] = ci
		}
		return ci
	}
	// One index for every user, cleared between them: a map per user
	// was most of a decision's time with 500 users.
	type shapeKey struct {
		cpu, mem, gpus int64
		constraint     int32
	}
	index := map[shapeKey]int{}
	// What each leaf queue's quota, and those above it, still admit:
	// jobs past it would wait for the queue's own jobs to end, not for a
	// machine. Placement's queue rule, with the demand so far counted as
	// used.
	quotas := newQuotas(r)
	d.Users = make([]DemandUser, 0, len(queues))
	for ui, q := range queues {
		du := DemandUser{Name: q.Name(), RunningMilli: q.RunningMilli(), PastMilli: past[ui]}
		clear(index)
		left := shares[ui]
	batches:
		for _, b := range q.Batches() {
			leaf := r.Queue(b)
			var gangsSeen map[uint32]bool
			for rg := range r.Ready(b) {
				if left <= 0 || len(du.Shapes) >= maxDemandShapes {
					break batches
				}
				sp := rg.Spec
				if sp.Where != nil && sp.Where.MachineType != "" {
					continue // a machine of its own: Autoscale.Private
				}
				if g := sp.Gang(); g != nil {
					// A gang: one shape of all its members, once every
					// member that has not ended is Ready (as the
					// scheduling view lists it), within its queues'
					// limits whole or not at all.
					first := r.GangOf(b, rg.Lo)
					if gangsSeen[first] {
						continue
					}
					if gangsSeen == nil {
						gangsSeen = map[uint32]bool{}
					}
					gangsSeen[first] = true
					// Of several sizes (a job group's gang), n members
					// as large as its largest in each resource: room
					// for them holds it however it is packed.
					members, _, ok := r.GangReady(b, rg.Lo)
					var n, cpu int64
					var sh DemandShape
					big := sp
					for i, m := range members {
						k := int64(m.Len())
						if ok = ok && quotas.room(leaf, m.Spec.Size(), k) == k; !ok {
							for _, back := range members[:i] {
								quotas.charge(leaf, back.Spec.Size(), -int64(back.Len()))
							}
							break
						}
						quotas.charge(leaf, m.Spec.Size(), k)
						n += k
						cpu += k * m.Spec.CPUMilli
						_, gpus := m.Spec.GPUs()
						if gpus > sh.GPUs {
							big = m.Spec // the GPUs' type
						}
						sh.CPUMilli, sh.Memory, sh.GPUs = max(sh.CPUMilli, m.Spec.CPUMilli), max(sh.Memory, m.Spec.Memory), max(sh.GPUs, gpus)
						part := DemandShape{CPUMilli: m.Spec.CPUMilli, Memory: roundUp(m.Spec.Memory, memStep), GPUs: gpus, Count: k}
						if j := slices.IndexFunc(sh.Parts, func(x DemandShape) bool {
							return x.CPUMilli == part.CPUMilli && x.Memory == part.Memory && x.GPUs == part.GPUs
						}); j >= 0 {
							sh.Parts[j].Count += k
						} else {
							sh.Parts = append(sh.Parts, part)
						}
					}
					if !ok || n == 0 {
						continue
					}
					left -= cpu
					sh.Memory, sh.Count = roundUp(sh.Memory, memStep), n
					if len(sh.Parts) < 2 {
						sh.Parts = nil // one size: the shape itself
					} else {
						slices.SortStableFunc(sh.Parts, func(a, b DemandShape) int {
							if c := cmp.Compare(b.CPUMilli, a.CPUMilli); c != 0 {
								return c
							}
							if c := cmp.Compare(b.Memory, a.Memory); c != 0 {
								return c
							}
							return cmp.Compare(b.GPUs, a.GPUs)
						})
					}
					sh.Gang, sh.GangUniform = b.ID<<32|uint64(first), g.Uniform
					sh.Constraint = constraintIndex(r.Constraint(b, big))
					du.Shapes = append(du.Shapes, sh)
					continue
				}
				n := int64(rg.Len())
				if sp.CPUMilli > 0 {
					n = min(n, (left+sp.CPUMilli-1)/sp.CPUMilli)
				}
				size := sp.Size()
				if n = quotas.room(leaf, size, n); n == 0 {
					continue batches
				}
				quotas.charge(leaf, size, n)
				left -= n * sp.CPUMilli
				_, gpus := sp.GPUs()
				sh := DemandShape{CPUMilli: sp.CPUMilli, Memory: roundUp(sp.Memory, memStep), GPUs: gpus}
				sh.Constraint = constraintIndex(r.Constraint(b, sp))
				key := shapeKey{sh.CPUMilli, sh.Memory, sh.GPUs, sh.Constraint}
				if i, ok := index[key]; ok {
					du.Shapes[i].Count += n
					continue
				}
				index[key] = len(du.Shapes)
				sh.Count = n
				du.Shapes = append(du.Shapes, sh)
			}
		}
		d.Users = append(d.Users, du)
	}
	return d
}

func roundUp(v, step int64) int64 {
	if step <= 0 || v <= 0 {
		return v
	}
	return (v + step - 1) / step * step
}
