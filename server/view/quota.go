package view

import (
	"maps"

	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// quotas is a read model's own copy of the queues' quotas and use, to
// which what it lists is charged along each path (placement.PathCharge),
// so that a listing or a demand bounds itself by placement's queue rule
// (placement.PathRoom) with what it has taken so far counted as used.
type quotas struct {
	r  state.Reader
	of map[*state.Queue]*placement.Quota
	// taken is what was held since the last takeBack.
	taken []taken
}

type taken struct {
	leaf *state.Queue
	size placement.Size
	n    int64
}

func newQuotas(r state.Reader) *quotas {
	return &quotas{r: r, of: map[*state.Queue]*placement.Quota{}}
}

// quota is q's quota with its use, copied from the state once.
func (qs *quotas) quota(q *state.Queue) *placement.Quota {
	if c, ok := qs.of[q]; ok {
		return c
	}
	c := q.Queue.Quota()
	use := qs.r.Use(q)
	c.UsedMilli, c.UsedMemory, c.UsedJobs = use.UsedMilli, use.UsedMemory, use.UsedJobs
	c.UsedGPUs = maps.Clone(use.UsedGPUs) // charged below: not the state's
	qs.of[q] = &c
	return &c
}

// walk yields the quotas of leaf and every queue above it, leaf first.
// Callers wrap it in a literal passed straight to placement's rule, which
// keeps the closure off the heap.
func (qs *quotas) walk(leaf *state.Queue, yield func(*placement.Quota) bool) {
	for q := leaf; q != nil; q = qs.r.Parent(q) {
		if !yield(qs.quota(q)) {
			return
		}
	}
}

// room bounds n jobs of a size by the queue rule along leaf's path (leaf
// nil: no queue, no bound).
func (qs *quotas) room(leaf *state.Queue, sz placement.Size, n int64) int64 {
	if leaf == nil {
		return n
	}
	n, _, _ = placement.PathRoom(func(y func(*placement.Quota) bool) { qs.walk(leaf, y) }, sz, n)
	return n
}

// charge counts n jobs of a size as used along leaf's path.
func (qs *quotas) charge(leaf *state.Queue, sz placement.Size, n int64) {
	if leaf != nil && n != 0 {
		placement.PathCharge(func(y func(*placement.Quota) bool) { qs.walk(leaf, y) }, sz, n)
	}
}

// hold charges n jobs of a size until the next takeBack.
func (qs *quotas) hold(leaf *state.Queue, sz placement.Size, n int64) {
	if leaf != nil && n != 0 {
		qs.charge(leaf, sz, n)
		qs.taken = append(qs.taken, taken{leaf, sz, n})
	}
}

// takeBack undoes every hold since the last takeBack.
func (qs *quotas) takeBack() {
	for _, t := range qs.taken {
		qs.charge(t.leaf, t.size, -t.n)
	}
	qs.taken = qs.taken[:0]
}
