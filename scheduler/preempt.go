package scheduler

import (
	"fmt"
	"math/big"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/placement"
)

// Preemption takes capacity back for queues that wait, as Kueue reclaims
// nominal quota and Monarch (YARN's fair scheduler) preempts for fair
// share; drover keeps every queue's use in one state, so it does both
// across clusters and regions:
//
//   - Reclaim: a queue below its guarantee, with work waiting for longer
//     than its reclaim_grace, takes its guarantee back from queues that
//     borrowed beyond theirs (where the tree divides them), never below a
//     borrower's own guarantee.
//   - Fair share: a queue held below preempt_threshold of its fair share
//     for preempt_after takes the difference from preemptible queues
//     above their fair share (those it may preempt from), never below it,
//     and never an attempt younger than its queue's min_runtime.
//
// Victims go youngest and lowest priority first, and a round stops only
// what the waiting work can use: its Ready jobs' resources, less what is
// free now and what is already being given back (attempts told to stop,
// in their grace). Every resource counts as sharing counts it (Res:
// cores, memory, GPUs of each type): a queue is short where its
// guarantee of a resource its waiting work needs is not met, starved by
// its dominant share against its fair share's (QueueShares, weighted
// dominant resource fairness), and a victim is taken only when it frees
// a resource the claim still needs, judged in each such resource.

// Attempt is a running attempt a preemption may stop.
type Attempt struct {
	Batch    uint64
	Job      uint32
	Attempt  uint16
	Queue    int32 // 1 + index into PreemptInput.Queues of its leaf
	CPUMilli int64
	Memory   int64
	// GPU is the index, in every Res of the input, of the type of the
	// GPUs it holds (0: none); GPUs how many.
	GPU   int32
	GPUs  int64
	Start int64 // unix ns (0: not started yet: the youngest)
	// Priority of its batch.
	Priority int32
	// Stopping: told to stop already (in its grace): what it holds is as
	// good as given back.
	Stopping bool
	// Cluster is the index of the cluster it runs in (as PreemptQueue's
	// Clusters).
	Cluster int32
	// Instance is the worker it runs on (Holds name them).
	Instance uint32
}

// holds is what the attempt holds of resource k.
func (a *Attempt) holds(k int) int64 {
	switch {
	case k == 0:
		return a.CPUMilli
	case k == 1:
		return a.Memory
	case a.GPU >= 2 && k == int(a.GPU):
		return a.GPUs
	}
	return 0
}

// PreemptQueue is one queue of the tree as a preemption reads it, a
// parent before its children.
type PreemptQueue struct {
	Name   string
	Parent int32
	Weight int64
	// Guarantee of each resource (nil: none).
	Guarantee Res
	// Used is what its attempts (its subtree's) hold; Waiting what its
	// Ready jobs ask for (a leaf's own; an inner queue's are summed).
	Used, Waiting Res
	// ShortSince: since when it has had work waiting while below its
	// guarantee; StarvedSince: since when below its threshold of fair
	// share with work waiting (0: not so; the caller keeps them from the
	// outputs' Short and Starved).
	ShortSince, StarvedSince int64
	Preemptible              bool
	AfterNs                  int64
	ThresholdPermille        int64 // 0: the default, 500
	// AllowFrom are the queues (subtrees) it may preempt from (empty: any
	// preemptible queue).
	AllowFrom      []int32
	ReclaimGraceNs int64
	MinRuntimeNs   int64
	// Clusters marks the clusters its waiting jobs may run in (nil: any):
	// it takes back only what is held where its work can use it.
	Clusters []bool
	// PastMilli is a leaf's decayed past use as cores (its tree's
	// usage_half_life; 0: none): its fair share weighs it as the
	// scheduling round does (QueueNode.Past), so a queue that ran much
	// lately is starved later and gives back sooner.
	PastMilli int64
}

