package state

import (
	"fmt"
	"maps"
	"strings"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/placement"
)

// Job groups (Hail's): a batch's jobs may be put in named groups, nested
// as a tree under the batch, each with its own attributes, state counts,
// cost, cancel, completion callback and cancel_after_n_failures. A group
// is named by its path from the batch ("align", "align/chr1"); it counts
// the jobs of its subgroups as its own, as the batch counts every job.
//
// A command that brings jobs (CreateBatch, CreateUpdate, AddJobs)
// declares the groups they name in Groups, parents before children; a
// job's Spec.JobGroup is, in the command, the 1-based index of its group in
// that list (0: the batch itself). Apply finds each path among the
// batch's groups or makes it, then gives every spec the group's ID: the
// groups of a batch are numbered from 1 in the order they were made, and
// never removed, so an ID names the same group on every server for the
// batch's life.

// Bounds on job groups, checked by the API first and by apply again.
const (
	MaxJobGroups     = 10000 // per batch
	MaxJobGroupDepth = placement.MaxJobGroupDepth
	// MaxJobGroupsPerRequest bounds the groups one command declares.
	MaxJobGroupsPerRequest = 1000
)

// JobGroupDecl declares a job group in a command that brings jobs. A path
// the batch has already is that group: its other fields, when set, must
// be the group's (a declaration does not change a group).
type JobGroupDecl struct {
	Path        string
	Attributes  StringMap
	Callback    string
	CancelAfter uint32
	// Gang: the group's jobs (and its subgroups') are one gang, all
	// committed with it (JobGroup.Gang).
	Gang           bool
	GangUniformity string
}

// JobGroup is a named, nested set of a batch's jobs.
type JobGroup struct {
	ID     uint32
	Parent uint32 // 0: the batch
	Path   string
	// Attributes, Callback and CancelAfterFailures: as the batch's, for
	// the group's jobs and those of its subgroups.
	Attributes          StringMap
	Callback            string
	CancelAfterFailures uint32
	// Gang: the group's jobs, and those of the groups below it, are one
	// gang (they start together or not at all), all committed with the
	// group; GangUniformity narrows where, as a gang array's.
	Gang           bool
	GangUniformity string
	// Cancelled: the group, or a group above it, was cancelled; its jobs
	// that had not ended were, and jobs committed to it later are.
	Cancelled    bool
	CancelReason string
	// Completed is when every job of the group (and of its subgroups)
	// last became final with no update of the batch open (0: not now).
	Completed int64

	// version is the Raft index at which the group last completed;
	// callbackVersion the completion its callback was last told of, with
	// callbackResult how that went.
	version         uint64
	callbackVersion uint64
	callbackResult  string

	depth  uint8
	nJobs  int64 // committed jobs, its subgroups' included
	counts [numStates]int64
	dirty  bool // its completion is to be settled (Batch.dirtyGroups)
	// accrued is what its ended attempts cost, run its running ones'
	// charges (rebuilt from the batch's when a snapshot is restored).
	accrued money.Amount
	run     billing.Running
}

// jobGroup returns the group a spec's jobs are in (nil: the batch).
func (b *Batch) jobGroup(sp *Spec) *JobGroup {
	if sp == nil || sp.JobGroup() == 0 || int(sp.JobGroup()) > len(b.jobGroups) {
		return nil
	}
	return b.jobGroups[sp.JobGroup()-1]
}

// cancelledFor reports whether jobs of sp are cancelled: their batch or
// their group was.
func (b *Batch) cancelledFor(sp *Spec) bool {
	if b.Cancelled {
		return true
	}
	jg := b.jobGroup(sp)
	return jg != nil && jg.Cancelled
}

// count moves n jobs of sp into (or, negative, out of) state st: in the
// batch's counts and in those of the job group and the groups above it.
func (b *Batch) count(sp *Spec, st JobState, n int64) {
	b.addCount(st, n)
	b.groupCount(sp, st, n)
}

// groupCount is count for the job groups alone.
func (b *Batch) groupCount(sp *Spec, st JobState, n int64) {
	if len(b.jobGroups) == 0 || sp == nil || sp.JobGroup() == 0 {
		return
	}
	for id := sp.JobGroup(); id != 0; {
		jg := b.jobGroups[id-1]
		jg.counts[st] += n
		if st.Final() && !jg.dirty {
			jg.dirty = true
			b.dirtyGroups = append(b.dirtyGroups, id)
		}
		id = jg.Parent
	}
}

