package state

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// MaxJobsPerBatch bounds the job IDs one batch may reserve. It is the
// API's limit too (api.MaxJobsPerBatch, held equal by server/apiview's
// TestNamesAreTheWire): the API refuses first, apply again.
const MaxJobsPerBatch = 1 << 31

// UpdateResult is returned by CreateBatch, CreateUpdate and CommitUpdate.
type UpdateResult struct {
	Batch     uint64
	Update    uint32
	Start     uint32
	N         uint32
	Committed bool
	// Existing is set when an idempotency key matched an earlier request.
	Existing bool
}

func (s *batchBook) applyCreateBatch(c *CreateBatch) any {
	u, uerr := s.liveUser(c.User)
	if uerr != nil {
		return uerr
	}
	if err := s.submitter(c.BillingProject, u); err != nil {
		return err
	}
	if c.Key != "" {
		if id, ok := s.keys[c.User+"\x00"+c.Key]; ok {
			b := s.batches[id]
			if err := keyReused(c.Key, b.keyDigest, c.Digest, fmt.Sprintf("batch %d", id)); err != nil {
				return err
			}
			res := &UpdateResult{Batch: id, Existing: true}
			if len(b.updates) > 0 {
				u := b.updates[0]
				res.Update, res.Start, res.N, res.Committed = u.ID, u.Start, u.N, u.Committed
			}
			return res
		}
	}
	if len(c.Jobs) > 0 && c.NJobs > 0 {
		return errorf(ErrInvalid, "give either jobs or n_jobs, not both")
	}
	if c.SLONs < 0 || c.DeadlineNs < 0 {
		return errorf(ErrInvalid, "slo and deadline must not be negative")
	}
	if c.Priority < -MaxPriority || c.Priority > MaxPriority {
		return errorf(ErrInvalid, "priority %d is out of range: between %d and %d", c.Priority, -MaxPriority, MaxPriority)
	}
	if err := s.checkBatchQueue(c.Queue, c.BillingProject); err != nil {
		return err
	}
	if c.Policy >= PolicyPriority {
		if err := s.checkPriority(c.BillingProject, u, c.Queue, int64(c.Priority)); err != nil {
			return err
		}
	}
	if c.Policy >= PolicyStorage {
		if err := s.checkJobs(c.BillingProject, c.User, c.Jobs); err != nil {
			return err
		}
	}
	b := &Batch{
		tot:            &s.jobTotals,
		ID:             s.nextBatch,
		Name:           c.Name,
		User:           c.User,
		BillingProject: c.BillingProject,
		Attributes:     c.Attributes,
		Key:            c.Key,
		keyDigest:      c.Digest,
		Created:        c.Now,
		nextJob:        1,

		CancelAfterFailures: c.CancelAfterFailures,
		Callback:            c.Callback,
		Queue:               c.Queue,
		SLO:                 c.SLONs,
		Deadline:            c.DeadlineNs,
		Priority:            c.Priority,
	}
	ids, made, gerr := s.resolveGroups(b, c.Groups)
	if gerr != nil {
		return gerr
	}
	jobs, gerr := groupEntries(c.Jobs, ids)
	if gerr == nil {
		gerr = b.gangGroups(jobs, made)
	}
	if gerr != nil {
		s.dropNewGroups(b, made) // the batch is not made: nor are they
		return gerr
	}
	s.bindTallies(b)
	b.leaf = s.resolveQueue(b)
	res := &UpdateResult{Batch: b.ID}
	switch {
	case len(jobs) > 0:
		u, err := s.inlineUpdate(b, jobs, "", c.Now)
		if err != nil {
			s.dropNewGroups(b, made)
			return err
		}
		res.Update, res.Start, res.N, res.Committed = u.ID, u.Start, u.N, true
	case c.NJobs > 0:
		u, err := s.reserve(b, c.NJobs, "", c.Now)
		if err != nil {
			return err
		}
		res.Update, res.Start, res.N = u.ID, u.Start, u.N
	default:
		b.setCompleted(c.Now, s.index) // an empty batch is complete until an update commits
		s.settleGroups(b, c.Now)       // and so are its groups
	}
	s.nextBatch++
	s.held.Batches++
	if p := s.projects[c.BillingProject]; p != nil {
		p.Batches++
	}
	s.batches[b.ID] = b
	s.batchIDs = append(s.batchIDs, b.ID)
	if c.Key != "" {
		s.keys[c.User+"\x00"+c.Key] = b.ID
	}
	return res
}

