package state

import (
	"maps"
	"slices"
	"strings"

	"github.com/drover-sched/drover/placement"
)

// AutoscaleState is what the autoscaler's leader loop reads before a
// decision: its settings, configs, machines and marks, the clusters, and
// what every active worker has free.
type AutoscaleState struct {
	Settings Autoscaler
	Configs  []LaunchConfig
	Machines []Machine
	Marks    []CapacityMark
	Clusters []ClusterSlot
	Free     []FreeRoom
	// DrainingFree is what draining machines' workers have free.
	DrainingFree []FreeRoom
	// Running maps an active instance to the attempts it runs (for idle
	// machines).
	Running   map[uint32]int
	Decisions []Decision
	// Providers: what each cluster declares makes its machines.
	Providers map[string]ClusterProvider
	// Private lists Ready jobs that want a machine of their own (oldest
	// batch first, at most maxPrivatePerDecision).
	Private []PrivateJob
}

// PrivateJob is a Ready job that names a machine type.
type PrivateJob struct {
	Batch       uint64
	Job         uint32
	User        string
	MachineType string
	Regions     []string
	Pool        string
	GPUType     string
	CPUMilli    int64
	Memory      int64
	GPUs        int64
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
}

// AutoscaleState copies the autoscaler's state.
func (s *State) AutoscaleState() *AutoscaleState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := &AutoscaleState{Settings: s.autoscaler, Running: map[uint32]int{}, Decisions: slices.Clone(s.decisions), Providers: map[string]ClusterProvider{}}
	for _, name := range sortedKeys(s.launchConfigs) {
		v.Configs = append(v.Configs, *s.launchConfigs[name])
	}
	for _, id := range s.sortedMachineIDs() {
		v.Machines = append(v.Machines, *s.machines[id])
	}
	for _, name := range sortedKeys(s.marks) {
		v.Marks = append(v.Marks, *s.marks[name])
	}
	for _, name := range sortedKeys(s.clusters) {
		cl := s.clusters[name]
		v.Clusters = append(v.Clusters, ClusterSlot{Name: cl.Name, Region: cl.Region, Disabled: cl.Disabled, Reason: cl.Reason, By: cl.By, Since: cl.Since})
		if cl.Provider != "" {
			v.Providers[cl.Name] = ClusterProvider{Kind: cl.Provider, Settings: maps.Clone(cl.ProviderSettings)}
		}
	}
	s.privateJobs(v)
	for _, id := range s.sortedInstanceIDs() {
		inst := s.instances[id]
		if !inst.Active {
			continue
		}
		v.Running[id] = len(inst.running)
		if cl := s.clusters[inst.Cluster]; cl != nil && cl.Disabled {
			continue
		}
		if m := s.machines[inst.Machine]; m != nil && m.private() {
			continue // its room is its job's
		}
		room := FreeRoom{Instance: id, Machine: inst.Machine, Region: inst.Region, Cluster: inst.Cluster, Pool: inst.Pool, GPUType: inst.GPUType,
			CPUMilli: max(inst.FreeMilli, 0), Memory: max(inst.FreeMem, 0), GPUs: max(inst.FreeGPUs, 0)}
		if s.draining(inst) {
			v.DrainingFree = append(v.DrainingFree, room)
			continue
		}
		v.Free = append(v.Free, room)
	}
	return v
}

// DemandUser is one user's windowed ready work, head of the queue first.
type DemandUser struct {
	Name         string
	RunningMilli int64
	Shapes       []DemandShape
}

// DemandShape is jobs of one size and constraint in a user's queue.
type DemandShape struct {
	CPUMilli, Memory, GPUs int64
	// Constraint is 1 + an index into AutoscaleDemand.Constraints (0:
	// none).
	Constraint int32
	Count      int64
}

// AutoscaleDemand is the head of every user's ready queue within the
// autoscaler's window.
type AutoscaleDemand struct {
	Users       []DemandUser
	Constraints []ConstraintSlot
}

// maxDemandShapes bounds the shapes one user's window lists: a queue of
// distinct jobs of every size would otherwise list each.
const maxDemandShapes = 4096

