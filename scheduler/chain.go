package scheduler

import (
	"fmt"

	"github.com/drover-sched/drover/placement"
)

// Reason says why an instance cannot take a job of some run.
type Reason uint8

// Reasons, in the order the default chain checks them. Values appear in
// metrics and explanations: append, never renumber.
const (
	// ReasonCPUCapacity: the instance has fewer cores in all than one job
	// asks for; it never fits there.
	ReasonCPUCapacity Reason = iota + 1
	// ReasonMemoryCapacity: the instance has less memory in all than one
	// job asks for.
	ReasonMemoryCapacity
	// ReasonCPUFree: the instance is large enough but its cores are taken.
	ReasonCPUFree
	// ReasonMemoryFree: the instance is large enough but its memory is
	// taken.
	ReasonMemoryFree
	// ReasonRegion and the reasons after it are placement's (see
	// placement.Reason), in its order: the instance's cluster is outside
	// the job's regions, the instance is in another pool, its cluster is
	// disabled or down; the queue is at its cpu or memory quota (these two
	// rule out every instance at once).
	ReasonRegion
	ReasonPool
	ReasonClusterDisabled
	ReasonClusterDown
	ReasonQuotaCPU
	ReasonQuotaMemory
	ReasonQuotaGPU
	// ReasonGPUCapacity: the instance has no GPUs of the job's type, or
	// fewer in all than one job needs; ReasonGPUFree: they are taken.
	ReasonGPUCapacity
	ReasonGPUFree
	// ReasonSpendLimit: the run's billing project has reached its spend
	// limit at the round's time (billing.Budget.Reached); like a queue's
	// quota, it rules out every instance at once.
	ReasonSpendLimit
	// ReasonMaxRunning: the run's queue (or one above it) runs its
	// max_running jobs or cores (placement.ReasonMaxRunning).
	ReasonMaxRunning
	// ReasonNotHome: the instance's cluster is not among its queue's
	// home clusters (placement.ReasonNotHome).
	ReasonNotHome
	// ReasonLeftForLarger: the instance is idle and at least twice the
	// size of the machine the autoscaler would launch for the job; it is
	// left to larger jobs (LeftForLarger).
	ReasonLeftForLarger
	// ReasonLabels: the instance lacks a label the job asks for
	// (placement.ReasonLabels).
	ReasonLabels
	// ReasonCluster: the instance's cluster is not among those the job
	// names (placement.ReasonCluster).
	ReasonCluster
	// ReasonSpot: the instance is a spot machine and the job is kept off
	// spot (placement.ReasonSpot).
	ReasonSpot
	// ReasonGang: the run is a gang, and no cluster (pool, label value)
	// it may use has room for all its members at once
	// (Explanation.Gang, GangRoom).
	ReasonGang
	// ReasonGangHeld: the instance would have room for the job but for
	// what is held there for a gang first in line (Explanation.Held).
	ReasonGangHeld
)

// placementReason maps placement's reasons onto the chain's.
func placementReason(r placement.Reason) Reason {
	switch r {
	case 0:
		return 0
	case placement.ReasonMaxRunning:
		return ReasonMaxRunning
	case placement.ReasonNotHome:
		return ReasonNotHome
	case placement.ReasonLabels:
		return ReasonLabels
	case placement.ReasonCluster:
		return ReasonCluster
	case placement.ReasonSpot:
		return ReasonSpot
	}
	return ReasonRegion + Reason(r-placement.ReasonRegion)
}

// Placement returns the placement reason a chain reason stands for, or 0
// for the chain's own (sizes, free resources, spend), so a caller can ask
// placement to word a refusal it made.
func (r Reason) Placement() placement.Reason {
	switch r {
	case ReasonMaxRunning:
		return placement.ReasonMaxRunning
	case ReasonNotHome:
		return placement.ReasonNotHome
	case ReasonLabels:
		return placement.ReasonLabels
	case ReasonCluster:
		return placement.ReasonCluster
	case ReasonSpot:
		return placement.ReasonSpot
	}
	if r < ReasonRegion || r > ReasonQuotaGPU {
		return 0
	}
	return placement.ReasonRegion + placement.Reason(r-ReasonRegion)
}

var reasonNames = map[Reason]string{
	ReasonCPUCapacity:    "cpu_capacity",
	ReasonMemoryCapacity: "memory_capacity",
	ReasonCPUFree:        "cpu_exhausted",
	ReasonMemoryFree:     "memory_exhausted",
	ReasonGPUCapacity:    "gpu_capacity",
	ReasonGPUFree:        "gpu_exhausted",
	ReasonSpendLimit:     "spend_limit",
	ReasonLeftForLarger:  "left_for_larger",
	ReasonGang:           "gang_room",
	ReasonGangHeld:       "held_for_gang",
}