func (s *batchBook) applyCreateUpdate(c *CreateUpdate) any {
	b, err := s.openBatch(c.Batch)
	if err != nil {
		return err
	}
	if c.Key != "" {
		for _, u := range b.updates {
			if u.Key == c.Key && !u.Discarded {
				if err := keyReused(c.Key, u.KeyDigest, c.Digest, fmt.Sprintf("update %d of batch %d", u.ID, b.ID)); err != nil {
					return err
				}
				return &UpdateResult{Batch: b.ID, Update: u.ID, Start: u.Start, N: u.N, Committed: u.Committed, Existing: true}
			}
		}
	}
	if c.Policy >= PolicyStorage {
		if err := s.checkJobs(b.BillingProject, c.User, c.Jobs); err != nil {
			return err
		}
	}
	if len(c.Jobs) == 0 && c.NJobs == 0 {
		return errorf(ErrInvalid, "an update needs jobs or n_jobs > 0")
	}
	if len(c.Jobs) > 0 && c.NJobs > 0 {
		return errorf(ErrInvalid, "give either jobs or n_jobs, not both")
	}
	ids, made, err := s.resolveGroups(b, c.Groups)
	if err != nil {
		return err
	}
	jobs, err := groupEntries(c.Jobs, ids)
	if err == nil {
		err = b.gangGroups(jobs, made)
	}
	if err != nil {
		s.dropNewGroups(b, made)
		return err
	}
	switch {
	case len(jobs) > 0:
		u, err := s.inlineUpdate(b, jobs, c.Key, c.Now)
		if err != nil {
			s.dropNewGroups(b, made)
			return err
		}
		u.KeyDigest = c.Digest
		return &UpdateResult{Batch: b.ID, Update: u.ID, Start: u.Start, N: u.N, Committed: true}
	case c.NJobs > 0:
		u, err := s.reserve(b, c.NJobs, c.Key, c.Now)
		if err != nil {
			s.dropNewGroups(b, made)
			return err
		}
		u.KeyDigest = c.Digest
		return &UpdateResult{Batch: b.ID, Update: u.ID, Start: u.Start, N: u.N}
	}
	return errorf(ErrInvalid, "an update needs jobs or n_jobs > 0")
}

// keyReused refuses a request that reuses an idempotency key with another
// body: it would otherwise get what the first request made, silently.
func keyReused(key string, had, got []byte, made string) *ApplyError {
	if len(had) == 0 || len(got) == 0 || bytes.Equal(had, got) {
		return nil
	}
	return errorf(ErrConflict, "idempotency key %q was used for %s by a request with other contents; a new request needs a new key (a retry must send the same request)", key, made)
}

// inlineUpdate reserves, stages and commits entries in one step, leaving b
// untouched when they are invalid.
func (s *batchBook) inlineUpdate(b *Batch, entries []JobEntry, key string, now int64) (*update, *ApplyError) {
	var n uint64
	for _, e := range entries {
		n += uint64(max(e.Count, 1))
	}
	if n > MaxJobsPerBatch {
		return nil, errorf(ErrInvalid, "%d jobs is more than the %d a batch may hold", n, MaxJobsPerBatch)
	}
	u := &update{ID: uint32(len(b.updates) + 1), Start: b.nextJob, N: uint32(n), Key: key, Created: now, Touched: now}
	if uint64(u.Start)+n > MaxJobsPerBatch {
		return nil, errorf(ErrInvalid, "batch %d would exceed %d jobs", b.ID, MaxJobsPerBatch)
	}
	if err := u.stage(entries); err != nil {
		return nil, err
	}
	bunches, err := s.prepareCommit(b, u)
	if err != nil {
		return nil, err
	}
	b.nextJob += u.N
	s.held.Jobs += int64(u.N)
	b.updates = append(b.updates, u)
	b.open++
	b.tally(Tally{Queued: int64(u.N), OpenUpdates: 1})
	s.commit(b, u, bunches, now)
	return u, nil
}

// reserve opens an update of n job IDs in b.
func (s *batchBook) reserve(b *Batch, n uint32, key string, now int64) (*update, *ApplyError) {
	if uint64(b.nextJob)+uint64(n) > MaxJobsPerBatch {
		return nil, errorf(ErrInvalid, "batch %d would exceed %d jobs", b.ID, MaxJobsPerBatch)
	}
	u := &update{ID: uint32(len(b.updates) + 1), Start: b.nextJob, N: n, Key: key, Created: now, Touched: now}
	b.nextJob += n
	s.held.Jobs += int64(n)
	b.updates = append(b.updates, u)
	b.open++
	b.tally(Tally{Queued: int64(n), OpenUpdates: 1})
	b.setLive()
	if len(b.jobGroups) > 0 {
		b.dirtyAllGroups()
		s.settleGroups(b, now)
	}
	return u, nil
}

