package state

import (
	"cmp"
	"slices"
)

// stagedBunch is a bunch of an open update in the form its commit reads:
// absolute job IDs in ascending order, each entry's parents (inside the
// update and before it) merged into one sorted list, kept in the bunch's
// parents. An entry takes 24 bytes here where a JobEntry takes 64, and the
// commit reads the bunches as they are: a million distinct jobs staged as
// JobEntries held 64 MB until their commit was published, and the commit
// made a 40 MB copy of them besides, at the leader's memory peak.
type stagedBunch struct {
	entries []stagedEntry
	parents []Range
}

// stagedEntry is a staged job or job array; its parents are the bunch's
// parents[pLo:pHi].
type stagedEntry struct {
	first, count uint32
	pLo, pHi     uint32
	spec         *Spec
}

// newStagedBunch converts entries, checked by update.stage, of an update
// whose jobs start at start.
func newStagedBunch(entries []JobEntry, start uint32) stagedBunch {
	off := start - 1
	sb := stagedBunch{entries: make([]stagedEntry, len(entries))}
	n := 0
	for i := range entries {
		n += len(entries[i].Parents) + len(entries[i].BatchParents)
	}
	if n > 0 {
		sb.parents = make([]Range, 0, n)
	}
	sorted := true
	for i := range entries {
		e := &entries[i]
		lo := uint32(len(sb.parents))
		if len(e.Parents)+len(e.BatchParents) > 0 {
			for _, p := range e.Parents {
				sb.parents = append(sb.parents, Range{p.Lo + off, p.Hi + off})
			}
			sb.parents = append(sb.parents, e.BatchParents...)
			merged := normalizeRanges(sb.parents[lo:]) // in place
			sb.parents = sb.parents[:int(lo)+len(merged)]
		}
		sb.entries[i] = stagedEntry{first: e.First + off, count: e.Count, pLo: lo, pHi: uint32(len(sb.parents)), spec: e.Spec}
		if i > 0 && sb.entries[i-1].first > sb.entries[i].first {
			sorted = false
		}
	}
	if !sorted {
		slices.SortFunc(sb.entries, func(a, b stagedEntry) int { return cmp.Compare(a.first, b.first) })
	}
	return sb
}

// parentsOf returns e's parents (read-only).
func (sb *stagedBunch) parentsOf(e *stagedEntry) []Range { return sb.parents[e.pLo:e.pHi:e.pHi] }

// last is the bunch's highest job ID.
func (sb *stagedBunch) last() uint32 {
	e := sb.entries[len(sb.entries)-1]
	return e.first + e.count - 1
}

// jobEntries returns the bunch as JobEntries of an update whose jobs
// start at start (what snapshots hold): IDs relative to the update, the
// parents inside it apart from those before it.
func (sb *stagedBunch) jobEntries(start uint32) []JobEntry {
	off := start - 1
	out := make([]JobEntry, len(sb.entries))
	for i := range sb.entries {
		e := &sb.entries[i]
		je := JobEntry{First: e.first - off, Count: e.count, Spec: e.spec}
		for _, p := range sb.parentsOf(e) {
			if p.Lo < start {
				je.BatchParents = append(je.BatchParents, Range{p.Lo, min(p.Hi, start-1)})
			}
			if p.Hi >= start {
				je.Parents = append(je.Parents, Range{max(p.Lo, start) - off, p.Hi - off})
			}
		}
		out[i] = je
	}
	return out
}

// commitOrder returns an update's staged bunches in the order of their
// job IDs, as its commit walks them, without changing bunches (a reader
// may be writing them into a snapshot). Bunches posted in order, or
// concurrently but each a stretch of IDs, are only reordered; bunches
// whose IDs interleave are merged into one (a copy).
func commitOrder(bunches []stagedBunch) []stagedBunch {
	order := slices.Clone(bunches)
	slices.SortFunc(order, func(a, b stagedBunch) int { return cmp.Compare(a.entries[0].first, b.entries[0].first) })
	apart := true
	for i := 1; i < len(order); i++ {
		if order[i-1].last() >= order[i].entries[0].first {
			apart = false
			break
		}
	}
	if apart {
		return order
	}
	var merged stagedBunch
	for _, sb := range order {
		for i := range sb.entries {
			e := sb.entries[i]
			lo := uint32(len(merged.parents))
			merged.parents = append(merged.parents, sb.parentsOf(&e)...)
			e.pLo, e.pHi = lo, uint32(len(merged.parents))
			merged.entries = append(merged.entries, e)
		}
	}
	slices.SortFunc(merged.entries, func(a, b stagedEntry) int { return cmp.Compare(a.first, b.first) })
	return []stagedBunch{merged}
}

// jobEntries returns the update's staged entries as JobEntries in the
// order of their IDs (what snapshots hold: a restored update keeps them
// as one bunch, which writes the same entries again).
func (u *update) jobEntries() []JobEntry {
	var out []JobEntry
	for _, sb := range commitOrder(u.staged) {
		out = append(out, sb.jobEntries(u.Start)...)
	}
	return out
}
