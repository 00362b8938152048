package scheduler

import (
	"sort"

	"github.com/google/btree"
)

// Instance is a worker: its size and what is free on it now. A size below
// what is free (or left zero) reads as the free amount.
type Instance struct {
	ID        uint32
	CPUMilli  int64
	Memory    int64
	FreeMilli int64
	FreeMem   int64
}

// Run is a stretch of Ready jobs of one batch with consecutive IDs that share
// a size and are on the same attempt number.
type Run struct {
	Batch    uint64
	First    uint32
	Count    uint32
	Attempt  uint16 // the attempt number a placement creates
	CPUMilli int64
	Memory   int64
}

// User is one user's demand: running cores, Ready cores, and the head of the
// Ready queue in the order the user's jobs should start (oldest batch first).
type User struct {
	Name         string
	RunningMilli int64
	ReadyMilli   int64
	Runs         []Run
}

// Input is a copy of what the scheduler needs to know. Instances may come
// in any order; IDs must be unique.
type Input struct {
	Instances []Instance
	Users     []User
	// MaxPlacements bounds the jobs placed in one round (0: no bound).
	MaxPlacements int
}

// Placement puts Count jobs of a run, starting at First, on an instance.
type Placement struct {
	Batch    uint64
	First    uint32
	Count    uint32
	Attempt  uint16
	Instance uint32
}

// UserResult reports what one user was given in a round.
type UserResult struct {
	Name      string
	Share     int64 // fair-share allocation in millicores
	Placed    int64 // millicores placed
	NotPlaced int   // jobs looked at that fit on no instance
}

// Unplaced is a run, or the tail of one, that fit on no instance, and why.
type Unplaced struct {
	User     string
	Batch    uint64
	First    uint32
	Count    uint32
	CPUMilli int64 // one job's request
	Memory   int64
	Why      Explanation
}

// Output is a scheduling round's decision.
type Output struct {
	Placements []Placement
	Jobs       int
	Users      []UserResult
	// Unplaced lists the runs the round looked at and could place nowhere,
	// in the order it met them.
	Unplaced []Unplaced
}

// maxExplained bounds the distinct job sizes one round explains by walking
// every instance; past it, a size reuses the explanation of a smaller size
// that also failed.
const maxExplained = 64

type slot struct {
	free, mem int64
	id        uint32 // ties break by instance ID, so the input's order does not matter
	idx       int32  // into packer.cands
}

func slotLess(a, b slot) bool {
	if a.free != b.free {
		return a.free < b.free
	}
	if a.mem != b.mem {
		return a.mem < b.mem
	}
	return a.id < b.id
}

// failure is a job size that fit nowhere this round, and why.
type failure struct {
	cpu, mem int64
	why      Explanation
}

// packer finds the instance with the least free cores that fits a job and
// passes the extra filters (best fit), which keeps large holes for large
// jobs. The tree only holds instances with resources free and is searched
// from the job's size up, so DefaultChain holds for whatever it finds; the
// whole chain only runs to explain a failure, over candidates built then.
type packer struct {
	filters []Filter
	chain   []Filter // filters, then DefaultChain
	insts   []Instance
	tree    *btree.BTreeG[slot] // instances with cores and memory free
	full    []slot              // instances taken out of the tree, with what they had left
	failed  []failure
}

func newPacker(filters []Filter, insts []Instance) *packer {
	chain := append(filters[:len(filters):len(filters)], DefaultChain...)
	p := &packer{filters: filters, chain: chain, insts: insts, tree: btree.NewG(16, slotLess)}
	for i, in := range insts {
		if in.FreeMilli > 0 && in.FreeMem > 0 {
			p.tree.ReplaceOrInsert(slot{in.FreeMilli, in.FreeMem, in.ID, int32(i)})
		}
	}
	return p
}

// candidate is instance i as the chain sees it, with free resources f.
func (p *packer) candidate(i int32, free, mem int64) Candidate {
	in := &p.insts[i]
	free, mem = max(free, 0), max(mem, 0)
	return Candidate{ID: in.ID, CPUMilli: max(in.CPUMilli, free, in.FreeMilli), Memory: max(in.Memory, mem, in.FreeMem), FreeMilli: free, FreeMem: mem}
}

// candidates lists every instance with what is free on it now.
func (p *packer) candidates() []Candidate {
	cands := make([]Candidate, len(p.insts))
	for i, in := range p.insts {
		cands[i] = p.candidate(int32(i), in.FreeMilli, in.FreeMem)
	}
	for _, s := range p.full {
		cands[s.idx] = p.candidate(s.idx, s.free, s.mem)
	}
	p.tree.Ascend(func(s slot) bool {
		cands[s.idx] = p.candidate(s.idx, s.free, s.mem)
		return true
	})
	return cands
}

// fit returns the best-fit instance for one job of the run, or why there is
// none.
func (p *packer) fit(r *Run) (slot, Explanation, bool) {
	known := -1
	for i, f := range p.failed {
		if f.cpu == r.CPUMilli && f.mem == r.Memory {
			return slot{}, f.why, false
		}
		// Free resources only shrink during a round: a job at least as large
		// as one that failed fails too.
		if known < 0 && r.CPUMilli >= f.cpu && r.Memory >= f.mem {
			known = i
		}
	}
	if known >= 0 && len(p.failed) >= maxExplained {
		return slot{}, p.failed[known].why, false
	}
	var found slot
	ok := false
	if known < 0 {
		p.tree.AscendGreaterOrEqual(slot{free: r.CPUMilli}, func(s slot) bool {
			if s.mem < r.Memory {
				return true
			}
			if len(p.filters) > 0 {
				c := p.candidate(s.idx, s.free, s.mem)
				if rejects(p.filters, &c, r) != 0 {
					return true
				}
			}
			found, ok = s, true
			return false
		})
	}
	if !ok {
		why := explain(p.chain, p.candidates(), r)
		p.failed = append(p.failed, failure{r.CPUMilli, r.Memory, why})
		return slot{}, why, false
	}
	return found, Explanation{}, true
}