func (s *batchBook) openBatch(id uint64) (*Batch, *ApplyError) {
	b, ok := s.batches[id]
	if !ok {
		return nil, errorf(ErrNotFound, "batch %d does not exist", id)
	}
	if b.Cancelled {
		return nil, errorf(ErrConflict, "batch %d is cancelled and takes no more updates", id)
	}
	return b, nil
}

func (b *Batch) updateByID(id uint32) (*update, *ApplyError) {
	if id == 0 || int(id) > len(b.updates) {
		return nil, errorf(ErrNotFound, "batch %d has no update %d", b.ID, id)
	}
	return b.updates[id-1], nil
}

func (s *batchBook) applyAddJobs(c *AddJobs) any {
	b, err := s.openBatch(c.Batch)
	if err != nil {
		return err
	}
	u, err := b.updateByID(c.Update)
	if err != nil {
		return err
	}
	if u.Discarded {
		return u.discardedError(b)
	}
	if c.Now > u.Touched {
		u.Touched = c.Now
	}
	if u.Committed {
		if u.covers(c.Jobs) {
			return nil // a retried bunch of a committed update
		}
		return errorf(ErrConflict, "update %d of batch %d is already committed", u.ID, b.ID)
	}
	if len(c.Jobs) > 0 && u.covers(c.Jobs) {
		return nil // a retried bunch: ignored, its groups too
	}
	if c.Policy >= PolicyStorage {
		if err := s.checkJobs(b.BillingProject, c.User, c.Jobs); err != nil {
			return err
		}
	}
	ids, made, err := s.resolveGroups(b, c.Groups)
	if err != nil {
		return err
	}
	jobs, err := groupEntries(c.Jobs, ids)
	if err == nil {
		err = b.gangGroups(jobs, made)
	}
	if err == nil {
		err = u.stage(jobs)
	}
	if err != nil {
		s.dropNewGroups(b, made)
		return err
	}
	return nil
}

// stage validates entries against the update's block and records them. A
// bunch whose IDs were all staged before is a retry and is ignored.
func (u *update) stage(entries []JobEntry) *ApplyError {
	if len(entries) == 0 {
		return errorf(ErrInvalid, "a bunch needs at least one job")
	}
	if u.seen == nil {
		u.seen = make([]uint64, (u.N+63)/64)
	}
	if u.covers(entries) {
		return nil
	}
	for i := range entries {
		e := &entries[i]
		if e.Count == 0 {
			return errorf(ErrInvalid, "job %d: count must be at least 1", e.First)
		}
		if e.Spec == nil {
			return errorf(ErrInvalid, "job %d: no spec", e.First)
		}
		last := uint64(e.First) + uint64(e.Count) - 1
		if e.First < 1 || last > uint64(u.N) {
			return errorf(ErrInvalid, "job %d (count %d) lies outside this update's %d jobs: job_id counts from 1 within the update",
				e.First, e.Count, u.N)
		}
		for _, p := range e.Parents {
			if p.Lo < 1 || p.Lo > p.Hi || p.Hi > u.N {
				return errorf(ErrInvalid, "job %d: parent range [%d, %d] is not inside this update's jobs 1..%d", e.First, p.Lo, p.Hi, u.N)
			}
		}
		for _, p := range e.BatchParents {
			if p.Lo < 1 || p.Lo > p.Hi || p.Hi >= u.Start {
				return errorf(ErrInvalid, "job %d: batch parent range [%d, %d] does not name jobs committed before this update (1..%d)",
					e.First, p.Lo, p.Hi, int64(u.Start)-1)
			}
		}
	}
	if err := gangEntries(entries); err != nil {
		return err
	}
	// Check for overlap with earlier bunches and within this one before
	// marking anything, so a rejected bunch leaves no trace.
	marked := make([][2]uint32, 0, len(entries))
	for _, e := range entries {
		for id := e.First; id < e.First+e.Count; id++ {
			if u.seen[(id-1)/64]&(1<<((id-1)%64)) != 0 {
				u.unmark(e.First, id)
				for _, m := range marked {
					u.unmark(m[0], m[1])
				}
				return errorf(ErrConflict, "job %d of update %d was already submitted", id, u.ID)
			}
			u.seen[(id-1)/64] |= 1 << ((id - 1) % 64)
		}
		marked = append(marked, [2]uint32{e.First, e.First + e.Count})
	}
	u.staged = append(u.staged, newStagedBunch(entries, u.Start))
	for _, e := range entries {
		u.nStaged += e.Count
	}
	return nil
}