// PreemptInput is what a preemption decision reads.
type PreemptInput struct {
	Now int64
	// GPUTypes names the GPUs of Res[2:] in every Res of the input
	// (Res[0] is millicores, Res[1] bytes of memory); a shorter Res reads
	// as zero beyond its end.
	GPUTypes []string
	Queues   []PreemptQueue
	// Attempts running now, of jobs in queues.
	Attempts []Attempt
	// Capacity is the fleet where new work may go, Free what is free
	// there after the round's placements.
	Capacity, Free Res
	// Holds are the room the last scheduling round held for gangs first
	// in line (AddHolds).
	Holds []PreemptHold
}

// PreemptHold is room the scheduling round held for a gang first in line
// (Output.Holds): a claim of its queue frees room for the gang on the
// workers held for it (elsewhere only what their attempts may not give),
// where room anywhere would be taken by other jobs before the gang could
// start (and the claim made again, round after round). What is held and
// free is the gang's queue's alone: not spare for another's claim, its
// own against its guarantee and fair share; and no other queue's claim
// takes victims on a held worker.
type PreemptHold struct {
	Queue  int32 // index into Queues of the gang's leaf
	Demand Res   // what the whole gang asks for
	On     []PreemptHeldOn
}

// PreemptHeldOn is a worker held for a gang, what is still to be freed
// there for it (held less free now), and what of its free room is held
// for the gang: free for the gang's queue alone.
type PreemptHeldOn struct {
	Instance   uint32
	Need, Free Res
}

// AddHolds adds the holds of a scheduling round (Output.Holds) for the
// queues of in (by name; a gang in no queue claims nothing).
func (in *PreemptInput) AddHolds(holds []GangHold) {
	byName := make(map[string]int32, len(in.Queues))
	for i := range in.Queues {
		byName[in.Queues[i].Name] = int32(i)
	}
	gpu := -1
	for _, h := range holds {
		q, ok := byName[h.Queue]
		if !ok || h.Queue == "" {
			continue
		}
		if h.GPUs > 0 {
			if gpu = slices.Index(in.GPUTypes, h.GPUType); gpu < 0 {
				continue // GPUs of a type the fleet has none of
			}
		}
		ph := PreemptHold{Queue: q, Demand: in.res(nil)}
		ph.Demand[0], ph.Demand[1] = h.CPUMilli, h.Memory
		if h.GPUs > 0 {
			ph.Demand[2+gpu] = h.GPUs
		}
		for _, on := range h.On {
			held, free := in.res(nil), in.res(nil)
			held[0], held[1] = on.HeldMilli, on.HeldMem
			free[0], free[1] = on.FreeMilli, on.FreeMem
			if h.GPUs > 0 {
				held[2+gpu] = on.HeldGPUs
				free[2+gpu] = on.FreeGPUs
			}
			need, part := in.res(nil), in.res(nil)
			for k := range need {
				need[k] = held[k] - free[k]
			}
			cpu, mem, gpus := on.HeldNow()
			part[0], part[1] = cpu, mem
			if h.GPUs > 0 {
				part[2+gpu] = gpus
			}
			ph.On = append(ph.On, PreemptHeldOn{Instance: on.Instance, Need: need, Free: part})
		}
		in.Holds = append(in.Holds, ph)
	}
}

// Victim is an attempt to stop, and why.
type Victim struct {
	Attempt
	For    string // the queue it is stopped for
	Kind   string // "reclaim" or "fair_share"
	Reason string
}

// PreemptOutput is a preemption decision.
type PreemptOutput struct {
	Victims []Victim
	// FairShare is each queue's share of Capacity by its weight and
	// guarantee with every queue's demand (what it holds and waits for).
	FairShare []Res
	// Short and Starved mark the queues below their guarantee, and below
	// their threshold of fair share, with work waiting now.
	Short, Starved []bool
}