// take removes n jobs' worth of resources from an instance.
func (p *packer) take(s slot, n, cpu, mem int64) {
	p.tree.Delete(s)
	s.free -= n * cpu
	s.mem -= n * mem
	if s.free > 0 && s.mem > 0 {
		p.tree.ReplaceOrInsert(s)
	} else {
		p.full = append(p.full, s)
	}
}

// Schedule walks users in fair-share order (fewest running cores first) and
// places each user's Ready jobs until the user's share is used. What is
// left over (shares that a user's jobs could not use: they fit nowhere, or
// only in holes too small) is split by fair share again between the users
// that can still place, counting what they were given; what even that
// leaves goes to any job that fits, in the same order, so no core idles
// while a job that fits is waiting.
//
// Runs that fit nowhere are listed in Output.Unplaced with the reasons of
// DefaultChain.
func Schedule(in *Input) *Output {
	return ScheduleWith(nil, in)
}

// ScheduleWith is Schedule with more filters checked before DefaultChain's
// (which always apply): they can only narrow the instances a job may use.
func ScheduleWith(filters []Filter, in *Input) *Output {
	out := &Output{}
	var free int64
	for _, inst := range in.Instances {
		free += max(inst.FreeMilli, 0)
	}
	if free == 0 || len(in.Users) == 0 {
		return out
	}
	demands := make([]Demand, len(in.Users))
	for i, u := range in.Users {
		demands[i] = Demand{Running: u.RunningMilli, Ready: u.ReadyMilli}
	}
	shares := FairShare(demands, free)
	order := make([]int, len(in.Users))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ua, ub := &in.Users[order[a]], &in.Users[order[b]]
		if ua.RunningMilli != ub.RunningMilli {
			return ua.RunningMilli < ub.RunningMilli
		}
		return ua.Name < ub.Name
	})
	out.Users = make([]UserResult, len(in.Users))
	for i, u := range in.Users {
		out.Users[i] = UserResult{Name: u.Name, Share: shares[i]}
	}
	p := newPacker(filters, in.Instances)
	// progress[u] = (run index, jobs of that run already placed)
	type cursor struct {
		run  int
		done uint32
	}
	cursors := make([]cursor, len(in.Users))
	limit := in.MaxPlacements
	if limit <= 0 {
		limit = int(^uint(0) >> 1)
	}
	share := make([]int64, len(in.Users)) // this pass's allocation
	given := make([]int64, len(in.Users)) // placed in this pass
	unfit := make([]int64, len(in.Users)) // millicores of runs that fit nowhere
	copy(share, shares)
	for pass := 0; pass < 3; pass++ {
		if pass == 1 {
			// Split what is still free between the users that can still
			// place, from where they stand now.
			var left int64
			p.tree.Ascend(func(s slot) bool { left += s.free; return true })
			again := make([]Demand, len(in.Users))
			for i, u := range in.Users {
				if cursors[i].run < len(u.Runs) {
					placed := out.Users[i].Placed
					again[i] = Demand{Running: u.RunningMilli + placed, Ready: max(u.ReadyMilli-placed-unfit[i], 0)}
				}
			}
			share = FairShare(again, left)
			clear(given)
		}
		for _, ui := range order {
			u := &in.Users[ui]
			res := &out.Users[ui]
			c := &cursors[ui]
			for c.run < len(u.Runs) && out.Jobs < limit {
				if pass < 2 && given[ui] >= share[ui] {
					break
				}
				run := &u.Runs[c.run]
				s, why, ok := p.fit(run)
				if !ok {
					unfit[ui] += int64(run.Count-c.done) * run.CPUMilli
					res.NotPlaced += int(run.Count - c.done)
					out.Unplaced = append(out.Unplaced, Unplaced{
						User: u.Name, Batch: run.Batch, First: run.First + c.done,
						Count: run.Count - c.done, CPUMilli: run.CPUMilli, Memory: run.Memory, Why: why,
					})
					c.run++
					c.done = 0
					continue
				}
				// Fill the chosen instance with as many jobs of the run as
				// fit, within the user's share on the first pass.
				n := int64(run.Count - c.done)
				if run.CPUMilli > 0 {
					n = min(n, s.free/run.CPUMilli)
				}
				if run.Memory > 0 {
					n = min(n, s.mem/run.Memory)
				}
				if pass < 2 && run.CPUMilli > 0 {
					// Allow the last job to overshoot so that a share smaller
					// than one job still starts one.
					left := share[ui] - given[ui]
					n = min(n, max((left+run.CPUMilli-1)/run.CPUMilli, 1))
				}
				n = min(n, int64(limit-out.Jobs))
				p.take(s, n, run.CPUMilli, run.Memory)
				out.Placements = append(out.Placements, Placement{
					Batch: run.Batch, First: run.First + c.done, Count: uint32(n),
					Attempt: run.Attempt, Instance: s.id,
				})
				out.Jobs += int(n)
				res.Placed += n * run.CPUMilli
				given[ui] += n * run.CPUMilli
				c.done += uint32(n)
				if c.done == run.Count {
					c.run++
					c.done = 0
				}
			}
		}
	}
	return out
}