func (u *update) unmark(lo, hi uint32) {
	for id := lo; id < hi; id++ {
		u.seen[(id-1)/64] &^= 1 << ((id - 1) % 64)
	}
}

// covers reports whether every ID of entries was staged already.
func (u *update) covers(entries []JobEntry) bool {
	if u.Committed {
		for _, e := range entries {
			if e.First < 1 || uint64(e.First)+uint64(e.Count)-1 > uint64(u.N) {
				return false
			}
		}
		return true
	}
	if u.seen == nil {
		return false
	}
	for _, e := range entries {
		if e.Count == 0 || e.First < 1 || uint64(e.First)+uint64(e.Count)-1 > uint64(u.N) {
			return false
		}
		for id := e.First; id < e.First+e.Count; id++ {
			if u.seen[(id-1)/64]&(1<<((id-1)%64)) == 0 {
				return false
			}
		}
	}
	return true
}

// prepareCommitUpdate applies a CommitUpdate at index without the
// state's lock and returns what makes it visible, to run with the write
// lock held. A commit's cost grows with its update (a million jobs:
// groups, dependency ranges, the jobs' new states, the ready queue), so
// it is done on a private copy of the batch (commitScratch) that readers
// cannot reach: apply is the state's only writer, so it may read the
// state unlocked, and readers never write. The returned func publishes
// the copy at once (a few fields and counters), so a reader sees the whole
// commit or none of it, and waits for the publication alone. The result
// is the same as committing in place: the same code runs on the copy.
func (s *batchBook) prepareCommitUpdate(index uint64, c *CommitUpdate) func() any {
	b, ok := s.batches[c.Batch]
	if !ok {
		return result(errorf(ErrNotFound, "batch %d does not exist", c.Batch))
	}
	u, err := b.updateByID(c.Update)
	if err != nil {
		return result(err)
	}
	res := &UpdateResult{Batch: b.ID, Update: u.ID, Start: u.Start, N: u.N, Committed: true}
	if u.Committed {
		return result(res)
	}
	if b.Cancelled {
		return result(errorf(ErrConflict, "batch %d is cancelled and takes no more updates", b.ID))
	}
	if u.Discarded {
		return result(u.discardedError(b))
	}
	if u.nStaged != u.N {
		return result(errorf(ErrInvalid, "update %d of batch %d has %d of its %d jobs; post the rest before committing", u.ID, b.ID, u.nStaged, u.N))
	}
	entries, err := s.prepareCommit(b, u)
	if err != nil {
		return result(err)
	}
	sc := s.commitScratch(index, b, u)
	sc.st.commit(sc.b, sc.u, entries, c.Now)
	if s.preparing != nil {
		s.preparing()
	}
	return func() any {
		s.publishCommit(b, u, sc)
		return res
	}
}

// result returns a func that returns r: a command decided while preparing.
func result(r any) func() any { return func() any { return r } }

// scratch is a commit made on copies: st stands in for the State (its
// index, its Transition hook, and zeroed counters that collect what the
// commit adds to the state's), b and u for the batch and the update.
type scratch struct {
	st   *State
	b    *Batch
	u    *update
	work bool // the commit made jobs Ready
	tot  totals
	// userTally and projectTally collect what the batch adds to its
	// owner's and its project's.
	userTally, projectTally Tally
}

// commitScratch copies b and u for a commit at index that readers of b
// do not see: the batch's fields by value, and its slices so that
// anything the commit writes lands in new arrays (an append past a slice
// clipped to its length allocates; the sorted indexes of its ranges are
// sorted in place, so they are copied, and so are its jobs when the
// update's IDs lie inside them, an update committed after a later one).
// The counters it shares with the state point into the scratch.
func (s *batchBook) commitScratch(index uint64, b *Batch, u *update) *scratch {
	sc := &scratch{}
	sc.st = &State{}
	sc.st.wire()
	sc.st.index, sc.st.sched = index, map[string]*userSched{}
	sc.st.hooks = Hooks{
		Transition: s.hooks.Transition,
		Work:       func() { sc.work = true },
	}
	nb := *b
	nb.jobs = slices.Clip(b.jobs)
	if int(u.Start) <= len(b.jobs) {
		nb.jobs = slices.Clone(b.jobs)
	}
	nb.groups = slices.Clip(b.groups)
	nb.groupParents = slices.Clip(b.groupParents)
	nb.ranges = slices.Clip(b.ranges)
	nb.points = slices.Clone(b.points)
	nb.spans = slices.Clone(b.spans)
	nb.spanMaxHi = slices.Clone(b.spanMaxHi)
	nb.ready.runs = slices.Clip(b.ready.runs)
	nb.jobGroups = cloneGroups(b.jobGroups)
	nb.dirtyGroups = slices.Clone(b.dirtyGroups)
	nb.tot, nb.userTally, nb.projectTally = &sc.tot, &sc.userTally, &sc.projectTally
	nu := *u
	sc.b, sc.u = &nb, &nu
	return sc
}

