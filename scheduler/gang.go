package scheduler

import (
	"strings"

	"github.com/drover-sched/drover/placement"
)

// Gangs (all-or-nothing scheduling, as Armada's and Kueue's): the members
// of a gang start in the same round on workers of one cluster (one pool,
// or one value of a worker label, when the gang asks), or none of them
// does. The packer looks for room for all of them before it takes any:
// in each cluster the run may use, in the order its queue's strategy
// ranks them, it walks the instances from the smallest that fits one
// member up (best fit, as for any run) and counts how many members each
// can take, until they add up to the gang.

// maxGangVisits bounds the instances one round looks at for gangs, so a
// round with thousands of gangs that fit nowhere stays bounded (a plain
// run's search is a tree lookup; a gang's walks a cluster). Gangs met
// after it wait for the next round.
const maxGangVisits = 1 << 18

// gangTake is a part of a gang placed on one instance.
type gangTake struct {
	s slot
	n int64
}

// gangFailure is a gang that fit nowhere this round: a gang at least as
// large, of members at least as large, under the same constraint and
// uniformity, fits nowhere either (free room only shrinks in a round).
type gangFailure struct {
	constraint  int32
	uniform     string
	cpu, mem    int64
	gpus        int64
	n           int64
	why         Explanation
	leftToLarge bool // an idle machine was left to larger jobs: not reused
}

// gangUnit returns the runs of the gang that begins at runs[i]: it and
// the runs after it of the same batch and gang.
func gangUnit(runs []Run, i int) []Run {
	end := i + 1
	for end < len(runs) && runs[end].Gang == runs[i].Gang && runs[end].Batch == runs[i].Batch {
		end++
	}
	return runs[i:end]
}

// members counts a gang's jobs.
func members(unit []Run) int64 {
	var n int64
	for i := range unit {
		n += int64(unit[i].Count)
	}
	return n
}

// fitGang finds room for n members of run r's gang at once, or says why
// there is none.
func (p *packer) fitGang(r *Run, n int64) ([]gangTake, Explanation, bool) {
	if r.Project > 0 && int(r.Project) <= len(p.spent) && p.spent[r.Project-1] {
		return nil, Explanation{Instances: len(p.insts), Quota: ReasonSpendLimit, Project: p.in.Projects[r.Project-1].Name}, false
	}
	leaf := p.queue(r)
	var quota *placement.Quota
	strategy := placement.DefaultStrategy
	if leaf != nil {
		quota = &leaf.Quota
		if leaf.Strategy != "" {
			strategy = leaf.Strategy
		}
		if got, _, _ := p.quotaRoom(r, n); got < n {
			// The limit that admits fewer than the gang, and whose.
			i := p.leaf(r)
			why, depth := placement.PathRefuses(func(y func(*placement.Quota) bool) { p.walkUp(i, y) }, p.size(r), n)
			for ; depth > 0; depth-- {
				i = p.up[i]
			}
			return nil, Explanation{Instances: len(p.insts), Quota: placementReason(why), Queue: p.queues[i].Name, Gang: n, GangRoom: got}, false
		}
	}
	for _, f := range p.gangFailed {
		if f.constraint != r.Constraint || f.uniform != r.GangUniform || f.leftToLarge || n < f.n {
			continue
		}
		// A gang as large or larger, of members of the same size: the
		// same room. Of larger members: no more room (not said).
		same := r.CPUMilli == f.cpu && r.Memory == f.mem && r.GPUs == f.gpus
		if same || (r.CPUMilli >= f.cpu && r.Memory >= f.mem && r.GPUs >= f.gpus) {
			why := f.why
			why.Gang = n
			if !same {
				why.GangRoom = -1
			}
			return nil, why, false
		}
	}
	if p.gangVisits >= maxGangVisits {
		// The round's search for gangs is spent: this one waits for
		// the next round (not remembered as fitting nowhere).
		return nil, Explanation{Instances: len(p.insts), Quota: ReasonGang, Gang: n, GangRoom: -1}, false
	}
	k := p.constraint(r)
	allowed := p.allowedFor(r)
	var most int64
	leftToLarge := false
	label := strings.TrimPrefix(r.GangUniform, "label:")
	byLabel := label != r.GangUniform
	// room walks the instances of trees ts that pass the run's filters,
	// smallest first, calling add with each one's room for members; add
	// says when to stop.
	room := func(ts []int, add func(s slot, m int64) bool) {
		for _, t := range ts {
			if !k.AllowsPool(p.trees[t].pool) {
				continue
			}
			stop := false
			p.trees[t].tree.AscendGreaterOrEqual(slot{free: r.CPUMilli}, func(s slot) bool {
				p.gangVisits++
				if s.mem < r.Memory || !k.HoldsGPUs(r.GPUs, p.insts[s.idx].GPUType, p.freeGPU[s.idx]) ||
					!k.AllowsLabels(p.insts[s.idx].Labels) || !k.AllowsSpot(p.insts[s.idx].Spot) {
					return true
				}
				if p.leftForLarger(r, s.idx, s.free) {
					leftToLarge = true
					return true
				}
				if len(p.filters) > 0 {
					c := p.candidate(s.idx, s.free, s.mem)
					if rejects(p.filters, &c, r) != 0 {
						return true
					}
				}
				m := s.free / max(r.CPUMilli, 1)
				if r.Memory > 0 {
					m = min(m, s.mem/r.Memory)
				}
				if r.GPUs > 0 {
					m = min(m, p.freeGPU[s.idx]/r.GPUs)
				}
				if m <= 0 {
					return true
				}
				stop = add(s, m)
				return !stop
			})
			if stop {
				return
			}
		}
	}
	order := p.ranker.Order(strategy, allowed, quota, nil)
	for _, c := range order {
		// The sets of trees the gang may span: the cluster's, or each
		// pool's alone.
		sets := [][]int{p.byClust[c]}
		if r.GangUniform == "pool" {
			sets = sets[:0]
			for _, t := range p.byClust[c] {
				sets = append(sets, []int{t})
			}
		}
		for _, ts := range sets {
			if !byLabel {
				var takes []gangTake
				var got int64
				room(ts, func(s slot, m int64) bool {
					m = min(m, n-got)
					takes = append(takes, gangTake{s, m})
					got += m
					return got >= n
				})
				if got >= n {
					return takes, Explanation{}, true
				}
				most = max(most, got)
				continue
			}
			// One value of the label: members counted per value, in
			// the order values are met.
			takes := map[string][]gangTake{}
			got := map[string]int64{}
			var done string
			found := false
			room(ts, func(s slot, m int64) bool {
				v, ok := p.insts[s.idx].Labels[label]
				if !ok {
					return false
				}
				m = min(m, n-got[v])
				takes[v] = append(takes[v], gangTake{s, m})
				got[v] += m
				if got[v] >= n {
					done, found = v, true
					return true
				}
				return false
			})
			if found {
				return takes[done], Explanation{}, true
			}
			for _, g := range got {
				most = max(most, g)
			}
		}
	}
	// Each instance explained, as for runs, for the first maxExplained
	// failures of the round: past them, the gang's own numbers say it.
	why := Explanation{Instances: len(p.insts)}
	if p.nFailed < maxExplained {
		why = explain(p.chain, p.candidates(), r)
	}
	p.nFailed++
	why.Quota, why.Gang, why.GangRoom = ReasonGang, n, most
	p.gangFailed = append(p.gangFailed, gangFailure{constraint: r.Constraint, uniform: r.GangUniform, cpu: r.CPUMilli, mem: r.Memory, gpus: r.GPUs, n: n, why: why, leftToLarge: leftToLarge})
	return nil, why, false
}