// addJobs counts n newly committed jobs of sp in its group and those
// above it.
func (b *Batch) addJobs(sp *Spec, n int64) {
	for jg := b.jobGroup(sp); jg != nil; jg = b.parentGroup(jg) {
		jg.nJobs += n
		if !jg.dirty {
			jg.dirty = true
			b.dirtyGroups = append(b.dirtyGroups, jg.ID)
		}
	}
}

func (b *Batch) parentGroup(jg *JobGroup) *JobGroup {
	if jg.Parent == 0 {
		return nil
	}
	return b.jobGroups[jg.Parent-1]
}

// dirtyAllGroups has every group's completion settled again (an update
// was opened, committed or discarded: completion waits for open ones).
func (b *Batch) dirtyAllGroups() {
	for _, jg := range b.jobGroups {
		if !jg.dirty {
			jg.dirty = true
			b.dirtyGroups = append(b.dirtyGroups, jg.ID)
		}
	}
}

// settleGroups stamps the groups whose counts changed complete when
// every one of their jobs is final and no update of the batch is open,
// and not complete otherwise; a group that completes cancels nothing, but
// one that reached its cancel_after_n_failures was cancelled already.
func (s *batchBook) settleGroups(b *Batch, now int64) {
	for _, id := range b.dirtyGroups {
		jg := b.jobGroups[id-1]
		jg.dirty = false
		final := jg.counts[Success] + jg.counts[Failed] + jg.counts[Cancelled] + jg.counts[Error]
		switch done := final == jg.nJobs && b.open == 0; {
		case done && jg.Completed == 0:
			jg.Completed = now
			jg.version = s.index
		case !done:
			jg.Completed = 0
		}
	}
	b.dirtyGroups = b.dirtyGroups[:0]
}

// failedInGroups applies the cancel_after_n_failures of the groups of a
// job of sp that just failed: the failure that reaches a group's count
// cancels what is left of that group.
func (s *batchBook) failedInGroups(b *Batch, sp *Spec, now int64) {
	for jg := b.jobGroup(sp); jg != nil; jg = b.parentGroup(jg) {
		// A complete group has nothing left to cancel: the failure of
		// its last job leaves it complete, not cancelled (as a batch).
		if jg.Cancelled || jg.CancelAfterFailures == 0 || jg.Completed != 0 {
			continue
		}
		if n := jg.counts[Failed] + jg.counts[Error]; n >= int64(jg.CancelAfterFailures) {
			s.cancelJobGroup(b, jg, fmt.Sprintf("%d of its jobs failed (cancel_after_n_failures = %d)", n, jg.CancelAfterFailures), now)
		}
	}
}

// under reports whether group id is jg or lies below it.
func (b *Batch) under(id uint32, jg *JobGroup) bool {
	for id != 0 {
		if id == jg.ID {
			return true
		}
		id = b.jobGroups[id-1].Parent
	}
	return false
}

// JobGroupCancelResult says what cancelling a job group did.
type JobGroupCancelResult struct {
	CancelResult
	Groups int // groups cancelled (it and those below it not cancelled before)
}

// CancelJobGroup cancels a job group of a batch and every group below
// it: their jobs that have not started are Cancelled at once (and the
// jobs of other groups that wait for them, unless always_run), the
// workers of running ones are told to kill them, and jobs committed to
// them later are cancelled as they come.
type CancelJobGroup struct {
	Now    int64
	Batch  uint64
	Group  uint32
	Reason string
}

// Type implements Command.
func (*CancelJobGroup) Type() CommandType { return CmdCancelJobGroup }

func (s *batchBook) applyCancelJobGroup(c *CancelJobGroup) any {
	b, ok := s.batches[c.Batch]
	if !ok {
		return errorf(ErrNotFound, "batch %d does not exist", c.Batch)
	}
	if c.Group == 0 || int(c.Group) > len(b.jobGroups) {
		return errorf(ErrNotFound, "batch %d has no job group %d", c.Batch, c.Group)
	}
	jg := b.jobGroups[c.Group-1]
	if jg.Cancelled {
		return &JobGroupCancelResult{CancelResult: CancelResult{AlreadyCancelled: true}}
	}
	return s.cancelJobGroup(b, jg, c.Reason, c.Now)
}