// publishCommit makes a commit prepared in sc the state's, with the
// write lock held: the batch and the update take the copies' values,
// the state's counters what the commit added to them.
func (s *batchBook) publishCommit(b *Batch, u *update, sc *scratch) {
	nb := sc.b
	nb.tot, nb.userTally, nb.projectTally = b.tot, b.userTally, b.projectTally
	*b = *nb
	*u = *sc.u
	if b.tot != nil {
		for st, n := range sc.tot.jobs {
			b.tot.jobs[st] += n
		}
		b.tot.live += sc.tot.live
	}
	b.userTally.add(sc.userTally)
	b.projectTally.add(sc.projectTally)
	s.held.Groups += sc.st.held.Groups
	if d := sc.st.sched[b.User]; d != nil {
		us := s.userSched(b.User)
		us.readyMilli += d.readyMilli
		us.readyJobs += d.readyJobs
		if len(d.active) > 0 {
			us.addActive(b)
		}
	}
	if sc.work {
		s.notifyWork()
	}
}

// prepareCommit checks a fully staged update (parents exist, no cycles)
// and returns its bunches in the order of their job IDs (commitOrder).
func (s *batchBook) prepareCommit(b *Batch, u *update) ([]stagedBunch, *ApplyError) {
	off := u.Start - 1
	bunches := commitOrder(u.staged)
	for k := range bunches {
		sb := &bunches[k]
		for i := range sb.entries {
			e := &sb.entries[i]
			for _, p := range sb.parentsOf(e) {
				for id := p.Lo; id <= min(p.Hi, u.Start-1); id++ {
					if int(id) > len(b.jobs) || b.jobs[id-1].state == Staged {
						return nil, errorf(ErrInvalid, "job %d: parent %d is not a committed job of batch %d", e.first-off, id, b.ID)
					}
				}
			}
		}
	}
	if err := checkCycles(bunches, u.Start, u.Start+u.N-1, off); err != nil {
		return nil, err
	}
	return bunches, nil
}

// parentInside reports whether an entry waits for a job in [lo, hi].
func parentInside(bunches []stagedBunch, lo, hi uint32) bool {
	for _, sb := range bunches {
		for _, p := range sb.parents {
			if p.Hi >= lo && p.Lo <= hi {
				return true
			}
		}
	}
	return false
}

// absEntry is a staged entry as the cycle check sees it: one list of an
// update's entries, sorted, each with its parents.
type absEntry struct {
	First, Count uint32
	Parents      []Range
	Spec         *Spec
}

// checkCycles runs Kahn's algorithm over the entries of one update. Each
// distinct parent range inside the update is a node that waits for every
// entry overlapping it, so arrays cost one edge, not one per job.
func checkCycles(bunches []stagedBunch, lo, hi, off uint32) *ApplyError {
	// Without a parent inside the update there is no edge, so no cycle:
	// a million-job update of independent jobs allocated 38 MB here for
	// nothing, at the commit's memory peak.
	if !parentInside(bunches, lo, hi) {
		return nil
	}
	var entries []absEntry
	for k := range bunches {
		sb := &bunches[k]
		for i := range sb.entries {
			e := &sb.entries[i]
			entries = append(entries, absEntry{First: e.first, Count: e.count, Parents: sb.parentsOf(e), Spec: e.spec})
		}
	}
	// A gang starts whole: each member waits for what any member waits
	// for, so a cycle through the gang (a member waiting, through jobs
	// outside it, for another member) is one here.
	gangParents := map[uint32][]Range{}
	for _, e := range entries {
		if g := e.Spec.gang(); g != nil {
			gangParents[e.First-g.Lead] = append(gangParents[e.First-g.Lead], e.Parents...)
		}
	}
	for i := range entries {
		if g := entries[i].Spec.gang(); g != nil {
			entries[i].Parents = gangParents[entries[i].First-g.Lead]
		}
	}
	rangeIdx := map[Range]int{}
	var rangeIn []int     // entries a range still waits for
	var rangeKids [][]int // entries waiting on each range
	entryIn := make([]int, len(entries))
	entryOut := make([][]int, len(entries)) // ranges each entry feeds
	find := func(id uint32) int {
		return sort.Search(len(entries), func(i int) bool { return entries[i].First+entries[i].Count > id })
	}
	for i, e := range entries {
		for _, p := range e.Parents {
			if p.Hi < lo || p.Lo > hi {
				continue
			}
			r := Range{max(p.Lo, lo), min(p.Hi, hi)}
			ri, ok := rangeIdx[r]
			if !ok {
				ri = len(rangeIn)
				rangeIdx[r] = ri
				rangeIn = append(rangeIn, 0)
				rangeKids = append(rangeKids, nil)
				for k := find(r.Lo); k < len(entries) && entries[k].First <= r.Hi; k++ {
					rangeIn[ri]++
					entryOut[k] = append(entryOut[k], ri)
				}
			}
			rangeKids[ri] = append(rangeKids[ri], i)
			entryIn[i]++
		}
	}
	queue := make([]int, 0, len(entries))
	for i, n := range entryIn {
		if n == 0 {
			queue = append(queue, i)
		}
	}
	done := 0
	for len(queue) > 0 {
		i := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		done++
		for _, ri := range entryOut[i] {
			rangeIn[ri]--
			if rangeIn[ri] == 0 {
				for _, k := range rangeKids[ri] {
					entryIn[k]--
					if entryIn[k] == 0 {
						queue = append(queue, k)
					}
				}
			}
		}
	}
	if done == len(entries) {
		return nil
	}
	var names []string
	for i, n := range entryIn {
		if n > 0 && len(names) < 8 {
			names = append(names, fmt.Sprintf("%d (%s)", entries[i].First-off, entries[i].Spec.Name))
		}
	}
	return errorf(ErrInvalid, "dependency cycle among jobs %s", strings.Join(names, ", "))
}

