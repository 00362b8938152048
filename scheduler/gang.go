package scheduler

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/drover-sched/drover/placement"
)

// Gangs (all-or-nothing scheduling, as Armada's and Kueue's): the members
// of a gang start in the same round on workers of one cluster (one pool,
// or one value of a worker label, when the gang asks), or none of them
// does. The packer looks for room for all of them before it takes any:
// in each cluster the run may use, in the order its queue's strategy
// ranks them, it walks the instances from the smallest that fits one
// member up (best fit, as for any run) and packs on each as many members
// as it takes, of the largest size first (a job group's gang may hold
// members of several sizes), until the whole gang is placed.

// maxGangVisits bounds the instances one round looks at for gangs, so a
// round with thousands of gangs that fit nowhere stays bounded (a plain
// run's search is a tree lookup; a gang's walks a cluster). Gangs met
// after it wait for the next round.
const maxGangVisits = 1 << 18

// gangTake is members of a gang placed on one instance: n of its part
// part (gangPart).
type gangTake struct {
	s    slot
	n    int64
	part int
}

// gangPart is the members of a gang of one size (and constraint): a job
// group's gang may hold a launcher beside its ranks, a parameter server
// beside its workers.
type gangPart struct {
	r    *Run  // the first of its runs
	n    int64 // members
	runs []int // its runs' indexes in the gang's unit, in order
}

// gangParts splits a gang's runs by size, the largest first (by cores,
// then memory, then GPUs): packed in that order, the members that need
// the most room take it before smaller ones fill it.
func gangParts(unit []Run) []gangPart {
	var parts []gangPart
	for i := range unit {
		r := &unit[i]
		j := slices.IndexFunc(parts, func(pt gangPart) bool {
			return pt.r.CPUMilli == r.CPUMilli && pt.r.Memory == r.Memory && pt.r.GPUs == r.GPUs && pt.r.Constraint == r.Constraint
		})
		if j < 0 {
			parts = append(parts, gangPart{r: r})
			j = len(parts) - 1
		}
		parts[j].n += int64(r.Count)
		parts[j].runs = append(parts[j].runs, i)
	}
	slices.SortStableFunc(parts, func(a, b gangPart) int {
		if c := cmp.Compare(b.r.CPUMilli, a.r.CPUMilli); c != 0 {
			return c
		}
		if c := cmp.Compare(b.r.Memory, a.r.Memory); c != 0 {
			return c
		}
		return cmp.Compare(b.r.GPUs, a.r.GPUs)
	})
	return parts
}

// gangShape is one run as large as every member of a gang in each of
// cores, memory and GPUs (and of the constraint of its members with
// GPUs): room for n of it holds the gang however its members are packed. Holds, preemption and the autoscaler count a gang
// of several sizes so (more than it needs, never less).
func gangShape(unit []Run) Run {
	env := unit[0]
	for i := range unit[1:] {
		r := &unit[i+1]
		if r.GPUs > env.GPUs {
			env.Constraint = r.Constraint // the GPUs' type: a launcher without GPUs asks for none
		}
		env.CPUMilli, env.Memory, env.GPUs = max(env.CPUMilli, r.CPUMilli), max(env.Memory, r.Memory), max(env.GPUs, r.GPUs)
	}
	return env
}

// gangCores is the millicores of all a gang's members.
func gangCores(unit []Run) int64 {
	var c int64
	for i := range unit {
		c += int64(unit[i].Count) * unit[i].CPUMilli
	}
	return c
}

// partsKey names a gang of several parts for gangFailed ("" for one).
func partsKey(parts []gangPart) string {
	if len(parts) < 2 {
		return ""
	}
	var b strings.Builder
	for _, pt := range parts {
		fmt.Fprintf(&b, "%d/%d/%d/%d*%d;", pt.r.CPUMilli, pt.r.Memory, pt.r.GPUs, pt.r.Constraint, pt.n)
	}
	return b.String()
}

