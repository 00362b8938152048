package state

import (
	"slices"
	"sort"
)

// PageSize is the number of items in one page of a listing.
const PageSize = 50

// Viewer is who is asking; it decides which batches are visible.
type Viewer struct {
	Name  string
	Admin bool
}

// BatchAccess is how a viewer relates to a batch; each level allows what
// the ones below it do.
type BatchAccess int

// Batch access levels.
const (
	NoBatch     BatchAccess = iota // the batch does not exist
	Hidden                         // it exists but the viewer may not see it
	Visible                        // read it (any role in its billing project)
	Cancellable                    // cancel it too (a manager of its project)
	Owned                          // add jobs to it too (its owner, still a member or manager; an admin)
)

// Access reports whether the batch exists and what the viewer may do with
// it.
func (s *batchBook) Access(id uint64, v Viewer) BatchAccess {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[id]
	if !ok {
		return NoBatch
	}
	return s.accessLocked(b.BillingProject, b.User, v)
}

// Batch returns a batch's status.
func (s *batchBook) Batch(id uint64) (BatchRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[id]
	if !ok {
		return BatchRecord{}, false
	}
	return s.record(b), true
}

// CompletedWithSLO returns up to max complete batches that name an SLO
// or a deadline and completed at or after since (unix ns), newest first:
// the runs the SLO report reads from memory, before (and while) the
// history store holds them.
func (s *batchBook) CompletedWithSLO(since int64, max int) []BatchRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []BatchRecord
	for i := len(s.batchIDs) - 1; i >= 0 && len(out) < max; i-- {
		b := s.batches[s.batchIDs[i]]
		if b.Completed == 0 || b.Completed < since || (b.SLO == 0 && b.Deadline == 0) {
			continue
		}
		out = append(out, s.record(b))
	}
	return out
}

// BatchPage is one page of a batch listing: LastID is the cursor of the
// next page (0: none left).
type BatchPage struct {
	Batches []BatchRecord
	LastID  uint64
}

// ListBatches returns up to PageSize visible batches matching f (nil:
// all) with IDs below lastID (0: from the newest), newest first.
func (s *batchBook) ListBatches(v Viewer, f BatchFilter, lastID uint64) BatchPage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := BatchPage{Batches: []BatchRecord{}}
	var r BatchRecord // one for the walk (a filter must not keep it): a listing that matches few batches allocates nothing per batch
	i := len(s.batchIDs)
	if lastID > 0 {
		i = sort.Search(len(s.batchIDs), func(k int) bool { return s.batchIDs[k] >= lastID })
	}
	for i--; i >= 0; i-- {
		b := s.batches[s.batchIDs[i]]
		if !s.visible(b, v) {
			continue
		}
		r = s.record(b)
		if f != nil && !f(&r) {
			continue
		}
		out.Batches = append(out.Batches, r)
		if len(out.Batches) == PageSize {
			if i > 0 {
				out.LastID = b.ID
			}
			break
		}
	}
	return out
}

// JobPage is one page of a batch's jobs: LastID is the cursor of the
// next page (0: none left).
type JobPage struct {
	Jobs   []JobRecord
	LastID uint32
	// Batch is the batch's status in the same read: its counts agree
	// with the jobs' states.
	Batch BatchRecord
	// JobGroups are the batch's first PageGroups job groups, parents
	// first, in the same read.
	JobGroups []JobGroupRecord
}

// PageGroups bounds the job groups a page of jobs carries.
const PageGroups = 200

// ListJobs returns up to PageSize jobs of a batch matching f (nil: all)
// with IDs above lastID.
func (s *batchBook) ListJobs(batch uint64, f JobFilter, lastID uint32) (JobPage, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[batch]
	if !ok {
		return JobPage{}, false
	}
	out := JobPage{Jobs: []JobRecord{}, Batch: s.record(b)}
	for _, jg := range b.jobGroups[:min(len(b.jobGroups), PageGroups)] {
		out.JobGroups = append(out.JobGroups, b.groupRecord(jg))
	}
	var facts JobFacts // one for the walk (a filter must not keep it), as for batches
	for id := lastID + 1; int(id) <= len(b.jobs); id++ {
		j := &b.jobs[id-1]
		if j.state == Staged {
			continue
		}
		g := b.groupOf(id)
		facts = JobFacts{ID: id, State: j.state, Spec: g.spec, base: g.base}
		if jg := b.jobGroup(g.spec); jg != nil {
			facts.GroupPath = jg.Path
		}
		if f != nil && !f(&facts) {
			continue
		}
		out.Jobs = append(out.Jobs, s.jobRecord(b, id, j, g))
		if len(out.Jobs) == PageSize {
			if int(id) < len(b.jobs) {
				out.LastID = id
			}
			break
		}
	}
	return out, true
}

// Job returns one job.
func (s *batchBook) Job(batch uint64, id uint32) (JobRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[batch]
	if !ok || id < 1 || int(id) > len(b.jobs) || b.jobs[id-1].state == Staged {
		return JobRecord{}, false
	}
	return s.jobRecord(b, id, &b.jobs[id-1], b.groupOf(id)), true
}