// commit makes checked entries live: jobs become Pending, dependency ranges
// are counted, and groups without unfinished parents are released.
func (s *batchBook) commit(b *Batch, u *update, bunches []stagedBunch, now int64) {
	u.staged = nil
	u.seen = nil
	n := 0
	for _, sb := range bunches {
		n += len(sb.entries)
	}
	end := int(u.Start + u.N - 1)
	if end > len(b.jobs) {
		if end > cap(b.jobs) {
			grown := make([]job, len(b.jobs), end)
			copy(grown, b.jobs)
			b.jobs = grown
		}
		b.jobs = b.jobs[:end]
	}
	firstRange := len(b.ranges)
	rangeIdx := map[Range]int32{}
	// The groups are made in one array, and the batch's list of them
	// grows once.
	newGroups := make([]group, 0, n)
	firstGroup := len(b.groups)
	b.groups = slices.Grow(b.groups, n)
	for k := range bunches {
		sb := &bunches[k]
		for i := range sb.entries {
			newGroups = append(newGroups, s.commitEntry(b, u, sb, &sb.entries[i], rangeIdx))
			b.groups = append(b.groups, &newGroups[len(newGroups)-1])
		}
	}
	b.indexRanges(firstRange)
	b.insertedGroups(firstGroup)
	s.held.Groups += int64(len(newGroups))
	b.addCount(Pending, int64(u.N))
	if len(b.jobGroups) > 0 {
		for i := range newGroups {
			if sp := newGroups[i].spec; sp.JobGroup() != 0 {
				b.groupCount(sp, Pending, int64(newGroups[i].count))
				b.addJobs(sp, int64(newGroups[i].count))
			}
		}
		b.dirtyAllGroups()
	}
	b.nJobs += int64(u.N)
	b.open--
	b.tally(Tally{OpenUpdates: -1})
	u.Committed = true
	b.setLive()
	// The queue grows once, not by doubling through a million releases
	// (each step's old array garbage at the commit's memory peak).
	free := 0
	for i := range newGroups {
		if newGroups[i].pending == 0 {
			free++
		}
	}
	b.ready.runs = slices.Grow(b.ready.runs, free)
	// A group cancelled here releases those of the update that wait for
	// it (finishSpan): when the walk reaches one, it waits for nothing but
	// its jobs are no longer Pending, and it is not released again.
	for i := range newGroups {
		g := &newGroups[i]
		if g.pending == 0 && b.jobs[g.first-1].state == Pending && s.releaseRun(b, g, g.first, g.first+g.count-1, now) {
			s.finishSpan(b, g.first, g.first+g.count-1, true, now)
		}
	}
	s.checkComplete(b, now)
}