// cancelJobGroup cancels jg and the groups below it (see CancelJobGroup).
func (s *batchBook) cancelJobGroup(b *Batch, jg *JobGroup, reason string, now int64) *JobGroupCancelResult {
	res := &JobGroupCancelResult{}
	for _, g := range b.jobGroups[jg.ID-1:] { // children come after their parents
		if g.Cancelled || !b.under(g.ID, jg) {
			continue
		}
		g.Cancelled = true
		g.CancelReason = reason
		if g != jg {
			g.CancelReason = fmt.Sprintf("job group %s was cancelled: %s", jg.Path, reason)
		}
		res.Groups++
	}
	// The spec groups of its jobs, each run of jobs that had not started
	// cancelled as one (and what waits for them with it). Ready jobs
	// leave the queue in one pass after.
	var readyMilli, readyJobs int64
	var gangs []uint32 // a cancelled member of each gang
	for i := 0; i < len(b.groups); i++ {
		g := b.groups[i]
		if g.spec.JobGroup() == 0 || !b.under(g.spec.JobGroup(), jg) {
			continue
		}
		last := g.first + g.count - 1
		for lo := g.first; lo <= last; lo++ {
			st := b.jobs[lo-1].state
			if st != Pending && st != Ready && st != Creating {
				continue
			}
			hi := lo
			for hi < last && b.jobs[hi].state == st {
				hi++
			}
			switch st {
			case Ready:
				readyMilli += int64(hi-lo+1) * g.spec.CPUMilli
				readyJobs += int64(hi - lo + 1)
			case Creating:
				for id := lo; id <= hi; id++ {
					s.dropPrivate(b.ID, id, now, "its job's group was cancelled")
				}
			}
			s.setStates(b, g.spec, lo, hi, st, Cancelled)
			if g.spec.gang() != nil {
				gangs = append(gangs, lo)
			}
			res.Cancelled += int64(hi - lo + 1)
			// What waits for them is cancelled (or runs, if always_run):
			// jobs of other groups too.
			s.finishSpan(b, lo, hi, true, now)
			lo = hi
		}
	}
	if readyJobs > 0 {
		b.ready.retain(func(id uint32) bool { return b.jobs[id-1].state == Ready })
		b.readyMilli -= readyMilli
		us := s.userSched(b.User)
		us.readyMilli -= readyMilli
		us.readyJobs -= readyJobs
		if b.ready.empty() {
			us.removeActive(b)
		}
	}
	// A gang with members cancelled here cannot run whole: its members
	// outside the cancelled groups are cancelled too.
	for _, id := range gangs {
		s.cancelGang(b, b.groupOf(id), id, now)
	}
	res.Running = jg.counts[Running]
	s.checkComplete(b, now)
	if jg.counts[Running] > 0 {
		s.notifyAllInstances()
	}
	return res
}

