package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"time"

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
// what the waiting work can use: its Ready cores, less the cores free now
// and those already being given back (attempts told to stop, in their
// grace). Decisions are in cores.

// Attempt is a running attempt a preemption may stop.
type Attempt struct {
	Batch    uint64
	Job      uint32
	Attempt  uint16
	Queue    int32 // 1 + index into PreemptInput.Queues of its leaf
	CPUMilli int64
	Start    int64 // unix ns (0: not started yet: the youngest)
	Priority int32
	// Stopping: told to stop already (in its grace): what it holds is as
	// good as given back.
	Stopping bool
	// Cluster is the index of the cluster it runs in (as PreemptQueue's
	// Clusters).
	Cluster int32
}

// PreemptQueue is one queue of the tree as a preemption reads it, a
// parent before its children.
type PreemptQueue struct {
	Name      string
	Parent    int32
	Weight    int64
	Guarantee int64 // cores (millicores)
	// Used is what its attempts (its subtree's) hold; Waiting what its
	// Ready jobs ask for (a leaf's own; an inner queue's are summed).
	Used, Waiting int64
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
}

// PreemptInput is what a preemption decision reads.
type PreemptInput struct {
	Now    int64
	Queues []PreemptQueue
	// Attempts running now, of jobs in queues.
	Attempts []Attempt
	// Capacity is the cores of the fleet where new work may go, Free
	// those free there after the round's placements.
	Capacity, Free int64
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
	FairShare []int64
	// Short and Starved mark the queues below their guarantee, and below
	// their threshold of fair share, with work waiting now.
	Short, Starved []bool
}

// Preempt decides which attempts to stop.
func Preempt(in *PreemptInput) *PreemptOutput {
	n := len(in.Queues)
	out := &PreemptOutput{Short: make([]bool, n), Starved: make([]bool, n)}
	up := make([]int32, n)
	used := make([]int64, n)
	waiting := make([]int64, n)
	for i := range in.Queues {
		q := &in.Queues[i]
		up[i] = -1
		if q.Parent >= 0 && int(q.Parent) < i {
			up[i] = q.Parent
		}
		used[i] = q.Used
	}
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
			waiting[i] = in.Queues[i].Waiting
		}
		if up[i] >= 0 {
			waiting[up[i]] += waiting[i]
		}
	}
	// Fair shares of the whole fleet, by what each holds and waits for.
	nodes := make([]QueueNode, n)
	for i := range in.Queues {
		q := &in.Queues[i]
		nodes[i] = QueueNode{Parent: up[i], Weight: q.Weight}
		if q.Guarantee > 0 {
			nodes[i].Guarantee = Res{q.Guarantee}
		}
		if leaf[i] {
			nodes[i].Used, nodes[i].Ready = Res{0}, Res{used[i] + waiting[i]}
		}
	}
	out.FairShare = cpuOf(QueueShares(nodes, Res{in.Capacity}))
	// What is already being given back, and what is free, serves the
	// waiting work first.
	var stopping int64
	for i := range in.Attempts {
		if a := &in.Attempts[i]; a.Stopping {
			stopping += a.CPUMilli
			for q := a.Queue - 1; q >= 0 && int(q) < n; q = up[q] {
				used[q] -= a.CPUMilli
			}
		}
	}
	spare := max(in.Free, 0) + stopping
	for i := range in.Queues {
		q := &in.Queues[i]
		if !leaf[i] || waiting[i] <= 0 {
			continue
		}
		out.Short[i] = used[i] < q.Guarantee
		out.Starved[i] = q.AfterNs > 0 && used[i]*1000 < q.Threshold()*out.FairShare[i]
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
	take := func(claim int, need int64, ok func(a *Attempt) bool, kind, why string) int64 {
		for pos := 0; need > 0; pos++ {
			k, more := at(pos)
			if !more {
				break
			}
			a := &in.Attempts[k]
			if taken[k] || !ok(a) {
				continue
			}
			taken[k] = true
			for q := a.Queue - 1; q >= 0; q = up[q] {
				used[q] -= a.CPUMilli
			}
			need -= a.CPUMilli
			out.Victims = append(out.Victims, Victim{Attempt: *a, For: in.Queues[claim].Name, Kind: kind, Reason: why})
		}
		return need
	}
	// Claimants: queues that may not be preempted first (tier 1), then
	// by how far below their fair share they are.
	claims := make([]int, 0, n)
	for i := range in.Queues {
		if out.Short[i] || out.Starved[i] {
			claims = append(claims, i)
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
		// used/fair, compared without division.
		return cmp.Compare(used[x]*max(out.FairShare[y], 1), used[y]*max(out.FairShare[x], 1))
	})
	for _, i := range claims {
		q := &in.Queues[i]
		s := int32(i)
		// What it can use: its waiting work, less what is spare.
		want := waiting[i]
		use := min(want, spare)
		spare -= use
		want -= use
		if want <= 0 {
			continue
		}
		if out.Short[i] && q.ShortSince > 0 && in.Now-q.ShortSince >= q.ReclaimGraceNs {
			need := min(want, q.Guarantee-used[i])
			left := take(i, need, func(a *Attempt) bool {
				v := a.Queue - 1
				if within(v, s) || within(s, v) || !usable(q, a) {
					return false
				}
				d := divide(v, s)
				g := in.Queues[d].Guarantee
				return used[d]-a.CPUMilli >= g && used[v]-a.CPUMilli >= in.Queues[v].Guarantee
			}, "reclaim", fmt.Sprintf("reclaimed for queue %s: below its guarantee of %g cores with work waiting for %s or more", q.Name, float64(q.Guarantee)/1000, fmtNs(q.ReclaimGraceNs)))
			want -= need - left
			used[i] += need - left
		}
		if want > 0 && out.Starved[i] && q.StarvedSince > 0 && in.Now-q.StarvedSince >= q.AfterNs {
			need := min(want, out.FairShare[i]-used[i])
			left := take(i, need, func(a *Attempt) bool {
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
				return used[v]-a.CPUMilli >= out.FairShare[v]
			}, "fair_share", fmt.Sprintf("for queue %s: below %g of its fair share of %g cores for %s or more", q.Name,
				float64(q.Threshold())/1000, float64(out.FairShare[i])/1000, fmtNs(q.AfterNs)))
			used[i] += need - left
		}
	}
	return out
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