// commitEntry makes a group of a staged entry and its jobs Pending, and
// counts the group against the dependency ranges it waits for.
func (s *batchBook) commitEntry(b *Batch, u *update, sb *stagedBunch, e *stagedEntry, rangeIdx map[Range]int32) group {
	g := group{first: e.first, count: e.count, base: e.first, spec: e.spec}
	g.pLo = uint32(len(b.groupParents))
	for _, p := range sb.parentsOf(e) {
		ri, ok := rangeIdx[p]
		if !ok {
			ri = int32(len(b.ranges))
			rangeIdx[p] = ri
			b.ranges = append(b.ranges, s.newRange(b, p, u))
		}
		dr := b.ranges[ri]
		b.groupParents = append(b.groupParents, ri)
		dr.children = append(dr.children, g.first)
		if dr.remaining > 0 {
			g.pending++
		}
	}
	g.pHi = uint32(len(b.groupParents))
	for id := e.first; id < e.first+e.count; id++ {
		b.jobs[id-1] = job{state: Pending}
		if s.hooks.Transition != nil {
			s.hooks.Transition(s.index, b.ID, id, Staged, Pending)
		}
	}
	return g
}

// newRange counts how many jobs of r are not final yet, and how many ended
// without success, at commit time.
func (s *batchBook) newRange(b *Batch, r Range, u *update) *depRange {
	dr := &depRange{r: r}
	for id := r.Lo; id <= r.Hi; id++ {
		if id >= u.Start {
			dr.remaining += r.Hi - id + 1
			break
		}
		st := b.jobs[id-1].state
		switch {
		case !st.Final():
			dr.remaining++
		case st != Success:
			dr.failed++
		}
	}
	return dr
}

// insertedGroups sorts the groups appended to b.groups from index from
// into place (an update committed after a later one) and notes whether
// one names a machine type.
func (b *Batch) insertedGroups(from int) {
	for _, g := range b.groups[from:] {
		if g.spec.Where != nil && g.spec.Where.MachineType != "" {
			b.private = true
		}
	}
	if from > 0 && from < len(b.groups) && b.groups[from-1].first > b.groups[from].first {
		slices.SortFunc(b.groups, func(x, y *group) int { return cmp.Compare(x.first, y.first) })
	}
}