// resolveGroups finds or makes the groups a command declares, and returns
// their IDs (ids[i] for decls[i]) and how many it made (the last of the
// batch's groups, to be dropped again if the command fails after). It
// checks every declaration before making any.
func (s *batchBook) resolveGroups(b *Batch, decls []JobGroupDecl) ([]uint32, int, *ApplyError) {
	if len(decls) == 0 {
		return nil, 0, nil
	}
	if len(decls) > MaxJobGroupsPerRequest {
		return nil, 0, errorf(ErrInvalid, "%d job groups declared; at most %d a request", len(decls), MaxJobGroupsPerRequest)
	}
	ids := make([]uint32, len(decls))
	type made struct {
		parent uint32
		depth  uint8
		gang   bool // it or a group above it, new too, is a gang
	}
	var news []made
	newIdx := map[string]uint32{}
	next := uint32(len(b.jobGroups)) + 1
	for i := range decls {
		d := &decls[i]
		if err := placement.ValidateJobGroupPath(d.Path); err != nil {
			return nil, 0, errorf(ErrInvalid, "job group %d: %v", i+1, err)
		}
		if id, ok := b.groupByPath[d.Path]; ok {
			jg := b.jobGroups[id-1]
			if err := jg.sameAs(d); err != nil {
				return nil, 0, err
			}
			if jg.Cancelled {
				return nil, 0, errorf(ErrConflict, "job group %s of batch %d is cancelled and takes no more jobs", d.Path, b.ID)
			}
			ids[i] = id
			continue
		}
		if id, ok := newIdx[d.Path]; ok {
			return nil, 0, errorf(ErrInvalid, "job group %s is declared twice (as %d and %d)", d.Path, id-next+1, i+1)
		}
		var parent uint32
		depth := uint8(1)
		if k := strings.LastIndexByte(d.Path, '/'); k >= 0 {
			pp := d.Path[:k]
			switch id, ok := b.groupByPath[pp]; {
			case ok:
				parent = id
				depth = b.jobGroups[id-1].depth + 1
				if b.jobGroups[id-1].Cancelled {
					return nil, 0, errorf(ErrConflict, "job group %s of batch %d is cancelled and takes no more groups", pp, b.ID)
				}
			default:
				id, ok := newIdx[pp]
				if !ok {
					return nil, 0, errorf(ErrInvalid, "job group %s: its parent %s is neither in the batch nor declared before it", d.Path, pp)
				}
				parent = id
				depth = news[id-next].depth + 1
			}
		}
		if d.Gang && (parent != 0 && parent < next && b.gangGroup(parent) != 0 || parent >= next && news[parent-next].gang) {
			return nil, 0, errorf(ErrInvalid, "job group %s: a gang group cannot be inside another", d.Path)
		}
		if depth > MaxJobGroupDepth {
			return nil, 0, errorf(ErrInvalid, "job group %s is nested %d deep; at most %d", d.Path, depth, MaxJobGroupDepth)
		}
		id := next + uint32(len(news))
		if int(id) > MaxJobGroups {
			return nil, 0, errorf(ErrInvalid, "batch %d would have more than %d job groups", b.ID, MaxJobGroups)
		}
		newIdx[d.Path] = id
		news = append(news, made{parent: parent, depth: depth, gang: d.Gang || parent >= next && news[parent-next].gang})
		ids[i] = id
	}
	for i := range decls {
		d := &decls[i]
		if ids[i] < next {
			continue
		}
		m := news[ids[i]-next]
		jg := &JobGroup{
			ID: ids[i], Parent: m.parent, Path: d.Path, depth: m.depth,
			Attributes: d.Attributes, Callback: d.Callback, CancelAfterFailures: d.CancelAfter,
			Gang: d.Gang, GangUniformity: d.GangUniformity,
		}
		b.addJobGroup(jg)
		s.held.JobGroups++
		s.held.JobGroupBytes += jg.size()
	}
	return ids, len(news), nil
}

// size is the bytes of a group's path, attributes and callback (the
// memory budget's measure: Footprint.JobGroupBytes).
func (jg *JobGroup) size() int64 {
	n := len(jg.Path) + len(jg.Callback)
	for k, v := range jg.Attributes {
		n += len(k) + len(v)
	}
	return int64(n)
}

// jobGroupsHeld is what a batch's job groups hold (Footprint).
func (b *Batch) jobGroupsHeld() (n, bytes int64) {
	for _, jg := range b.jobGroups {
		bytes += jg.size()
	}
	return int64(len(b.jobGroups)), bytes
}

// addJobGroup appends a made group (in ID order) to the batch.
func (b *Batch) addJobGroup(jg *JobGroup) {
	if b.groupByPath == nil {
		b.groupByPath = map[string]uint32{}
	}
	b.jobGroups = append(b.jobGroups, jg)
	b.groupByPath[jg.Path] = jg.ID
	jg.dirty = true
	b.dirtyGroups = append(b.dirtyGroups, jg.ID)
}

// dropNewGroups removes the last n groups, made by a command that failed.
func (s *batchBook) dropNewGroups(b *Batch, n int) {
	for _, jg := range b.jobGroups[len(b.jobGroups)-n:] {
		delete(b.groupByPath, jg.Path)
		s.held.JobGroups--
		s.held.JobGroupBytes -= jg.size()
	}
	b.jobGroups = b.jobGroups[:len(b.jobGroups)-n]
	b.dirtyGroups = b.dirtyGroups[:0]
	for _, jg := range b.jobGroups {
		if jg.dirty {
			b.dirtyGroups = append(b.dirtyGroups, jg.ID)
		}
	}
}