// LogTarget returns the attempt of a job whose log to read: the given one if
// it exists, else the latest. ok is false when the job does not exist;
// attempt is 0 when it never ran.
func (s *batchBook) LogTarget(batch uint64, id uint32, attempt int) (n int, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, found := s.batches[batch]
	if !found || id < 1 || int(id) > len(b.jobs) || b.jobs[id-1].state == Staged {
		return 0, false
	}
	latest := int(b.jobs[id-1].attempt)
	if attempt > 0 && attempt <= latest {
		return attempt, true
	}
	if attempt > latest {
		return -1, true
	}
	return latest, true
}

// Counts returns cluster-wide job counts by state and batch counts, for
// metrics: totals kept as the state changes, not a walk.
func (s *batchBook) Counts() (byState [numStates]int64, batches, running int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.jobTotals.jobs, len(s.batches), s.jobTotals.live
}

// StateNames lists the job states in order, for metric labels.
func StateNames() []string {
	out := make([]string, 0, numStates-1)
	for st := Pending; st < numStates; st++ {
		out = append(out, st.String())
	}
	return out
}

// Footprint is what the state holds, for admission: job IDs reserved
// (committed or not), job groups (each distinct job, or job array, has
// one and carries its spec) and batches. The state keeps the totals as it
// applies.
type Footprint struct {
	Jobs    int64
	Groups  int64
	Batches int64
	// JobGroups counts the batches' job groups, and JobGroupBytes their
	// paths, attributes and callbacks.
	JobGroups     int64
	JobGroupBytes int64
}

// Admission is what admission control reads before a submission reaches
// the log, under one read lock.
type Admission struct {
	Held Footprint // over all batches
	// The batch the submission goes to (none for a new batch): its job
	// IDs reserved so far and whether it is live (not complete).
	BatchJobs int64
	BatchLive bool
	// User and Project: the batch's owner and billing project (the
	// submitter and the named project for a new batch) and their tallies.
	UserName, ProjectName string
	User, Project         Tally
	// Repeat: the idempotency key names an earlier batch (or an update of
	// the batch) that the state will return instead of making a new one.
	Repeat bool
}

// Admission reads what admission needs for a submission to batch (0: a
// new batch of user in project) with idempotency key (may be empty).
func (r Reader) Admission(batch uint64, user, project, key string) Admission {
	s := r.s
	a := Admission{Held: s.held}
	if batch == 0 {
		if key != "" {
			_, a.Repeat = s.keys[user+"\x00"+key]
		}
	} else if b := s.batches[batch]; b != nil {
		a.BatchJobs, a.BatchLive = int64(b.nextJob)-1, b.Completed == 0
		user, project = b.User, b.BillingProject
		for _, u := range b.updates {
			if key != "" && u.Key == key && !u.Discarded {
				a.Repeat = true
			}
		}
	}
	a.UserName, a.ProjectName = user, project
	if t := s.userTallies[user]; t != nil {
		a.User = *t
	}
	if t := s.projectTallies[project]; t != nil {
		a.Project = *t
	}
	return a
}

// MaxStages bounds the stages one read of a batch's stages returns: the
// read walks at most this many of the batch's groups, so a batch of a
// million distinct jobs costs what one of a thousand does.
const MaxStages = 1000

// StageRecord is a stage of a batch's DAG: consecutive committed job
// entries of one name (a job block of a jobspec, an array), the job IDs
// they hold and the job ranges they wait on.
type StageRecord struct {
	Name    string
	First   uint32
	Count   uint32
	Parents []Range
}

// Stages returns the first stages of a batch (up to MaxStages groups
// read), and whether groups were left unread.
func (s *batchBook) Stages(id uint64) (stages []StageRecord, more, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[id]
	if !ok {
		return nil, false, false
	}
	n := min(len(b.groups), MaxStages)
	for _, g := range b.groups[:n] {
		var parents []Range
		for _, ri := range b.parentsOf(g) {
			parents = append(parents, b.ranges[ri].r)
		}
		if k := len(stages) - 1; k >= 0 && stages[k].Name == g.spec.Name && stages[k].First+stages[k].Count == g.first && slices.Equal(stages[k].Parents, parents) {
			stages[k].Count += g.count
			continue
		}
		stages = append(stages, StageRecord{Name: g.spec.Name, First: g.first, Count: g.count, Parents: parents})
	}
	return stages, n < len(b.groups), true
}

// AttemptInstance returns the instance an attempt was placed on.
func (s *batchBook) AttemptInstance(batch uint64, job uint32, attempt uint16) (uint32, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := s.batches[batch]
	if b == nil || job < 1 || int(job) > len(b.jobs) {
		return 0, false
	}
	if j := &b.jobs[job-1]; j.attempt == attempt && attempt > 0 {
		return j.instance, true
	}
	for _, rec := range b.history[job] {
		if rec.Attempt == attempt {
			return rec.Instance, true
		}
	}
	return 0, false
}