// normalizeRanges sorts ranges and merges overlapping or adjacent ones, so a
// job never waits twice on the same parent.
func normalizeRanges(rs []Range) []Range {
	if len(rs) < 2 {
		return rs
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Lo < rs[j].Lo })
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if uint64(r.Lo) <= uint64(last.Hi)+1 {
			last.Hi = max(last.Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// CancelResult says what a cancellation did.
type CancelResult struct {
	AlreadyCancelled bool
	Cancelled        int64 // jobs moved to Cancelled at once
	Running          int64 // running jobs that workers are told to kill
}

func (s *batchBook) applyCancelBatch(c *CancelBatch) any {
	b, ok := s.batches[c.Batch]
	if !ok {
		return errorf(ErrNotFound, "batch %d does not exist", c.Batch)
	}
	if b.Cancelled {
		return &CancelResult{AlreadyCancelled: true}
	}
	return s.cancelBatch(b, c.Reason, c.Now)
}

// cancelBatch cancels b: its open updates are discarded, its jobs that
// have not started are Cancelled at once, and the workers of its running
// ones are told to kill them.
func (s *batchBook) cancelBatch(b *Batch, reason string, now int64) *CancelResult {
	b.Cancelled = true
	for _, u := range b.updates {
		if !u.Committed && !u.Discarded {
			b.discard(u, "the batch was cancelled")
		}
	}
	us := s.userSched(b.User)
	us.readyMilli -= b.readyMilli
	us.readyJobs -= b.counts[Ready]
	us.removeActive(b)
	b.ready.clear()
	b.readyMilli = 0
	var n int64
	for i := range b.jobs {
		j := &b.jobs[i]
		if j.state == Pending || j.state == Ready || j.state == Creating {
			if j.state == Creating {
				// Its machine is not needed any more.
				s.dropPrivate(b.ID, uint32(i+1), now, "its job's batch was cancelled")
			}
			if s.hooks.Transition != nil {
				s.hooks.Transition(s.index, b.ID, uint32(i+1), j.state, Cancelled)
			}
			b.addCount(j.state, -1)
			j.state = Cancelled
			n++
		}
	}
	b.addCount(Cancelled, n)
	b.ended(n)
	if len(b.jobGroups) > 0 {
		b.recountGroups()
		b.dirtyAllGroups()
	}
	b.CancelReason = reason
	if b.Completed != 0 {
		b.version = s.index // a complete batch changed: export it again
	}
	s.checkComplete(b, now)
	if b.counts[Running] > 0 {
		s.notifyAllInstances()
	}
	return &CancelResult{Cancelled: n, Running: b.counts[Running]}
}

// parentsOf returns g's parent ranges, as indices into b.ranges
// (read-only).
func (b *Batch) parentsOf(g *group) []int32 { return b.groupParents[g.pLo:g.pHi:g.pHi] }

// groupOf returns the group holding job id.
func (b *Batch) groupOf(id uint32) *group {
	if i := b.groupIndex(id); i >= 0 {
		return b.groups[i]
	}
	return nil
}

// partsOf returns the group whose first job is first, and the groups
// after it that were parts of the same committed group (Batch.isolate
// splits a group into consecutive parts that share its parent ranges; no
// two committed groups with parents share them).
func (b *Batch) partsOf(first uint32) []*group {
	i := b.groupIndex(first)
	if i < 0 {
		return nil
	}
	g0 := b.groups[i]
	k := i + 1
	for k < len(b.groups) && b.groups[k].pLo == g0.pLo && b.groups[k].pHi == g0.pHi && g0.pHi > g0.pLo {
		k++
	}
	return b.groups[i:k]
}

// isolate gives job id a group of its own with spec sp and returns it;
// the other jobs of its group keep their spec in new groups before and
// after it. A snapshot encodes groups after the lock is let go, reading
// all but pending then, so no group is changed in place: every part is a
// new group. Only a group whose parents are done may be split (its
// children wait on job ranges, not on it). A job is split off its array
// once: later calls replace its own group, so the state's groups grow by
// at most two per job.
func (s *batchBook) isolate(b *Batch, id uint32, sp *Spec) *group {
	i := b.groupIndex(id)
	g := b.groups[i]
	part := func(first, count uint32, sp *Spec) *group {
		return &group{first: first, count: count, pLo: g.pLo, pHi: g.pHi, pending: g.pending, base: g.base, spec: sp}
	}
	mine := part(id, 1, sp)
	parts := make([]*group, 0, 3)
	if id > g.first {
		parts = append(parts, part(g.first, id-g.first, g.spec))
	}
	parts = append(parts, mine)
	if last := g.first + g.count - 1; id < last {
		parts = append(parts, part(id+1, last-id, g.spec))
	}
	b.groups = slices.Concat(b.groups[:i], parts, b.groups[i+1:])
	s.held.Groups += int64(len(parts) - 1)
	return mine
}

// groupIndex returns the index of the group holding job id (-1: none).
func (b *Batch) groupIndex(id uint32) int {
	i := sort.Search(len(b.groups), func(i int) bool { return b.groups[i].first > id })
	if i == 0 || id >= b.groups[i-1].first+b.groups[i-1].count {
		return -1
	}
	return i - 1
}

// discard drops an open update: its job IDs stay reserved (holes in the
// batch that never become jobs) and its staged bunches are freed.
func (b *Batch) discard(u *update, reason string) {
	u.Discarded = true
	u.Reason = reason
	u.staged = nil
	u.seen = nil
	b.open--
	b.tally(Tally{Queued: -int64(u.N), OpenUpdates: -1})
	b.dirtyAllGroups()
}

func (u *update) discardedError(b *Batch) *ApplyError {
	return errorf(ErrConflict, "update %d of batch %d was discarded (%s); open a new update", u.ID, b.ID, u.Reason)
}

// ExpireResult says how many updates an ExpireUpdates command discarded.
type ExpireResult struct {
	Discarded int
}

// applyExpireUpdates discards each named update that is still open and has
// received nothing since Before. The leader names them; the check is
// repeated here so that a bunch committed in between keeps its update.
func (s *batchBook) applyExpireUpdates(c *ExpireUpdates) any {
	res := &ExpireResult{}
	for _, ref := range c.Updates {
		b := s.batches[ref.Batch]
		if b == nil || ref.Update == 0 || int(ref.Update) > len(b.updates) {
			continue
		}
		u := b.updates[ref.Update-1]
		if u.Committed || u.Discarded || u.Touched >= c.Before {
			continue
		}
		b.discard(u, c.Reason)
		s.checkComplete(b, c.Now)
		res.Discarded++
	}
	return res
}

// IdleUpdates lists open updates that have received nothing since before
// (at most max of them), for the leader to expire.
func (s *batchBook) IdleUpdates(before int64, max int) []UpdateRef {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []UpdateRef
	for _, id := range s.batchIDs {
		b := s.batches[id]
		if b.open == 0 {
			continue
		}
		for _, u := range b.updates {
			if !u.Committed && !u.Discarded && u.Touched < before {
				out = append(out, UpdateRef{Batch: b.ID, Update: u.ID})
				if len(out) == max {
					return out
				}
			}
		}
	}
	return out
}