// sameAs refuses a declaration that names an existing group with other
// settings.
func (jg *JobGroup) sameAs(d *JobGroupDecl) *ApplyError {
	if (d.Attributes != nil && !maps.Equal(d.Attributes, jg.Attributes)) ||
		(d.Callback != "" && d.Callback != jg.Callback) ||
		(d.CancelAfter != 0 && d.CancelAfter != jg.CancelAfterFailures) || (d.Gang && !jg.Gang) {
		return errorf(ErrConflict, "job group %s exists with other attributes, callback, cancel_after_n_failures or gang; a group's settings do not change", jg.Path)
	}
	return nil
}

// groupEntries gives the specs of entries the IDs of the groups their
// command declared (ids): new specs, so that the command's own stay as
// they were sent.
func groupEntries(entries []JobEntry, ids []uint32) ([]JobEntry, *ApplyError) {
	changed := false
	for i := range entries {
		if sp := entries[i].Spec; sp != nil && sp.JobGroup() != 0 {
			if int(sp.JobGroup()) > len(ids) {
				return nil, errorf(ErrInvalid, "job %d names job group %d of the %d the request declares", entries[i].First, sp.JobGroup(), len(ids))
			}
			changed = true
		}
	}
	if !changed {
		return entries, nil
	}
	out := make([]JobEntry, len(entries))
	copy(out, entries)
	specs := map[*Spec]*Spec{}
	for i := range out {
		sp := out[i].Spec
		if sp == nil || sp.JobGroup() == 0 {
			continue
		}
		ns, ok := specs[sp]
		if !ok {
			ns = sp.InJobGroup(ids[sp.JobGroup()-1])
			specs[sp] = ns
		}
		out[i].Spec = ns
	}
	return out, nil
}

// groupChargeAt and groupChargeEnd keep the groups' costs beside the
// batch's: a running charge's sums, and what ended charges cost.
func (b *Batch) groupChargeAt(id uint32, price billing.Price, start int64) {
	if len(b.jobGroups) == 0 {
		return
	}
	g := b.groupOf(id)
	if g == nil {
		return
	}
	for jg := b.jobGroup(g.spec); jg != nil; jg = b.parentGroup(jg) {
		jg.run.Add(price, start)
	}
}

func (b *Batch) groupChargeEnd(id uint32, c charge, cost money.Amount) {
	if len(b.jobGroups) == 0 {
		return
	}
	g := b.groupOf(id)
	if g == nil {
		return
	}
	for jg := b.jobGroup(g.spec); jg != nil; jg = b.parentGroup(jg) {
		jg.run.Remove(c.Price, c.Start)
		jg.accrued = jg.accrued.Add(cost)
	}
}

// recountGroups rebuilds the groups' derived counts from the jobs (a
// restored snapshot; a whole batch's cancel).
func (b *Batch) recountGroups() {
	for i, c := range b.groupCounts() {
		b.jobGroups[i].nJobs, b.jobGroups[i].counts = c.nJobs, c.counts
	}
}

// groupTally is a job group's jobs and their states.
type groupTally struct {
	nJobs  int64
	counts [numStates]int64
}

// groupCounts counts the jobs of each job group (and its subgroups) from
// the jobs, by ID - 1, changing nothing.
func (b *Batch) groupCounts() []groupTally {
	if len(b.jobGroups) == 0 {
		return nil
	}
	out := make([]groupTally, len(b.jobGroups))
	for _, g := range b.groups {
		if g.spec.JobGroup() == 0 {
			continue
		}
		var c [numStates]int64
		for id := g.first; id < g.first+g.count; id++ {
			c[b.jobs[id-1].state]++
		}
		for id := g.spec.JobGroup(); id != 0; id = b.jobGroups[id-1].Parent {
			t := &out[id-1]
			t.nJobs += int64(g.count)
			for st, n := range c {
				t.counts[st] += n
			}
		}
	}
	return out
}

// cloneGroups gives a commit's scratch batch its own job groups.
func cloneGroups(gs []*JobGroup) []*JobGroup {
	if len(gs) == 0 {
		return gs
	}
	out := make([]*JobGroup, len(gs))
	for i, jg := range gs {
		c := *jg
		out[i] = &c
	}
	return out
}

// JobGroupRecord is a job group as one read of the state saw it.
type JobGroupRecord struct {
	Batch  uint64
	ID     uint32
	Parent uint32
	Path   string
	// Attributes are the group's, never changed once made: shared, a
	// constant to the reader.
	Attributes          map[string]string
	Callback            string
	CallbackResult      string
	CancelAfterFailures uint32
	Gang                bool
	GangUniformity      string
	// Cancelled: the group, a group above it or its batch was;
	// CancelReason says which and why.
	Cancelled    bool
	CancelReason string
	Completed    int64
	NJobs        int64
	Counts       [numStates]int64
	accrued      money.Amount    // its ended attempts' cost
	running      billing.Running // its running attempts'
}

