package scheduler

import (
	"sort"

	"github.com/google/btree"
)

// Instance is a worker with free resources.
type Instance struct {
	ID        uint32
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

// Input is a copy of what the scheduler needs to know.
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

// Output is a scheduling round's decision.
type Output struct {
	Placements []Placement
	Jobs       int
	Users      []UserResult
}

type slot struct {
	free, mem int64
	id        uint32
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

// packer finds the instance with the least free cores that still fits a job
// (best fit), which keeps large holes for large jobs.
type packer struct {
	tree   *btree.BTreeG[slot]
	failed [][2]int64 // sizes that fit nowhere this round
}

func newPacker(insts []Instance) *packer {
	p := &packer{tree: btree.NewG(16, slotLess)}
	for _, in := range insts {
		if in.FreeMilli > 0 && in.FreeMem > 0 {
			p.tree.ReplaceOrInsert(slot{in.FreeMilli, in.FreeMem, in.ID})
		}
	}
	return p
}

// fit returns the best-fit instance for a job of the given size.
func (p *packer) fit(cpu, mem int64) (slot, bool) {
	for _, f := range p.failed {
		if cpu >= f[0] && mem >= f[1] {
			return slot{}, false
		}
	}
	var found slot
	ok := false
	p.tree.AscendGreaterOrEqual(slot{free: cpu}, func(s slot) bool {
		if s.mem >= mem {
			found, ok = s, true
			return false
		}
		return true
	})
	if !ok {
		p.failed = append(p.failed, [2]int64{cpu, mem})
	}
	return found, ok
}

// take removes n jobs' worth of resources from an instance.
func (p *packer) take(s slot, n, cpu, mem int64) {
	p.tree.Delete(s)
	s.free -= n * cpu
	s.mem -= n * mem
	if s.free > 0 && s.mem > 0 {
		p.tree.ReplaceOrInsert(s)
	}
}

// Schedule walks users in fair-share order (fewest running cores first) and
// places each user's Ready jobs until the user's share is used, then offers
// what is left over to the same order again so no core idles while a job
// that fits is waiting.
func Schedule(in *Input) *Output {
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
	p := newPacker(in.Instances)
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
	for pass := 0; pass < 2; pass++ {
		for _, ui := range order {
			u := &in.Users[ui]
			res := &out.Users[ui]
			c := &cursors[ui]
			for c.run < len(u.Runs) && out.Jobs < limit {
				if pass == 0 && res.Placed >= res.Share {
					break
				}
				run := &u.Runs[c.run]
				s, ok := p.fit(run.CPUMilli, run.Memory)
				if !ok {
					res.NotPlaced += int(run.Count - c.done)
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
				if pass == 0 && run.CPUMilli > 0 {
					// Allow the last job to overshoot so that a share smaller
					// than one job still starts one.
					left := res.Share - res.Placed
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