// AutoscaleDemand reads the head of each user's Ready queue up to the
// user's fair share of budget millicores (share: the scheduler's fair
// share), one job past it, with memory rounded up to memStep so jobs of
// nearly one size are one shape. Only the heads are read: a backlog of
// millions costs what the window holds.
func (s *State) AutoscaleDemand(budget int64, share ShareFunc, memStep int64) *AutoscaleDemand {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := &AutoscaleDemand{}
	names := make([]string, 0, len(s.sched))
	for name, u := range s.sched {
		if u.readyJobs > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	running, ready := make([]int64, len(names)), make([]int64, len(names))
	for i, name := range names {
		running[i], ready[i] = s.sched[name].runningMilli, s.sched[name].readyMilli
	}
	shares := share(running, ready, budget)
	constraintOf := map[string]int32{}
	// One index for every user, cleared between them: a map per user
	// was most of a decision's time with 500 users.
	index := map[DemandShape]int{}
	// What each team's quota still admits: jobs past it would wait for
	// the team's own jobs to end, not for a machine. Cores alone, by
	// placement's quota rule, with the demand so far counted as used.
	teamRoom := map[*Team]placement.Quota{}
	d.Users = make([]DemandUser, 0, len(names))
	for ui, name := range names {
		u := s.sched[name]
		du := DemandUser{Name: name, RunningMilli: u.runningMilli}
		clear(index)
		left := shares[ui]
	batches:
		for _, b := range u.active {
			t := s.projectTeam[b.BillingProject]
			if t != nil && t.QuotaMilli > 0 {
				if _, ok := teamRoom[t]; !ok {
					teamRoom[t] = placement.Quota{CPUMilli: t.QuotaMilli, UsedMilli: t.usedMilli}
				}
			}
			for _, r := range b.ready.items() {
				if left <= 0 || len(du.Shapes) >= maxDemandShapes {
					break batches
				}
				sp := b.groupOf(r.Lo).spec
				if sp.Where != nil && sp.Where.MachineType != "" {
					continue // a machine of its own: AutoscaleState.Private
				}
				n := int64(r.Len())
				if sp.CPUMilli > 0 {
					n = min(n, (left+sp.CPUMilli-1)/sp.CPUMilli)
				}
				if q, ok := teamRoom[t]; ok && t != nil && sp.CPUMilli > 0 {
					if n, _ = q.Room(sp.CPUMilli, 0, n); n == 0 {
						continue batches
					}
					q.UsedMilli += n * sp.CPUMilli
					teamRoom[t] = q
				}
				left -= n * sp.CPUMilli
				typ, gpus := sp.GPUs()
				key := DemandShape{CPUMilli: sp.CPUMilli, Memory: roundUp(sp.Memory, memStep), GPUs: gpus}
				if w := sp.Where; w != nil && (len(w.Regions) > 0 || w.Pool != "" || gpus > 0) {
					k := w.Pool + "\x00" + typ + "\x00" + strings.Join(w.Regions, "\x00")
					ci, ok := constraintOf[k]
					if !ok {
						d.Constraints = append(d.Constraints, ConstraintSlot{Regions: slices.Clone(w.Regions), Pool: w.Pool, GPUType: typ})
						ci = int32(len(d.Constraints))
						constraintOf[k] = ci
					}
					key.Constraint = ci
				}
				if i, ok := index[key]; ok {
					du.Shapes[i].Count += n
					continue
				}
				index[key] = len(du.Shapes)
				key.Count = n
				du.Shapes = append(du.Shapes, key)
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

// MachineInfo is a machine with what the API shows of its worker.
type MachineInfo struct {
	Machine
	Running int // attempts on its worker
}

// Machines lists the autoscaler's machines, live first, by ID.
func (s *State) Machines() []MachineInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]MachineInfo, 0, len(s.machines))
	for _, id := range s.sortedMachineIDs() {
		m := s.machines[id]
		mi := MachineInfo{Machine: *m}
		if inst := s.instances[m.Instance]; inst != nil && inst.Active {
			mi.Running = len(inst.running)
		}
		out = append(out, mi)
	}
	slices.SortStableFunc(out, func(a, b MachineInfo) int {
		la, lb := machineLive(a.State), machineLive(b.State)
		switch {
		case la && !lb:
			return -1
		case lb && !la:
			return 1
		}
		return 0
	})
	return out
}

// AutoscalerSettings returns the settings and launch configs.
func (s *State) AutoscalerSettings() (Autoscaler, []LaunchConfig, map[string]CapacityMark) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var cfgs []LaunchConfig
	for _, name := range sortedKeys(s.launchConfigs) {
		cfgs = append(cfgs, *s.launchConfigs[name])
	}
	marks := map[string]CapacityMark{}
	for k, v := range s.marks {
		marks[k] = *v
	}
	return s.autoscaler, cfgs, maps.Clone(marks)
}

// AutoscaleDecisions returns the recent decisions, oldest first.
func (s *State) AutoscaleDecisions() []Decision {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.decisions)
}

// privateJobs lists Ready jobs that want a machine of their own, by user
// name, then each user's oldest batch first.
func (s *State) privateJobs(v *AutoscaleState) {
	for _, name := range sortedKeys(s.sched) {
		for _, b := range s.sched[name].active {
			if !b.private {
				continue
			}
			for _, r := range b.ready.items() {
				sp := b.groupOf(r.Lo).spec
				w := sp.Where
				if w == nil || w.MachineType == "" {
					continue
				}
				typ, gpus := sp.GPUs()
				for id := r.Lo; id <= r.Hi; id++ {
					if len(v.Private) >= maxPrivatePerDecision {
						return
					}
					v.Private = append(v.Private, PrivateJob{Batch: b.ID, Job: id, User: b.User, MachineType: w.MachineType, Regions: slices.Clone(w.Regions),
						Pool: w.Pool, GPUType: typ, CPUMilli: sp.CPUMilli, Memory: sp.Memory, GPUs: gpus})
				}
			}
		}
	}
}