// Cost is what the group's jobs have cost by now (unix ns).
func (r *JobGroupRecord) Cost(now int64) money.Amount {
	return r.accrued.Add(r.running.Cost(now))
}

// Count is the number of the group's jobs in state st.
func (r *JobGroupRecord) Count(st JobState) int64 {
	if st >= numStates {
		return 0
	}
	return r.Counts[st]
}

// groupRecord is jg as a read returns it. Callers hold the lock.
func (b *Batch) groupRecord(jg *JobGroup) JobGroupRecord {
	r := JobGroupRecord{
		Batch: b.ID, ID: jg.ID, Parent: jg.Parent, Path: jg.Path, Attributes: jg.Attributes,
		Callback: jg.Callback, CallbackResult: jg.callbackResult, CancelAfterFailures: jg.CancelAfterFailures,
		Cancelled: jg.Cancelled, CancelReason: jg.CancelReason, Completed: jg.Completed,
		NJobs: jg.nJobs, Counts: jg.counts, accrued: jg.accrued, running: jg.run, Gang: jg.Gang, GangUniformity: jg.GangUniformity,
	}
	if !r.Cancelled && b.Cancelled {
		r.Cancelled, r.CancelReason = true, "its batch was cancelled: "+b.CancelReason
	}
	return r
}

// JobGroups returns a batch's job groups in ID order (parents before
// their children), with their counts and costs at now.
func (s *batchBook) JobGroups(batch uint64) ([]JobGroupRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[batch]
	if !ok {
		return nil, false
	}
	out := make([]JobGroupRecord, len(b.jobGroups))
	for i, jg := range b.jobGroups {
		out[i] = b.groupRecord(jg)
	}
	return out, true
}

// JobGroup returns one job group of a batch.
func (s *batchBook) JobGroup(batch uint64, id uint32) (JobGroupRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[batch]
	if !ok || id == 0 || int(id) > len(b.jobGroups) {
		return JobGroupRecord{}, false
	}
	return b.groupRecord(b.jobGroups[id-1]), true
}

// JobGroupID returns the ID of a batch's job group by its path (ok false:
// no such batch or group).
func (s *batchBook) JobGroupID(batch uint64, path string) (uint32, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[batch]
	if !ok {
		return 0, false
	}
	id, ok := b.groupByPath[path]
	return id, ok
}

// checkJobGroups recomputes the job groups' counts from the jobs and
// checks them, their completion and their index (CheckInvariants).
func (b *Batch) checkJobGroups() error {
	if len(b.jobGroups) == 0 {
		return nil
	}
	for i, jg := range b.jobGroups {
		if id, ok := b.groupByPath[jg.Path]; !ok || id != jg.ID || jg.ID != uint32(i+1) {
			return fmt.Errorf("batch %d: job group %d (%s) is indexed as %d", b.ID, jg.ID, jg.Path, id)
		}
		if jg.Parent != 0 && b.jobGroups[jg.Parent-1].Cancelled && !jg.Cancelled && !b.Cancelled {
			// A retry un-cancels what it runs again, upwards: a child
			// may stand cancelled under a parent that is not, never
			// the other way.
			return fmt.Errorf("batch %d: job group %s runs under cancelled %s", b.ID, jg.Path, b.jobGroups[jg.Parent-1].Path)
		}
	}
	for i, c := range b.groupCounts() {
		jg := b.jobGroups[i]
		if c.nJobs != jg.nJobs || c.counts != jg.counts {
			return fmt.Errorf("batch %d: job group %s counts %d jobs %v, recomputed %d %v", b.ID, jg.Path, jg.nJobs, jg.counts, c.nJobs, c.counts)
		}
		final := jg.counts[Success] + jg.counts[Failed] + jg.counts[Cancelled] + jg.counts[Error]
		if done := final == jg.nJobs && b.open == 0; done != (jg.Completed != 0) && !jg.dirty {
			return fmt.Errorf("batch %d: job group %s complete = %v with %d of %d jobs final and %d updates open", b.ID, jg.Path, jg.Completed != 0, final, jg.nJobs, b.open)
		}
	}
	return nil
}