// gangFailure is a gang that fit nowhere this round: a gang at least as
// large, of members at least as large, under the same constraint and
// uniformity, fits nowhere either (free room only shrinks in a round). A
// gang of several parts is matched only by the same parts.
type gangFailure struct {
	constraint  int32
	uniform     string
	cpu, mem    int64
	gpus        int64
	n           int64
	parts       string
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

// gangQuota is how many of a gang's members its queues' limits admit,
// part after part, each charged as if placed while the next is counted;
// when not all, the limit that refused the rest and the index of its
// queue (ok false).
func (p *packer) gangQuota(parts []gangPart) (got int64, why placement.Reason, queue int32, ok bool) {
	leaf := p.leaf(parts[0].r)
	path := func(y func(*placement.Quota) bool) { p.walkUp(leaf, y) }
	ok = true
	done := 0
	for _, pt := range parts {
		m, _, _ := p.quotaRoom(pt.r, pt.n)
		got += m
		if m < pt.n {
			// Said while the parts before it are charged.
			var depth int
			why, depth = placement.PathRefuses(path, p.size(pt.r), pt.n)
			queue, ok = leaf, false
			for ; depth > 0; depth-- {
				queue = p.up[queue]
			}
			break
		}
		placement.PathCharge(path, p.size(pt.r), pt.n)
		done++
	}
	for _, pt := range parts[:done] {
		placement.PathCharge(path, p.size(pt.r), -pt.n)
	}
	return got, why, queue, ok
}

// packOn takes what it can of a gang's members left (by part) on one
// instance with free room cpu, mem and gpus, its parts in order (nil:
// the largest first); fits says whether a part may use the instance.
func packOn(s slot, parts []gangPart, order []int, left []int64, cpu, mem, gpus int64, fits func(pt *gangPart, cpu, mem, gpus int64) bool, takes []gangTake) []gangTake {
	for k := range parts {
		i := k
		if order != nil {
			i = order[k]
		}
		pt := &parts[i]
		if left[i] == 0 || (fits != nil && !fits(pt, cpu, mem, gpus)) {
			continue
		}
		m := min(membersIn(pt.r, cpu, mem, gpus), left[i])
		if m <= 0 {
			continue
		}
		takes = append(takes, gangTake{s, m, i})
		left[i] -= m
		cpu, mem, gpus = cpu-m*pt.r.CPUMilli, mem-m*pt.r.Memory, gpus-m*pt.r.GPUs
	}
	return takes
}

// packings are the orders packOn tries a gang's parts in: the largest
// first (nil), then, for a gang of several sizes, the smallest first,
// which fills small workers with small members and leaves the large ones
// whole. Neither is best for every gang (bin packing), and a third would
// cost a third walk.
func packings(parts []gangPart) [][]int {
	if len(parts) < 2 {
		return [][]int{nil}
	}
	rev := make([]int, len(parts))
	for i := range rev {
		rev[i] = len(parts) - 1 - i
	}
	return [][]int{nil, rev}
}

// partsLeft is each part's members, all still to place.
func partsLeft(parts []gangPart) []int64 {
	left := make([]int64, len(parts))
	for i, pt := range parts {
		left[i] = pt.n
	}
	return left
}

// fitGang finds room for all the members of a gang (its runs in unit,
// split into parts) at once, or says why there is none.
func (p *packer) fitGang(unit []Run, parts []gangPart) ([]gangTake, Explanation, bool) {
	r := &unit[0]
	n := members(unit)
	if r.Project > 0 && int(r.Project) <= len(p.spent) && p.spent[r.Project-1] {
		return nil, Explanation{Instances: len(p.insts), Quota: ReasonSpendLimit, Project: p.in.Projects[r.Project-1].Name}, false
	}
	quota, strategy := p.rankBy(r)
	if quota != nil {
		if got, why, i, ok := p.gangQuota(parts); !ok {
			// The limit that admits fewer than the gang, and whose.
			return nil, Explanation{Instances: len(p.insts), Quota: placementReason(why), Queue: p.queues[i].Name, Gang: n, GangRoom: got}, false
		}
	}
	key := partsKey(parts)
	for _, f := range p.gangFailed {
		if f.constraint != r.Constraint || f.uniform != r.GangUniform || f.leftToLarge || n < f.n || f.parts != key {
			continue
		}
		// A gang as large or larger, of members of the same size: the
		// same room. Of larger members: no more room (not said).
		same := key != "" || (r.CPUMilli == f.cpu && r.Memory == f.mem && r.GPUs == f.gpus)
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
	smallest := r.CPUMilli
	for _, pt := range parts {
		smallest = min(smallest, pt.r.CPUMilli)
	}
	// fits says whether members of part pt may use an instance (its
	// own filters, as a run's), in the packing of order.
	var idx int32
	var order []int
	fits := func(pt *gangPart, cpu, mem, gpus int64) bool {
		if mem < pt.r.Memory || !p.constraint(pt.r).HoldsGPUs(pt.r.GPUs, p.insts[idx].GPUType, gpus) {
			return false
		}
		// An idle worker is left to larger jobs in the first packing,
		// not in the second: the larger jobs may be the gang's own.
		if order == nil && p.leftForLarger(pt.r, idx, cpu) {
			leftToLarge = true
			return false
		}
		if len(p.filters) > 0 {
			c := p.candidate(idx, cpu, mem)
			if rejects(p.filters, &c, pt.r) != 0 {
				return false
			}
		}
		return true
	}
	// room walks the instances of trees ts that pass the gang's
	// filters, smallest first, calling add with each; add says when to
	// stop.
	room := func(ts []int, add func(s slot) bool) {
		for _, t := range ts {
			if !k.AllowsPool(p.trees[t].pool) {
				continue
			}
			stop := false
			p.trees[t].tree.AscendGreaterOrEqual(slot{free: smallest}, func(s slot) bool {
				p.gangVisits++
				if !k.AllowsLabels(p.insts[s.idx].Labels) || !k.AllowsSpot(p.insts[s.idx].Spot) {
					return true
				}
				stop = add(s)
				return !stop
			})
			if stop {
				return
			}
		}
	}
	// pack places what it can of left on s, and says whether all the
	// gang is placed.
	pack := func(s slot, left []int64, takes *[]gangTake) bool {
		idx = s.idx
		*takes = packOn(s, parts, order, left, s.free, s.mem, p.freeGPU[s.idx], fits, *takes)
		return !slices.ContainsFunc(left, func(m int64) bool { return m > 0 })
	}
	placedOf := func(left []int64) int64 {
		got := n
		for _, m := range left {
			got -= m
		}
		return got
	}
	// search walks the clusters in order for room for the whole gang.
	search := func(clusters []int) ([]gangTake, bool) {
		for _, c := range clusters {
			for _, ts := range p.gangSets(r, c) {
				if !byLabel {
					var takes []gangTake
					left := partsLeft(parts)
					done := false
					room(ts, func(s slot) bool {
						done = pack(s, left, &takes)
						return done
					})
					if done {
						return takes, true
					}
					most = max(most, placedOf(left))
					continue
				}
				// One value of the label: members counted per value, in
				// the order values are met.
				takes := map[string][]gangTake{}
				lefts := map[string][]int64{}
				var done string
				found := false
				room(ts, func(s slot) bool {
					v, ok := p.insts[s.idx].Labels[label]
					if !ok {
						return false
					}
					left := lefts[v]
					if left == nil {
						left = partsLeft(parts)
						lefts[v] = left
					}
					t := takes[v]
					all := pack(s, left, &t)
					takes[v] = t
					if all {
						done, found = v, true
					}
					return all
				})
				if found {
					return takes[done], true
				}
				for _, left := range lefts {
					most = max(most, placedOf(left))
				}
			}
		}
		return nil, false
	}
	clusters := p.ranker.Order(strategy, allowed, quota, nil)
	for _, order = range packings(parts) {
		if order != nil && p.gangVisits >= maxGangVisits {
			break
		}
		if takes, ok := search(clusters); ok {
			return takes, Explanation{}, true
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
	p.gangFailed = append(p.gangFailed, gangFailure{constraint: r.Constraint, uniform: r.GangUniform, cpu: r.CPUMilli, mem: r.Memory, gpus: r.GPUs, n: n, parts: key, why: why, leftToLarge: leftToLarge})
	return nil, why, false
}

// gangSets are the sets of pool trees of cluster c a gang of run r may
// span: the cluster's, or each pool's alone (gang_uniformity "pool").
func (p *packer) gangSets(r *Run, c int) [][]int {
	if r.GangUniform != "pool" {
		return [][]int{p.byClust[c]}
	}
	sets := make([][]int, len(p.byClust[c]))
	for i, t := range p.byClust[c] {
		sets[i] = []int{t}
	}
	return sets
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
	parts := gangParts(unit)
	// The room held for it is its own now (and held again if it still
	// cannot start).
	h := p.holds[gangKey{r.Batch, r.Gang}]
	if h != nil && h.held {
		p.hold(h, -1)
	}
	takes, why, ok := []gangTake(nil), Explanation{}, out.Jobs+int(n) <= limit
	if ok {
		takes, why, ok = p.fitGang(unit, parts)
		if !ok && h != nil && why.Quota == ReasonGang {
			// The workers held for it, which fitGang may pass over (an
			// idle one left to larger jobs); not past a limit that
			// refused it (its queue's quota, its project's spend).
			if held, _ := p.heldTakes(h, parts); held != nil {
				takes, why, ok = held, Explanation{}, true
			}
		}
	}
	keptBack := false
	if ok && kept != nil {
		// What is left is kept for idle guarantees: the gang's cores
		// as one run's.
		all := *r
		all.CPUMilli = gangCores(unit)
		if kept.room(p, &all, 1) < 1 {
			ok, why, keptBack = false, Explanation{Instances: len(p.insts), Quota: ReasonGang, Gang: n, GangRoom: -1}, true
		}
	}
	if !ok && h != nil && why.Quota == ReasonGang && !keptBack {
		// Held again only while room is what it waits for: a gang a
		// guarantee kept back, or a limit refuses, holds nothing.
		p.hold(h, 1)
		_, room := p.heldTakes(h, parts)
		why.Held, why.HeldRoom = len(h.on), room
	}
	if !ok {
		*st.unfit += gangCores(unit)
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
	// Each part's members go to the instances found for it, its runs in
	// order.
	type cursor struct {
		run  int
		done uint32
	}
	at := make([]cursor, len(parts))
	for _, t := range takes {
		pt, c := &parts[t.part], &at[t.part]
		for m := t.n; m > 0; {
			run := &unit[pt.runs[c.run]]
			k := min(m, int64(run.Count-c.done))
			s := p.slots[t.s.idx]
			p.take(s, k, run)
			if kept != nil {
				kept.took(p, run, k)
			}
			out.Placements = append(out.Placements, Placement{Batch: run.Batch, First: run.First + c.done, Count: uint32(k), Attempt: run.Attempt, Instance: s.id})
			out.Jobs += int(k)
			st.res.Placed += k * run.CPUMilli
			placed(k * run.CPUMilli)
			m -= k
			if c.done += uint32(k); c.done == run.Count {
				c.run, c.done = c.run+1, 0
			}
		}
	}
}

// Holds, as Slurm's backfill reserves room for the jobs first in line: a
// gang that does not fit now would wait for ever beside a stream of small
// jobs, each taking the room the last one left. So a round holds room for
// the gangs first in line (the first gang of each user with one, in the
// order the round serves users: priority, then fair-share standing; up
// to maxGangHolds of them, of maxGangHoldTries tried), each as the
// round's walk reaches it, on workers of one cluster (pool, label value) that hold the whole
// gang once their jobs end, those with the most room for it free first.
// Users served before the gang's (fair share puts them first) place
// before the hold is made; after it, no other run may take a held
// worker's room below what is held there (backfill by room: drover knows
// no job's end), so what the worker's jobs free as they end stays for the
// gang, which starts once its workers have room for all its members. Each
// round holds again from the state as it is: the workers held last round
// have kept what freed up, so they are the ones held again. A gang its
// queue's quota, its project's spend limit or the idle guarantee another
// queue keeps refuses holds nothing: room would not start it.
var maxGangHolds = 8

// maxGangHoldTries bounds the gangs a round tries to hold room for (each
// try walks a cluster's workers): gangs no room would start (larger than
// any cluster, refused by their queue's quota) do not use up the holds.
const maxGangHoldTries = 4 * 8

// gangKey names a gang in a round.
type gangKey struct {
	batch uint64
	gang  uint32
}

// heldRoom is what is held on one instance.
type heldRoom struct{ cpu, mem, gpus int64 }

// GangHold is room held for a gang that still waits as a round ends.
type GangHold struct {
	Batch uint64
	Gang  uint32
	// Queue is its leaf queue's name ("": in none).
	Queue string
	// Members of the gang, and what all of them ask for together: cores,
	// memory and GPUs of GPUType.
	Members                int64
	CPUMilli, Memory, GPUs int64
	GPUType                string
	On                     []HeldOn
}

// HeldOn is a worker where room is held for a gang: the room held there
// for its members (Held*), and what the worker has free now (the held
// room included) less what holds before it in Output.Holds count of it (a
// worker's free room counts once).
type HeldOn struct {
	Instance                     uint32
	HeldMilli, HeldMem, HeldGPUs int64
	FreeMilli, FreeMem, FreeGPUs int64
}

// HeldNow is the part of the room held for a gang on a worker (on) that
// is free now: what no other job may take there (the preemption round
// frees the rest; the autoscaler does not count it as free).
func (on HeldOn) HeldNow() (cpu, mem, gpus int64) {
	return max(min(on.HeldMilli, on.FreeMilli), 0), max(min(on.HeldMem, on.FreeMem), 0), max(min(on.HeldGPUs, on.FreeGPUs), 0)
}

// heldAtEnd lists the holds still on, by batch and gang.
func (p *packer) heldAtEnd() []GangHold {
	keys := slices.SortedFunc(maps.Keys(p.holds), func(a, b gangKey) int {
		if a.batch != b.batch {
			return cmp.Compare(a.batch, b.batch)
		}
		return cmp.Compare(a.gang, b.gang)
	})
	counted := map[int32]heldRoom{} // of each worker's free room, what holds before took
	var out []GangHold
	for _, key := range keys {
		h := p.holds[key]
		if !h.held {
			continue
		}
		r := h.run
		g := GangHold{Batch: key.batch, Gang: key.gang, Members: h.members, GPUType: p.gpuType(&r)}
		for _, pt := range h.parts {
			g.CPUMilli += pt.n * pt.cpu
			g.Memory += pt.n * pt.mem
			g.GPUs += pt.n * pt.gpus
		}
		if q := p.queue(&r); q != nil {
			g.Queue = q.Name
		}
		for _, w := range h.on {
			idx, room := w.idx, w.room
			s, held, c := p.slots[idx], p.held[idx], counted[idx]
			free := heldRoom{max(s.free+held.cpu-c.cpu, 0), max(s.mem+held.mem-c.mem, 0), max(p.freeGPU[idx]+held.gpus-c.gpus, 0)}
			g.On = append(g.On, HeldOn{Instance: p.insts[idx].ID, HeldMilli: room.cpu, HeldMem: room.mem, HeldGPUs: room.gpus,
				FreeMilli: free.cpu, FreeMem: free.mem, FreeGPUs: free.gpus})
			counted[idx] = heldRoom{c.cpu + min(free.cpu, room.cpu), c.mem + min(free.mem, room.mem), c.gpus + min(free.gpus, room.gpus)}
		}
		out = append(out, g)
	}
	return out
}

// gangHold is the room held for one gang: on each instance, what its
// members packed there take.
type gangHold struct {
	on    []heldWorker
	held  bool // held now
	run   Run  // the gang's shape (gangShape): its queue, its GPUs' type
	parts []partSize
	// members of the gang
	members int64
}

// heldWorker is the room held for a gang on one instance.
type heldWorker struct {
	idx  int32
	room heldRoom
}

// partSize is the size of a gang's part, and its members.
type partSize struct{ cpu, mem, gpus, n int64 }

// membersIn is how many jobs of run r fit in cpu, mem and gpus (a job
// of no cores needs none: a gang's member of no cores fits beside
// members that took every core).
func membersIn(r *Run, cpu, mem, gpus int64) int64 {
	m := int64(math.MaxInt64)
	if r.CPUMilli > 0 {
		m = max(cpu, 0) / r.CPUMilli
	}
	if r.Memory > 0 {
		m = min(m, max(mem, 0)/r.Memory)
	}
	if r.GPUs > 0 {
		m = min(m, max(gpus, 0)/r.GPUs)
	}
	return m
}

// holdForGangs marks the gangs first in line: the first gang of each user
// with one, in order (the users in the order the round serves them; a
// user's work at several priorities is one user), up to maxGangHoldTries.
// Room is held for the first maxGangHolds of them that room would start,
// each when the round's walk reaches it (reachGang).
func (p *packer) holdForGangs(order []int) {
	var seen map[string]bool
	for _, ui := range order {
		if len(p.holdable) >= maxGangHoldTries {
			return
		}
		u := &p.in.Users[ui]
		if seen[u.Name] {
			continue
		}
		i := slices.IndexFunc(u.Runs, func(r Run) bool { return r.Gang != 0 })
		if i < 0 {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[u.Name] = true
		if p.holdable == nil {
			p.holdable = map[gangKey]bool{}
			p.byTree = make([][]int32, len(p.trees))
			for idx := range p.insts {
				p.byTree[p.instTree[idx]] = append(p.byTree[p.instTree[idx]], int32(idx))
			}
			p.held = make([]heldRoom, len(p.insts))
			p.holds = map[gangKey]*gangHold{}
		}
		p.holdable[gangKey{u.Runs[i].Batch, u.Runs[i].Gang}] = true
	}
}

// reachGang holds room for the gang of unit, when it is first in line,
// as the round's walk first reaches it: the users fair share serves
// before its user have placed, and those after it (and every later pass)
// keep off the room held.
func (p *packer) reachGang(unit []Run) {
	key := gangKey{unit[0].Batch, unit[0].Gang}
	if !p.holdable[key] {
		return
	}
	delete(p.holdable, key)
	if len(p.holds) >= maxGangHolds {
		return
	}
	parts := gangParts(unit)
	if h := p.chooseHold(unit, parts, p.byTree); h != nil {
		h.run, h.members = gangShape(unit), members(unit)
		for _, pt := range parts {
			h.parts = append(h.parts, partSize{pt.r.CPUMilli, pt.r.Memory, pt.r.GPUs, pt.n})
		}
		p.holds[key] = h
		p.hold(h, 1)
	}
}

// chooseHold picks the workers to hold for a gang (its runs in unit, in
// parts; nil: none would start it).
func (p *packer) chooseHold(unit []Run, parts []gangPart, byTree [][]int32) *gangHold {
	r := &unit[0]
	if p.gangVisits >= maxGangVisits {
		return nil // the round's search for gangs is spent
	}
	if r.Project > 0 && int(r.Project) <= len(p.spent) && p.spent[r.Project-1] {
		return nil
	}
	if p.queue(r) != nil {
		if _, _, _, ok := p.gangQuota(parts); !ok {
			return nil
		}
		// Nor while the idle guarantees other queues keep leave the
		// fleet too little for it.
		var total int64
		for i := range p.insts {
			total += p.insts[i].CPUMilli
		}
		if total-p.keptFrom(r) < gangCores(unit) {
			return nil
		}
	}
	// A gang of the same members, as many or more, under the same
	// constraint and uniformity, found no room to hold this round: nor
	// does this one (what may be held only shrinks). A gang of several
	// sizes: the same parts.
	n := members(unit)
	key := holdKey{r.Constraint, r.GangUniform, r.CPUMilli, r.Memory, r.GPUs, partsKey(parts)}
	if m, ok := p.holdFailed[key]; ok && n >= m {
		return nil
	}
	h := p.pickHold(r, parts, byTree)
	if h == nil {
		if p.holdFailed == nil {
			p.holdFailed = map[holdKey]int64{}
		}
		if m, ok := p.holdFailed[key]; !ok || n < m {
			p.holdFailed[key] = n
		}
	}
	return h
}

// holdKey is a gang's shape, for the gangs no room could be held for.
type holdKey struct {
	constraint     int32
	uniform        string
	cpu, mem, gpus int64
	parts          string // partsKey
}

// pickHold is chooseHold's search: in each set of workers that may hold
// the gang together, those with the most room free now first, it packs
// the gang's parts into what each worker has once the jobs there end (less
// what other gangs hold), as fitGang packs into free room; of the sets
// that hold it, the one whose workers have the most of its cores free now.
func (p *packer) pickHold(r *Run, parts []gangPart, byTree [][]int32) *gangHold {
	quota, strategy := p.rankBy(r)
	k := p.constraint(r)
	label := strings.TrimPrefix(r.GangUniform, "label:")
	byLabel := label != r.GangUniform
	var need, smallest int64 // the gang's cores, its smallest member's
	smallest = math.MaxInt64
	for _, pt := range parts {
		need += pt.n * pt.r.CPUMilli
		smallest = min(smallest, pt.r.CPUMilli)
	}
	type cand struct {
		idx       int32
		free, cap int64  // cores free now, and once the jobs there end
		value     string // of the gang's label
	}
	var idx int32
	fits := func(pt *gangPart, cpu, mem, gpus int64) bool {
		inst := &p.insts[idx]
		if !p.constraint(pt.r).HoldsGPUs(pt.r.GPUs, inst.GPUType, gpus) {
			return false
		}
		if len(p.filters) > 0 {
			c := p.candidate(idx, p.slots[idx].free, p.slots[idx].mem)
			if rejects(p.filters, &c, pt.r) != 0 {
				return false
			}
		}
		return true
	}
	var best *gangHold
	bestReady := int64(-1)
	// consider picks from one set of workers that may hold the gang
	// together: the most room now first.
	consider := func(cs []cand) {
		var all int64
		for _, c := range cs {
			all += c.cap
		}
		if all < need {
			return // too few cores for it (sorted for nothing)
		}
		slices.SortFunc(cs, func(a, b cand) int {
			if a.free != b.free {
				return cmp.Compare(b.free, a.free)
			}
			if a.cap != b.cap {
				return cmp.Compare(b.cap, a.cap)
			}
			return cmp.Compare(p.insts[a.idx].ID, p.insts[b.idx].ID)
		})
		for _, order := range packings(parts) {
			left := partsLeft(parts)
			var on []heldWorker
			var ready int64
			done := false
			for _, c := range cs {
				idx = c.idx
				inst, h := &p.insts[c.idx], p.held[c.idx]
				takes := packOn(slot{idx: c.idx}, parts, order, left, inst.CPUMilli-h.cpu, inst.Memory-h.mem, inst.GPUs-h.gpus, fits, nil)
				if len(takes) == 0 {
					continue
				}
				var room heldRoom
				for _, t := range takes {
					pt := parts[t.part].r
					room.cpu += t.n * pt.CPUMilli
					room.mem += t.n * pt.Memory
					room.gpus += t.n * pt.GPUs
				}
				on = append(on, heldWorker{c.idx, room})
				ready += min(c.free, room.cpu)
				if done = !slices.ContainsFunc(left, func(m int64) bool { return m > 0 }); done {
					break
				}
			}
			if done {
				if ready > bestReady {
					best, bestReady = &gangHold{on: on}, ready
				}
				return
			}
		}
	}
	for _, c := range p.ranker.Order(strategy, p.allowedFor(r), quota, nil) {
		for _, ts := range p.gangSets(r, c) {
			var cs []cand
			var byValue map[string]int64 // cores' room per label value
			if byLabel {
				byValue = map[string]int64{}
			}
			for _, t := range ts {
				if !k.AllowsPool(p.trees[t].pool) {
					continue
				}
				p.gangVisits += len(byTree[t]) // the round's bound on gang searches
				for _, idx := range byTree[t] {
					inst, h, s := &p.insts[idx], p.held[idx], p.slots[idx]
					if !k.AllowsLabels(inst.Labels) || !k.AllowsSpot(inst.Spot) {
						continue
					}
					cd := cand{idx, max(s.free, 0), inst.CPUMilli - h.cpu, ""}
					if cd.cap < smallest || cd.cap <= 0 {
						continue
					}
					if byLabel {
						v, ok := inst.Labels[label]
						if !ok {
							continue
						}
						cd.value = v
						byValue[v] += cd.cap
					}
					cs = append(cs, cd)
				}
			}
			if !byLabel {
				consider(cs)
				continue
			}
			// Each value that could hold the gang, in value order (one
			// slice, no list per value: a value per worker is allowed).
			cs = slices.DeleteFunc(cs, func(c cand) bool { return byValue[c.value] < need })
			slices.SortStableFunc(cs, func(a, b cand) int { return strings.Compare(a.value, b.value) })
			for i := 0; i < len(cs); {
				j := i + 1
				for j < len(cs) && cs[j].value == cs[i].value {
					j++
				}
				consider(cs[i:j])
				i = j
			}
		}
	}
	return best
}

// hold holds the room of h (sign 1), or gives it back (-1).
func (p *packer) hold(h *gangHold, sign int64) {
	h.held = sign > 0
	for _, w := range h.on {
		idx := w.idx
		cpu, mem, gpus := sign*w.room.cpu, sign*w.room.mem, sign*w.room.gpus
		p.held[idx].cpu += cpu
		p.held[idx].mem += mem
		p.held[idx].gpus += gpus
		p.freeGPU[idx] -= gpus
		s := p.slots[idx]
		tr := p.trees[p.instTree[idx]].tree
		if s.free > 0 && s.mem > 0 {
			tr.Delete(s)
		}
		if p.kept != nil {
			// What the filling pass counts as free (keeps) follows.
			p.kept.free += max(s.free-cpu, 0) - max(s.free, 0)
		}
		s.free -= cpu
		s.mem -= mem
		if s.free > 0 && s.mem > 0 {
			tr.ReplaceOrInsert(s)
		}
		p.slots[idx] = s
	}
	p.cands = nil
}

// heldTakes places the members of a gang (its parts) on the workers held
// for it (its hold given back first), or says how many they have room
// for: each part on workers whose GPUs are its type, packed the largest
// first, or else the smallest first, as fitGang packs.
func (p *packer) heldTakes(h *gangHold, parts []gangPart) ([]gangTake, int64) {
	var idx int32
	fits := func(pt *gangPart, cpu, mem, gpus int64) bool {
		return p.constraint(pt.r).HoldsGPUs(pt.r.GPUs, p.insts[idx].GPUType, gpus)
	}
	var n, most int64
	for _, pt := range parts {
		n += pt.n
	}
	for _, order := range packings(parts) {
		var takes []gangTake
		left := partsLeft(parts)
		for _, w := range h.on {
			idx = w.idx
			s, gpus := p.slots[idx], p.freeGPU[idx]
			if h.held {
				// Counted with its own hold (what it may start in), for why.
				s.free, s.mem, gpus = s.free+w.room.cpu, s.mem+w.room.mem, gpus+w.room.gpus
			}
			takes = packOn(s, parts, order, left, s.free, s.mem, gpus, fits, takes)
		}
		got := n
		for _, m := range left {
			got -= m
		}
		if got == n {
			return takes, got
		}
		most = max(most, got)
	}
	return nil, most
}