func init() {
	for r := placement.ReasonRegion; r <= placement.ReasonSpot; r++ {
		reasonNames[placementReason(r)] = r.String()
	}
}

// Reasons lists the reasons DefaultChain reports, in code order.
func Reasons() []Reason {
	return []Reason{ReasonCPUCapacity, ReasonMemoryCapacity, ReasonCPUFree, ReasonMemoryFree,
		ReasonRegion, ReasonPool, ReasonClusterDisabled, ReasonClusterDown, ReasonQuotaCPU, ReasonQuotaMemory, ReasonQuotaGPU,
		ReasonGPUCapacity, ReasonGPUFree, ReasonSpendLimit, ReasonMaxRunning, ReasonNotHome, ReasonLeftForLarger, ReasonLabels, ReasonCluster, ReasonSpot}
}

// String is the reason's code, as metrics label it.
func (r Reason) String() string {
	if n, ok := reasonNames[r]; ok {
		return n
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Candidate is an instance as the chain sees it during a round: its size
// and what is still free after the placements made so far.
type Candidate struct {
	ID        uint32
	CPUMilli  int64
	Memory    int64
	FreeMilli int64
	FreeMem   int64
	Cluster   int32 // index into Input.Clusters
	Pool      string
	Labels    map[string]string // read-only
	GPUType   string
	GPUs      int64
	FreeGPUs  int64
	Spot      bool // a spot machine
	// HeldMilli, HeldMem and HeldGPUs are free but held for a gang first
	// in line: no other job may use them, and FreeMilli, FreeMem and
	// FreeGPUs leave them out (what is free is the sum).
	HeldMilli, HeldMem, HeldGPUs int64
}

// A Filter is one link of the feasibility chain: it rejects the candidates
// that cannot take one job of a run, for one reason.
type Filter interface {
	Reason() Reason
	Feasible(c *Candidate, r *Run) bool
}

type resourceFilter struct {
	reason Reason
	ok     func(c *Candidate, r *Run) bool
}

func (f resourceFilter) Reason() Reason                     { return f.reason }
func (f resourceFilter) Feasible(c *Candidate, r *Run) bool { return f.ok(c, r) }

// DefaultChain checks size before free resources, so an explanation tells
// "too small for this job" apart from "busy right now".
var DefaultChain = []Filter{
	resourceFilter{ReasonCPUCapacity, func(c *Candidate, r *Run) bool { return c.CPUMilli >= r.CPUMilli }},
	resourceFilter{ReasonMemoryCapacity, func(c *Candidate, r *Run) bool { return c.Memory >= r.Memory }},
	resourceFilter{ReasonCPUFree, func(c *Candidate, r *Run) bool { return c.free().FitsCPU(r.size()) }},
	resourceFilter{ReasonMemoryFree, func(c *Candidate, r *Run) bool { return c.free().FitsMemory(r.size()) }},
}

// free is what the candidate has free, as placement's rule of node fit
// reads it.
func (c *Candidate) free() placement.Free {
	return placement.Free{CPUMilli: c.FreeMilli, Memory: c.FreeMem, GPUs: c.FreeGPUs}
}

// size is one job of the run as the rules read it (its GPU type is the
// constraint's).
func (r *Run) size() placement.Size {
	return placement.Size{CPUMilli: r.CPUMilli, Memory: r.Memory, GPUs: r.GPUs}
}

// placementChain checks, per instance, what placement rules out before
// any size: the job's regions and clusters, its queue's home clusters, its
// pool and labels, whether it may take a spot machine, the cluster's state, in the order
// placement.Constraint.Admits checks them, one link (and one reason) for
// each of its parts, then the GPUs (HoldsGPUs).
func placementChain(p *packer) []Filter {
	cluster := func(c *Candidate) *placement.Cluster { return &p.clusters[c.Cluster] }
	return []Filter{
		resourceFilter{ReasonRegion, func(c *Candidate, r *Run) bool { return p.constraint(r).AllowsRegion(cluster(c).Region) }},
		resourceFilter{ReasonCluster, func(c *Candidate, r *Run) bool { return p.constraint(r).AllowsJobCluster(cluster(c).Name) }},
		resourceFilter{ReasonNotHome, func(c *Candidate, r *Run) bool { return p.constraint(r).AllowsCluster(cluster(c).Name) }},
		resourceFilter{ReasonPool, func(c *Candidate, r *Run) bool { return p.constraint(r).AllowsPool(c.Pool) }},
		resourceFilter{ReasonLabels, func(c *Candidate, r *Run) bool { return p.constraint(r).AllowsLabels(c.Labels) }},
		resourceFilter{ReasonSpot, func(c *Candidate, r *Run) bool { return p.constraint(r).AllowsSpot(c.Spot) }},
		resourceFilter{ReasonClusterDisabled, func(c *Candidate, r *Run) bool { return cluster(c).Available() != placement.ReasonDisabled }},
		resourceFilter{ReasonClusterDown, func(c *Candidate, r *Run) bool { return cluster(c).Available() != placement.ReasonDown }},
		resourceFilter{ReasonGPUCapacity, func(c *Candidate, r *Run) bool {
			return p.constraint(r).HoldsGPUs(r.GPUs, c.GPUType, c.GPUs)
		}},
	}
}

// gpuFree comes after DefaultChain: a GPU worker large enough whose GPUs
// are taken.
var gpuFree = resourceFilter{ReasonGPUFree, func(c *Candidate, r *Run) bool { return c.free().FitsGPUs(r.size()) }}

// rejects returns the first filter of the chain that rejects c for r, or 0.
func rejects(chain []Filter, c *Candidate, r *Run) Reason {
	for _, f := range chain {
		if !f.Feasible(c, r) {
			return f.Reason()
		}
	}
	return 0
}

// ReasonCount is how many instances one filter rejected.
type ReasonCount struct {
	Reason    Reason
	Instances int
}

// Explanation says why a run could be placed nowhere: of Instances
// instances, how many each filter rejected (an instance is counted once,
// against the first filter that rejected it). No instances at all reads as
// Instances == 0.
type Explanation struct {
	Instances int
	Filtered  []ReasonCount
	// Quota, when set, ruled out every instance at once: Queue (the
	// run's leaf or one above it) is at its cpu (ReasonQuotaCPU), memory
	// or GPU quota or its max_running (ReasonMaxRunning), or Project has
	// reached its spend limit (ReasonSpendLimit).
	Quota   Reason
	Queue   string
	Project string
	// Gang is the members of a gang that must start together, and
	// GangRoom the most of them that one cluster (pool, label value) it
	// may use has room for now (-1: not known, fewer than an earlier
	// gang of smaller members had); Quota is ReasonGang then, unless a
	// queue's quota or a spend limit refused it first.
	Gang, GangRoom int64
	// Held is the workers where room is held for the gang as their jobs
	// end (0: none), HeldRoom how many of its members they have room
	// for now.
	Held     int
	HeldRoom int64
}

// Count returns the instances rejected for one reason.
func (e Explanation) Count(r Reason) int {
	for _, rc := range e.Filtered {
		if rc.Reason == r {
			return rc.Instances
		}
	}
	return 0
}

// explain runs the whole chain over every candidate. A candidate the chain
// lets through but that has nothing free (the packer never offers it) is
// counted as cores busy. Reasons are listed in code order.
func explain(chain []Filter, cands []Candidate, r *Run) Explanation {
	e := Explanation{Instances: len(cands)}
	var counts [256]int
	for i := range cands {
		c := &cands[i]
		why := busy(chain, c, r)
		if (why == ReasonCPUFree || why == ReasonMemoryFree || why == ReasonGPUFree) && c.HeldMilli+c.HeldMem+c.HeldGPUs > 0 {
			// Busy, but for what is held for a gang?
			h := *c
			h.FreeMilli, h.FreeMem, h.FreeGPUs = c.FreeMilli+c.HeldMilli, c.FreeMem+c.HeldMem, c.FreeGPUs+c.HeldGPUs
			if busy(chain, &h, r) == 0 {
				why = ReasonGangHeld
			}
		}
		counts[why]++
	}
	for why := 1; why < len(counts); why++ {
		if counts[why] > 0 {
			e.Filtered = append(e.Filtered, ReasonCount{Reason: Reason(why), Instances: counts[why]})
		}
	}
	return e
}

// busy is the reason the chain gives for c, or cores or memory busy when
// it lets c through with nothing free (0: c has room for a job of r).
func busy(chain []Filter, c *Candidate, r *Run) Reason {
	why := rejects(chain, c, r)
	switch {
	case why != 0:
	case c.FreeMilli < r.CPUMilli || c.FreeMilli <= 0:
		why = ReasonCPUFree
	case c.FreeMem < r.Memory || c.FreeMem <= 0:
		why = ReasonMemoryFree
	}
	return why
}
