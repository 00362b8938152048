package state

import "slices"

// Retrying what failed (Hail's most asked-for missing piece): final jobs
// of a batch run again in place, as new attempts of the same jobs, their
// earlier attempts kept in their history; the jobs cancelled because a
// parent did not succeed run again with them once their parents end.

// MaxRetryRanges bounds the job ID ranges one RetryJobs names (the API's
// bound, api.MaxRetryRanges: server/apiview's TestNamesAreTheWire holds
// them equal).
const MaxRetryRanges = 10_000

// RetryJobs runs final jobs of a batch again: those in a state of States
// (Failed, Error, Cancelled; a bit per JobState) and among Jobs (none:
// any), with every job cancelled, directly or through others, because
// one of them did not succeed. A cancelled batch is cancelled no more.
type RetryJobs struct {
	Now    int64
	Batch  uint64
	User   string
	States uint16
	Jobs   []Range
}

// RetryResult counts the jobs that run again.
type RetryResult struct{ Retried int64 }

func (*RetryJobs) Type() CommandType { return CmdRetryJobs }

// RetryStates is the States bit of a final state that can run again.
func RetryStates(states ...JobState) uint16 {
	var m uint16
	for _, st := range states {
		if st == Failed || st == Error || st == Cancelled {
			m |= 1 << st
		}
	}
	return m
}