// Preempt decides which attempts to stop.
func Preempt(in *PreemptInput) *PreemptOutput {
	n, nr := len(in.Queues), 2+len(in.GPUTypes)
	out := &PreemptOutput{Short: make([]bool, n), Starved: make([]bool, n)}
	up := make([]int32, n)
	used := make([]Res, n)
	waiting := make([]Res, n)
	guarantee := make([]Res, n)
	for i := range in.Queues {
		q := &in.Queues[i]
		up[i] = -1
		if q.Parent >= 0 && int(q.Parent) < i {
			up[i] = q.Parent
		}
		used[i], guarantee[i], waiting[i] = in.res(q.Used), in.res(q.Guarantee), make(Res, nr)
	}
	capacity := in.res(in.Capacity)
	leaf := make([]bool, n)
	for i := range leaf {
		leaf[i] = true
	}
	for i := range up {
		if up[i] >= 0 {
			leaf[up[i]] = false
		}
	}
	for i := n - 1; i >= 0; i-- {
		if leaf[i] {
			copy(waiting[i], in.Queues[i].Waiting)
		}
		if up[i] >= 0 {
			addTo(waiting[up[i]], waiting[i], 1)
		}
	}
	// Fair shares of the whole fleet, by what each holds and waits for.
	nodes := make([]QueueNode, n)
	for i := range in.Queues {
		nodes[i] = QueueNode{Parent: up[i], Weight: in.Queues[i].Weight}
		if positive(guarantee[i]) {
			nodes[i].Guarantee = guarantee[i]
		}
		if leaf[i] {
			nodes[i].Used, nodes[i].Ready = make(Res, nr), addRes(used[i], waiting[i])
			if p := in.Queues[i].PastMilli; p > 0 {
				nodes[i].Past = make(Res, nr)
				nodes[i].Past[0] = p
			}
		}
	}
	out.FairShare = QueueShares(nodes, capacity)
	// What is already being given back, and what is free, serves the
	// waiting work first.
	spare := in.res(in.Free)
	for k := range spare {
		spare[k] = max(spare[k], 0)
	}
	for i := range in.Attempts {
		if a := &in.Attempts[i]; a.Stopping {
			for k := range nr {
				spare[k] += a.holds(k)
			}
			for q := a.Queue - 1; q >= 0 && int(q) < n; q = up[q] {
				for k := range nr {
					used[q][k] -= a.holds(k)
				}
			}
		}
	}
	share := func(r Res) *big.Rat { return dominantShare(r, capacity) }
	for i := range in.Queues {
		q := &in.Queues[i]
		if !leaf[i] || !positive(waiting[i]) {
			continue
		}
		for k := range nr {
			if guarantee[i][k] > 0 && waiting[i][k] > 0 && used[i][k] < guarantee[i][k] {
				out.Short[i] = true
			}
		}
		// used*1000 < threshold*fair, in dominant shares, exactly.
		if q.AfterNs > 0 {
			u, f := dominantOf(used[i], capacity), dominantOf(out.FairShare[i], capacity)
			u.num *= 1000
			f.num *= q.Threshold()
			out.Starved[i] = u.less(f)
		}
	}
	// Victims in order: lowest priority, then youngest, first. A round
	// takes a few of a fleet's attempts, so they come off a heap as they
	// are needed rather than all sorted (a sort of 50,000 attempts was
	// most of a decision's time).
	h := rankHeap(make([]rank, 0, len(in.Attempts)))
	for i := range in.Attempts {
		if a := &in.Attempts[i]; !a.Stopping && a.Queue > 0 && int(a.Queue) <= n {
			h = append(h, rankOf(a, in.Now, i))
		}
	}
	h.init()
	var order []int // popped so far, in order
	at := func(k int) (int, bool) {
		for k >= len(order) {
			if len(h) == 0 {
				return 0, false
			}
			order = append(order, h.pop().idx)
		}
		return order[k], true
	}
	taken := make([]bool, len(in.Attempts))
	// Held workers: their attempts in victim order, and what is still to
	// free on each for its gang (less what attempts told to stop there
	// give back).
	holdsOf := map[int][]int{} // claimant queue → its holds
	// own is, per queue, the spare room held for its gangs: free for its
	// claims alone, as the scheduling round keeps it for them.
	own := make([]Res, n)
	for q := range own {
		own[q] = make(Res, nr)
	}
	for _, h := range in.Holds {
		if h.Queue < 0 || int(h.Queue) >= n {
			continue
		}
		for _, on := range h.On {
			for k := range nr {
				if k < len(on.Free) {
					spare[k] -= on.Free[k]
					own[h.Queue][k] += on.Free[k]
				}
			}
		}
	}
	for k := range spare {
		spare[k] = max(spare[k], 0)
	}
	var onInst map[uint32][]int
	heldBy := map[uint32][]int{} // worker → the holds on it
	heldLeft := make([][]Res, len(in.Holds))
	if len(in.Holds) > 0 {
		onInst = map[uint32][]int{}
		type heldAt struct{ j, o int }
		held := map[uint32][]heldAt{}
		for j, h := range in.Holds {
			if h.Queue < 0 || int(h.Queue) >= n {
				continue
			}
			holdsOf[int(h.Queue)] = append(holdsOf[int(h.Queue)], j)
			heldLeft[j] = make([]Res, len(h.On))
			for o := range h.On {
				heldLeft[j][o] = in.res(h.On[o].Need)
				held[h.On[o].Instance] = append(held[h.On[o].Instance], heldAt{j, o})
				heldBy[h.On[o].Instance] = append(heldBy[h.On[o].Instance], j)
			}
		}
		var ranks []rank
		for i := range in.Attempts {
			a := &in.Attempts[i]
			at, ok := held[a.Instance]
			if !ok {
				continue
			}
			if a.Stopping {
				// What it gives back goes to the holds on its worker in
				// order, each what it still needs: room for their gangs,
				// their queues' alone.
				for _, h := range at {
					q := in.Holds[h.j].Queue
					for k := range nr {
						d := max(min(a.holds(k), heldLeft[h.j][h.o][k]), 0)
						heldLeft[h.j][h.o][k] -= d
						spare[k] -= d
						own[q][k] += d
					}
				}
			} else if a.Queue > 0 && int(a.Queue) <= n {
				ranks = append(ranks, rankOf(a, in.Now, i))
			}
		}
		slices.SortFunc(ranks, func(x, y rank) int {
			if x.before(&y) {
				return -1
			}
			if y.before(&x) {
				return 1
			}
			return 0
		})
		for _, r := range ranks {
			a := &in.Attempts[r.idx]
			onInst[a.Instance] = append(onInst[a.Instance], r.idx)
		}
	}
	within := func(i, root int32) bool {
		for ; i >= 0; i = up[i] {
			if i == root {
				return true
			}
		}
		return false
	}
	// divide returns the queue on v's side just below where the tree
	// divides v from s (v's top queue when they share none).
	divide := func(v, s int32) int32 {
		for q := v; q >= 0; q = up[q] {
			if up[q] < 0 || within(s, up[q]) {
				return q
			}
		}
		return v
	}
	// keeps reports whether queue q keeps at least floor of every
	// resource the claim needed when it began that a holds, once a is
	// taken: what the claim has already been given does not lower the
	// victims' floors.
	keeps := func(a *Attempt, need Res, q int32, floor Res) bool {
		for k := range nr {
			if h := a.holds(k); need[k] > 0 && h > 0 && used[q][k]-h < floor[k] {
				return false
			}
		}
		return true
	}
	// take stops attempts ok allows, in order, each freeing something
	// need still lacks, until need is met; it returns what they free.
	// What is held and free for a queue's gangs (attempts told to stop
	// on their workers included) counts as its own when a claim is
	// weighed against its guarantee or fair share: the gang starts in it,
	// and a claim stops at the guarantee, gang or not.
	heldFree := make([]Res, n)
	for q := range own {
		heldFree[q] = slices.Clone(own[q])
	}
	take := func(claim int, need Res, ok func(a *Attempt) bool, kind, why string) Res {
		freed := make(Res, nr)
		stop := func(k int) {
			a := &in.Attempts[k]
			taken[k] = true
			for q := a.Queue - 1; q >= 0; q = up[q] {
				for r := range nr {
					used[q][r] -= a.holds(r)
				}
			}
			for r := range nr {
				need[r] -= a.holds(r)
				freed[r] += a.holds(r)
			}
			out.Victims = append(out.Victims, Victim{Attempt: *a, For: in.Queues[claim].Name, Kind: kind, Reason: why})
		}
		// The claimant's gangs with room held first, on their held
		// workers only; what anywhere may free is the rest of the claim.
		var general Res
		if hs := holdsOf[claim]; len(hs) > 0 {
			general = slices.Clone(need)
			for _, j := range hs {
				addTo(general, in.Holds[j].Demand, -1)
				for o := range in.Holds[j].On {
					left := heldLeft[j][o]
					for _, k := range onInst[in.Holds[j].On[o].Instance] {
						if !positive(left) || !positive(need) {
							break
						}
						a := &in.Attempts[k]
						if taken[k] || !frees(a, left) || !frees(a, need) || !ok(a) {
							continue
						}
						stop(k)
						for r := range nr {
							left[r] -= a.holds(r)
						}
					}
					// What the held worker's attempts may not give (a
					// queue within its guarantee, too young) may come
					// from anywhere.
					for r := range nr {
						general[r] += max(left[r], 0)
					}
				}
			}
		}
		for pos := 0; positive(need) && (general == nil || positive(general)); pos++ {
			k, more := at(pos)
			if !more {
				break
			}
			a := &in.Attempts[k]
			if taken[k] || !frees(a, need) || (general != nil && !frees(a, general)) || !ok(a) {
				continue
			}
			if slices.ContainsFunc(heldBy[a.Instance], func(j int) bool { return int(in.Holds[j].Queue) != claim }) {
				// Held for another queue's gang: what it frees is not
				// the claimant's.
				continue
			}
			stop(k)
			if general != nil {
				for r := range nr {
					general[r] -= a.holds(r)
				}
			}
		}
		return freed
	}
	// credit counts what was freed for the claim of the resources it
	// needed as the claimant's, and as no longer wanted.
	credit := func(i int, want, need, freed Res) {
		for k := range nr {
			if need[k] > 0 {
				used[i][k] += freed[k]
				want[k] -= freed[k]
			}
		}
	}
	// Claimants: queues that may not be preempted first (tier 1), then
	// by how far below their fair share they are (dominant shares).
	claims := make([]int, 0, n)
	ratio := make([]*big.Rat, n)
	for i := range in.Queues {
		if out.Short[i] || out.Starved[i] {
			claims = append(claims, i)
			// used over fair share, in dominant shares, a fair share of
			// nothing read as the least of each resource.
			fair := slices.Clone(out.FairShare[i])
			for k := range fair {
				fair[k] = max(fair[k], 1)
			}
			ratio[i] = new(big.Rat)
			if f := share(fair); f.Sign() > 0 {
				// A fleet with nothing in it (an autoscaler's before
				// its first machine) has no shares: every claimant 0.
				ratio[i].Quo(share(used[i]), f)
			}
		}
	}
	slices.SortStableFunc(claims, func(x, y int) int {
		a, b := &in.Queues[x], &in.Queues[y]
		if a.Preemptible != b.Preemptible {
			if !a.Preemptible {
				return -1
			}
			return 1
		}
		return ratio[x].Cmp(ratio[y])
	})
	for _, i := range claims {
		q := &in.Queues[i]
		s := int32(i)
		// What it can use: its waiting work, less what is spare.
		want := slices.Clone(waiting[i])
		for k := range nr {
			use := max(min(want[k], own[i][k]), 0)
			own[i][k] -= use
			want[k] -= use
			use = max(min(want[k], spare[k]), 0)
			spare[k] -= use
			want[k] -= use
		}
		if !positive(want) {
			continue
		}
		if out.Short[i] && q.ShortSince > 0 && in.Now-q.ShortSince >= q.ReclaimGraceNs {
			need := make(Res, nr)
			for k := range nr {
				need[k] = max(min(want[k], guarantee[i][k]-used[i][k]-heldFree[i][k]), 0)
			}
			why := fmt.Sprintf("reclaimed for queue %s: below its guarantee of %s with work waiting for %s or more",
				q.Name, in.Amount(guarantee[i], func(k int) bool { return need[k] > 0 }), fmtNs(q.ReclaimGraceNs))
			needed := slices.Clone(need)
			freed := take(i, need, func(a *Attempt) bool {
				v := a.Queue - 1
				if within(v, s) || within(s, v) || !usable(q, a) {
					return false
				}
				d := divide(v, s)
				return keeps(a, needed, d, guarantee[d]) && keeps(a, needed, v, guarantee[v])
			}, "reclaim", why)
			credit(i, want, needed, freed)
		}
		if positive(want) && out.Starved[i] && q.StarvedSince > 0 && in.Now-q.StarvedSince >= q.AfterNs {
			fair := out.FairShare[i]
			need := make(Res, nr)
			for k := range nr {
				need[k] = max(min(want[k], fair[k]-used[i][k]-heldFree[i][k]), 0)
			}
			dom := dominant(fair, capacity)
			why := fmt.Sprintf("for queue %s: below %g of its fair share of %s for %s or more", q.Name,
				float64(q.Threshold())/1000, in.Amount(fair, func(k int) bool { return k == dom }), fmtNs(q.AfterNs))
			needed := slices.Clone(need)
			freed := take(i, need, func(a *Attempt) bool {
				v := a.Queue - 1
				vq := &in.Queues[v]
				if !vq.Preemptible || within(v, s) || within(s, v) || !usable(q, a) {
					return false
				}
				if len(q.AllowFrom) > 0 && !slices.ContainsFunc(q.AllowFrom, func(r int32) bool { return within(v, r) }) {
					return false
				}
				if a.Start > 0 && in.Now-a.Start < vq.MinRuntimeNs || a.Start == 0 && vq.MinRuntimeNs > 0 {
					return false
				}
				return keeps(a, needed, v, out.FairShare[v])
			}, "fair_share", why)
			credit(i, want, needed, freed)
		}
	}
	return out
}