// unplacedState is what a round keeps of a user's runs that fit nowhere.
type unplacedState struct {
	res    *UserResult
	unfit  *int64
	listed *int
}

// placeGang places the members of a gang (unit: its runs) together, or
// lists them as unplaced with why; placed is told the millicores placed.
func (p *packer) placeGang(unit []Run, out *Output, ui int, st *unplacedState, limit int, kept *keeps, placed func(int64)) {
	r := &unit[0]
	n := members(unit)
	takes, why, ok := []gangTake(nil), Explanation{}, out.Jobs+int(n) <= limit
	if ok {
		takes, why, ok = p.fitGang(r, n)
	}
	if ok && kept != nil && kept.room(p, r, n) < n {
		// What is left is kept for idle guarantees.
		ok, why = false, Explanation{Instances: len(p.insts), Quota: ReasonGang, Gang: n}
	}
	if !ok {
		*st.unfit += n * r.CPUMilli
		st.res.NotPlaced += int(n)
		if out.Jobs+int(n) > limit {
			return // the round's bound, not the gang's: it waits for the next round
		}
		for i := range unit {
			if *st.listed++; *st.listed <= maxUnplacedPerUser {
				u := &unit[i]
				out.Unplaced = append(out.Unplaced, Unplaced{
					User: st.res.Name, Batch: u.Batch, First: u.First, Count: u.Count, CPUMilli: u.CPUMilli, Memory: u.Memory,
					Constraint: u.Constraint, Queue: u.Queue, GPUs: u.GPUs, Project: u.Project, Why: why,
				})
			}
		}
		return
	}
	// Each run's members go to the instances found, in order.
	i, done := 0, uint32(0)
	for _, t := range takes {
		s := t.s
		for m := t.n; m > 0; {
			run := &unit[i]
			k := min(m, int64(run.Count-done))
			p.take(s, k, run)
			if kept != nil {
				kept.took(p, run, k)
			}
			s.free -= k * run.CPUMilli
			s.mem -= k * run.Memory
			out.Placements = append(out.Placements, Placement{Batch: run.Batch, First: run.First + done, Count: uint32(k), Attempt: run.Attempt, Instance: s.id})
			out.Jobs += int(k)
			st.res.Placed += k * run.CPUMilli
			placed(k * run.CPUMilli)
			m -= k
			if done += uint32(k); done == run.Count {
				i, done = i+1, 0
			}
		}
	}
}
