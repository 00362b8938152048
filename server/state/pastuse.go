package state

import (
	"cmp"
	"slices"

	"github.com/drover-sched/drover/placement"
)

// pastKey is a user in a queue tree (Top: the tree's top queue's path),
// or, with User empty, a leaf queue of such a tree (Top: the leaf's path;
// user names are never empty).
type pastKey struct{ Top, User string }

// pastUse is a user's use in milli-core-seconds, decayed to At.
type pastUse struct {
	Use int64
	At  int64
}

// snapPast is one user's past use in a snapshot.
type snapPast struct {
	Top, User string
	Use, At   int64
}

// top returns the top queue above q (q itself at the top; nil for nil).
func (q *Queue) top() *Queue {
	for q != nil && q.parent != nil {
		q = q.parent
	}
	return q
}

// recordUse adds an ended attempt's use (cpuMilli from start to end) to
// its user's past use in its batch's queue tree, and to its leaf queue's,
// when the tree remembers use; each sum is decayed to now first.
func (s *placeBook) recordUse(b *Batch, cpuMilli, start, end, now int64) {
	leaf := s.resolveQueue(b)
	t := leaf.top()
	if t == nil || t.UsageHalfLifeNs == 0 || start == 0 || end <= start {
		return
	}
	use := placement.CoreSeconds(cpuMilli, end-start)
	for _, k := range []pastKey{{t.Path, b.User}, {leaf.Path, ""}} {
		p := s.pastUse[k]
		p.Use = placement.Decay(p.Use, now-p.At, t.UsageHalfLifeNs) + use
		p.At = now
		s.pastUse[k] = p
	}
}

// QueuePastCoreHours is a leaf queue's decayed past use at now, in
// core-hours (0 when its tree remembers none).
func (r Reader) QueuePastCoreHours(leaf *Queue, now int64) float64 {
	t := leaf.top()
	if t == nil || t.UsageHalfLifeNs == 0 {
		return 0
	}
	p := r.s.pastUse[pastKey{leaf.Path, ""}]
	return float64(placement.Decay(p.Use, now-p.At, t.UsageHalfLifeNs)) / 3.6e6
}

// QueuePastMilli is a leaf queue's decayed past use at now, as millicores
// (0 when its tree remembers none): what fair share between sibling
// queues adds to what the queue holds (scheduler.QueueNode.Past).
func (r Reader) QueuePastMilli(leaf *Queue, now int64) int64 {
	t := leaf.top()
	if t == nil || t.UsageHalfLifeNs == 0 {
		return 0
	}
	p, ok := r.s.pastUse[pastKey{leaf.Path, ""}]
	if !ok {
		return 0
	}
	return placement.UsageRate(placement.Decay(p.Use, now-p.At, t.UsageHalfLifeNs), t.UsageHalfLifeNs)
}

// PastMilli is user's decayed past use in the tree of leaf at now, as
// millicores (placement.UsageRate; 0 when the tree remembers none): what
// fair share adds to the cores the user runs.
func (r Reader) PastMilli(leaf *Queue, user string, now int64) int64 {
	t := leaf.top()
	if t == nil || t.UsageHalfLifeNs == 0 {
		return 0
	}
	p, ok := r.s.pastUse[pastKey{t.Path, user}]
	if !ok {
		return 0
	}
	return placement.UsageRate(placement.Decay(p.Use, now-p.At, t.UsageHalfLifeNs), t.UsageHalfLifeNs)
}

// PastCoreHours is user's decayed past use in the tree of leaf at now,
// in core-hours.
func (r Reader) PastCoreHours(leaf *Queue, user string, now int64) float64 {
	t := leaf.top()
	if t == nil || t.UsageHalfLifeNs == 0 {
		return 0
	}
	p := r.s.pastUse[pastKey{t.Path, user}]
	return float64(placement.Decay(p.Use, now-p.At, t.UsageHalfLifeNs)) / 3.6e6
}

// snapPastUse lists the past use in a stable order.
func (s *placeBook) snapPastUse() []snapPast {
	out := make([]snapPast, 0, len(s.pastUse))
	for k, p := range s.pastUse {
		out = append(out, snapPast{Top: k.Top, User: k.User, Use: p.Use, At: p.At})
	}
	slices.SortFunc(out, func(a, b snapPast) int { return cmp.Or(cmp.Compare(a.Top, b.Top), cmp.Compare(a.User, b.User)) })
	return out
}