// res is r at the input's length (a copy: nil and short read as zero).
func (in *PreemptInput) res(r Res) Res {
	out := make(Res, 2+len(in.GPUTypes))
	copy(out, r)
	return out
}

// Amount words the resources of r that keep selects (nil: those it has
// any of), as a person reads them: "4 cores, 16GiB memory, 2 a100 GPUs"
// ("nothing": none).
func (in *PreemptInput) Amount(r Res, keep func(k int) bool) string {
	var parts []string
	for k := range 2 + len(in.GPUTypes) {
		v := int64(0)
		if k < len(r) {
			v = r[k]
		}
		if (keep == nil && v == 0) || (keep != nil && !keep(k)) {
			continue
		}
		switch {
		case k == 0:
			parts = append(parts, fmt.Sprintf("%g cores", float64(v)/1000))
		case k == 1:
			parts = append(parts, units.FormatBytes(v)+" memory")
		case k-2 < len(in.GPUTypes):
			parts = append(parts, fmt.Sprintf("%d %s GPUs", v, in.GPUTypes[k-2]))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// Dominant is the resource in which r is the largest share of the
// capacity (0, cores, when r is none of it): a queue's fair share is
// worded in it.
func (in *PreemptInput) Dominant(r Res) int { return dominant(r, in.res(in.Capacity)) }

func dominant(r, capacity Res) int { return dominantOf(r, capacity).k }

// frac is a share of one resource, num/den: compared exactly in 128 bits
// (a product of an amount and a capacity, each below 2^63, with a factor
// of at most 1000 on the amount), so every leader decides alike and a
// cpu-only fleet's comparisons are the integer ones they were.
type frac struct {
	num, den int64
	k        int // the resource
}

// less reports whether a < b.
func (a frac) less(b frac) bool {
	if a.den <= 0 || b.den <= 0 {
		return a.num <= 0 && b.num > 0
	}
	ah, al := bits.Mul64(uint64(max(a.num, 0)), uint64(b.den))
	bh, bl := bits.Mul64(uint64(max(b.num, 0)), uint64(a.den))
	return ah < bh || ah == bh && al < bl
}

// dominantOf is r's largest share of any resource of the capacity (the
// first such resource on a tie; nothing: 0 of the cores).
func dominantOf(r, capacity Res) frac {
	most := frac{0, 1, 0}
	for k := range capacity {
		if k < len(r) && capacity[k] > 0 && r[k] > 0 {
			if s := (frac{r[k], capacity[k], k}); most.less(s) {
				most = s
			}
		}
	}
	return most
}

// dominantShare is dominantOf as a fraction, for the claimants' order.
func dominantShare(r, capacity Res) *big.Rat {
	d := dominantOf(r, capacity)
	return big.NewRat(d.num, d.den)
}

// positive reports whether r has more than zero of some resource.
func positive(r Res) bool {
	for _, v := range r {
		if v > 0 {
			return true
		}
	}
	return false
}

// addTo adds n times b to a.
func addTo(a, b Res, n int64) {
	for k := range min(len(a), len(b)) {
		a[k] += n * b[k]
	}
}

// frees reports whether stopping a gives back something need still
// lacks. GPUs are the scarce part of a claim that needs them: while any
// GPU is still needed, only an attempt that holds GPUs the claim lacks
// frees something for it (the cores and memory of a cpu-only attempt are
// on machines its GPU jobs cannot use).
func frees(a *Attempt, need Res) bool {
	gpus := false
	for k := 2; k < len(need); k++ {
		if need[k] > 0 {
			gpus = true
			if a.holds(k) > 0 {
				return true
			}
		}
	}
	if gpus {
		return false
	}
	for k := 0; k < min(2, len(need)); k++ {
		if need[k] > 0 && a.holds(k) > 0 {
			return true
		}
	}
	return false
}

func fmtNs(ns int64) string { return time.Duration(ns).String() }

// rank orders victims: lowest priority, then youngest (by the
// millisecond), then in the input's order (which the caller makes the
// same on every leader), packed in one key.
type rank struct {
	key uint64 // priority (offset to unsigned) above the attempt's age in ms
	idx int
}

func rankOf(a *Attempt, now int64, idx int) rank {
	age := uint64(0)
	if a.Start > 0 && now > a.Start {
		age = min(uint64(now-a.Start)/1e6, 1<<32-1)
	}
	return rank{uint64(uint32(a.Priority)^1<<31)<<32 | age, idx}
}

// rankHeap is a binary min-heap of ranks (by value: container/heap's
// interface boxed every pop).
type rankHeap []rank

func (a *rank) before(b *rank) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.idx < b.idx
}

func (h rankHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h rankHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].before(&h[l]) {
			m = r
		}
		if !h[m].before(&h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (h *rankHeap) pop() rank {
	old := *h
	top := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	h.down(0)
	return top
}

// usable reports whether the claimant's waiting work may run where the
// attempt runs.
func usable(q *PreemptQueue, a *Attempt) bool {
	return q.Clusters == nil || (a.Cluster >= 0 && int(a.Cluster) < len(q.Clusters) && q.Clusters[a.Cluster])
}

// Threshold is the queue's preempt_threshold in thousandths (0 reads as
// placement.DefaultPreemptThresholdPermille).
func (q *PreemptQueue) Threshold() int64 {
	if q.ThresholdPermille == 0 {
		return placement.DefaultPreemptThresholdPermille
	}
	return q.ThresholdPermille
}
