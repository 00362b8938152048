package state

import "sort"

// Dependencies are kept per range of parent IDs, not per edge: "merge depends
// on align" with align an array of a million jobs is one depRange with a
// counter, and a one-to-one chain of a million jobs is a million point
// ranges found by binary search. A job that ends decrements every range that
// contains it; a range that reaches zero decrements its children groups; a
// group with no pending ranges is released.

// indexRanges adds ranges[from:] to the batch's stabbing index.
func (b *Batch) indexRanges(from int) {
	addedSpan := false
	for i := from; i < len(b.ranges); i++ {
		r := b.ranges[i].r
		if r.Lo == r.Hi {
			b.points = append(b.points, pointRef{id: r.Lo, r: int32(i)})
		} else {
			b.spans = append(b.spans, int32(i))
			addedSpan = true
		}
	}
	sort.SliceStable(b.points, func(i, j int) bool { return b.points[i].id < b.points[j].id })
	if addedSpan {
		sort.SliceStable(b.spans, func(i, j int) bool { return b.ranges[b.spans[i]].r.Lo < b.ranges[b.spans[j]].r.Lo })
		b.spanMaxHi = b.spanMaxHi[:0]
		var max uint32
		for _, ri := range b.spans {
			if hi := b.ranges[ri].r.Hi; hi > max {
				max = hi
			}
			b.spanMaxHi = append(b.spanMaxHi, max)
		}
	}
}

// overlapping calls fn for every range that shares IDs with [lo, hi], with
// the number of shared IDs.
func (b *Batch) overlapping(lo, hi uint32, fn func(ri int32, n uint32)) {
	i := sort.Search(len(b.points), func(i int) bool { return b.points[i].id >= lo })
	for ; i < len(b.points) && b.points[i].id <= hi; i++ {
		fn(b.points[i].r, 1)
	}
	// Spans sorted by Lo: those with Lo <= hi are candidates; walk back while
	// the prefix maximum of Hi still reaches lo.
	j := sort.Search(len(b.spans), func(i int) bool { return b.ranges[b.spans[i]].r.Lo > hi })
	for j--; j >= 0 && b.spanMaxHi[j] >= lo; j-- {
		r := b.ranges[b.spans[j]].r
		if r.Hi < lo {
			continue
		}
		a, z := max(r.Lo, lo), min(r.Hi, hi)
		fn(b.spans[j], z-a+1)
	}
}

// finishSpan records that jobs lo..hi reached final states (all successful,
// or all not) and releases the groups that no longer wait for anything. It
// loops instead of recursing: cancelling a group finishes more jobs.
func (s *batchBook) finishSpan(b *Batch, lo, hi uint32, failed bool, now int64) {
	type span struct {
		lo, hi uint32
		failed bool
	}
	work := []span{{lo, hi, failed}}
	for len(work) > 0 {
		sp := work[len(work)-1]
		work = work[:len(work)-1]
		var released []*group
		b.overlapping(sp.lo, sp.hi, func(ri int32, n uint32) {
			dr := b.ranges[ri]
			dr.remaining -= n
			if sp.failed {
				dr.failed += n
			}
			if dr.remaining == 0 {
				for _, child := range dr.children {
					for _, g := range b.partsOf(child) {
						if g.pending == 0 {
							// Released before its parent ran again (a
							// retry): it waits for nothing.
							continue
						}
						g.pending--
						if g.pending == 0 {
							released = append(released, g)
						}
					}
				}
			}
		})
		if b.Cancelled {
			continue // every waiting job was cancelled with the batch
		}
		for _, g := range released {
			for _, r := range s.releaseGroup(b, g, now) {
				work = append(work, span{r.Lo, r.Hi, true})
			}
		}
	}
}

// releaseGroup moves the Pending jobs of a group whose parents are all
// done to Ready, or to Cancelled when a parent did not succeed and the
// group is not always_run; it returns the runs it cancelled. Its jobs are
// all Pending but after a retry that ran only some of them again.
func (s *batchBook) releaseGroup(b *Batch, g *group, now int64) []Range {
	var cancelled []Range
	last := g.first + g.count - 1
	for lo := g.first; lo <= last; lo++ {
		if b.jobs[lo-1].state != Pending {
			continue
		}
		hi := lo
		for hi < last && b.jobs[hi].state == Pending {
			hi++
		}
		if s.releaseRun(b, g, lo, hi, now) {
			cancelled = append(cancelled, Range{lo, hi})
		}
		lo = hi
	}
	return cancelled
}

// releaseRun is releaseGroup for jobs lo..hi of g, all Pending: it
// reports whether it cancelled them.
func (s *batchBook) releaseRun(b *Batch, g *group, lo, hi uint32, now int64) bool {
	parentFailed := false
	for _, ri := range b.parentsOf(g) {
		if b.ranges[ri].failed > 0 {
			parentFailed = true
			break
		}
	}
	// A job of a cancelled group is cancelled as it comes (committed
	// after its group's cancel).
	if parentFailed && !g.spec.AlwaysRun || b.cancelledFor(g.spec) {
		s.setStates(b, g.spec, lo, hi, Pending, Cancelled)
		if g.spec.gang() != nil {
			s.cancelGang(b, g, lo, now)
		}
		s.checkComplete(b, now)
		return true
	}
	s.setStates(b, g.spec, lo, hi, Pending, Ready)
	s.enqueue(b, Range{lo, hi}, g.spec.CPUMilli, false)
	return false
}