// retrySet is the job IDs a RetryJobs would run again, ascending: the
// chosen final jobs, then, transitively, every job cancelled without ever
// running in a group that waits on one of them. The handler counts it to
// admit the retry; apply runs it: one rule.
func (b *Batch) retrySet(states uint16, jobs []Range) []uint32 {
	in := make(map[uint32]bool)
	var work []uint32
	// The ranges named, merged (so no job is looked at twice however
	// they overlap) and cut to the batch.
	n := uint32(len(b.jobs))
	ranges := []Range{{1, n}}
	if len(jobs) > 0 {
		ranges = slices.Clone(jobs)
		slices.SortFunc(ranges, func(x, y Range) int { return int(x.Lo) - int(y.Lo) })
		merged := ranges[:0]
		for _, r := range ranges {
			if k := len(merged) - 1; k >= 0 && r.Lo <= merged[k].Hi+1 {
				merged[k].Hi = max(merged[k].Hi, r.Hi)
				continue
			}
			merged = append(merged, r)
		}
		ranges = merged
	}
	for _, r := range ranges {
		for id := max(r.Lo, 1); id <= min(r.Hi, n) && id != 0; id++ {
			j := &b.jobs[id-1]
			if j.state.Final() && j.state != Success && states&(1<<j.state) != 0 && j.attempt < MaxAttemptsPerJob {
				in[id] = true
				work = append(work, id)
			}
		}
	}
	// A gang runs again whole: with a member, every member of its gang
	// that did not succeed (whatever states were asked for).
	seenGang := map[uint32]bool{}
	for _, id := range slices.Clone(work) {
		g := b.groupOf(id)
		if g == nil || g.spec.gang() == nil {
			continue
		}
		first, size := gangSpan(g)
		if seenGang[first] {
			continue
		}
		seenGang[first] = true
		for m := first; m < first+size; m++ {
			if mj := &b.jobs[m-1]; !in[m] && mj.state.Final() && mj.state != Success && mj.attempt < MaxAttemptsPerJob {
				in[m] = true
				work = append(work, m)
			}
		}
	}
	// Each dependency, and each child group, is walked once however many
	// of its jobs run again: the walk is linear in the batch.
	seenRange := make(map[int32]bool)
	seenChild := make(map[uint32]bool)
	for len(work) > 0 {
		id := work[len(work)-1]
		work = work[:len(work)-1]
		b.overlapping(id, id, func(ri int32, _ uint32) {
			if seenRange[ri] {
				return
			}
			seenRange[ri] = true
			for _, child := range b.ranges[ri].children {
				if seenChild[child] {
					continue
				}
				seenChild[child] = true
				for _, g := range b.partsOf(child) {
					for c := g.first; c < g.first+g.count; c++ {
						if cj := &b.jobs[c-1]; !in[c] && cj.state == Cancelled && cj.attempt == 0 {
							in[c] = true
							work = append(work, c)
						}
					}
				}
			}
		})
	}
	out := make([]uint32, 0, len(in))
	for id := range in {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// RetryCount is how many jobs of b a RetryJobs with states and jobs would
// run again, with one job of each spec among them (for the billing
// project's rules, CheckJobs, which they must pass again).
func (r Reader) RetryCount(b *Batch, states uint16, jobs []Range) (int64, []JobEntry) {
	ids := b.retrySet(states, jobs)
	return int64(len(ids)), b.specsOf(ids)
}

// specsOf is one entry for each distinct spec of the jobs ids.
func (b *Batch) specsOf(ids []uint32) []JobEntry {
	var out []JobEntry
	seen := map[*Spec]bool{}
	for _, id := range ids {
		if g := b.groupOf(id); g != nil && !seen[g.spec] {
			seen[g.spec] = true
			out = append(out, JobEntry{First: id, Count: 1, Spec: g.spec})
		}
	}
	return out
}

func (s *batchBook) applyRetryJobs(c *RetryJobs) any {
	if len(c.Jobs) > MaxRetryRanges {
		return errorf(ErrInvalid, "a retry names %d job ranges; at most %d", len(c.Jobs), MaxRetryRanges)
	}
	b := s.batches[c.Batch]
	if b == nil {
		return errorf(ErrNotFound, "batch %d does not exist", c.Batch)
	}
	ids := b.retrySet(c.States, c.Jobs)
	if len(ids) == 0 {
		return &RetryResult{}
	}
	// They run again under the project's rules as they are now (an admin
	// may have stopped allowing what they ask since they were submitted).
	if c.User != "" {
		if err := s.checkJobs(b.BillingProject, c.User, b.specsOf(ids)); err != nil {
			return err
		}
	}
	if b.Cancelled {
		b.Cancelled, b.CancelReason = false, ""
	}
	// Back to Pending, with a fresh count of retries and losses.
	for _, id := range ids {
		j := &b.jobs[id-1]
		if s.hooks.Transition != nil {
			s.hooks.Transition(s.index, b.ID, id, j.state, Pending)
		}
		sp := b.groupOf(id).spec
		b.count(sp, j.state, -1)
		b.count(sp, Pending, 1)
		b.ended(-1)
		// Its group runs again, and the groups above it.
		for jg := b.jobGroup(sp); jg != nil && jg.Cancelled; jg = b.parentGroup(jg) {
			jg.Cancelled, jg.CancelReason = false, ""
		}
		j.state = Pending
		j.failures, j.lost, j.spotLost = 0, 0, 0
	}
	// Every dependency counts again what it waits for, from the jobs'
	// states (a cancelled batch's cancel left its counts as they were),
	// and every Pending group the parent ranges it waits for (a group
	// released before, and not run again, waits for nothing: finishSpan
	// passes it by).
	b.recountRanges()
	runs := toRuns(ids)
	for _, g := range b.groups {
		if b.jobs[g.first-1].state != Pending && !g.holdsAny(ids) {
			continue
		}
		g.pending = 0
		for _, ri := range b.parentsOf(g) {
			if b.ranges[ri].remaining > 0 {
				g.pending++
			}
		}
	}
	b.setLive()
	// What waits for nothing goes: Ready, or Cancelled again when a
	// parent that is not run again did not succeed.
	for _, r := range runs {
		for lo := r.Lo; lo <= r.Hi; {
			g := b.groupOf(lo)
			hi := min(r.Hi, g.first+g.count-1)
			if g.pending == 0 && s.releaseRun(b, g, lo, hi, c.Now) {
				s.finishSpan(b, lo, hi, true, c.Now)
			}
			lo = hi + 1
		}
	}
	s.checkComplete(b, c.Now)
	return &RetryResult{Retried: int64(len(ids))}
}

// recountRanges sets each dependency's unfinished and failed counts from
// its jobs' states, by prefix sums: one pass over the jobs, one step a
// range.
func (b *Batch) recountRanges() {
	open := make([]uint32, len(b.jobs)+1)
	bad := make([]uint32, len(b.jobs)+1)
	for i := range b.jobs {
		st := b.jobs[i].state
		open[i+1], bad[i+1] = open[i], bad[i]
		switch {
		case !st.Final():
			open[i+1]++
		case st != Success:
			bad[i+1]++
		}
	}
	for _, dr := range b.ranges {
		lo, hi := dr.r.Lo, min(dr.r.Hi, uint32(len(b.jobs)))
		if lo < 1 || lo > hi {
			continue
		}
		dr.remaining = open[hi] - open[lo-1]
		dr.failed = bad[hi] - bad[lo-1]
	}
}

// holdsAny reports whether one of ids (ascending) is in the group.
func (g *group) holdsAny(ids []uint32) bool {
	i, _ := slices.BinarySearch(ids, g.first)
	return i < len(ids) && ids[i] < g.first+g.count
}

// toRuns groups ascending IDs into runs of consecutive ones.
func toRuns(ids []uint32) []Range {
	var out []Range
	for _, id := range ids {
		if n := len(out); n > 0 && out[n-1].Hi+1 == id {
			out[n-1].Hi = id
			continue
		}
		out = append(out, Range{id, id})
	}
	return out
}
