package state

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Bounds of the Nomad jobs the state keeps (checked by the API first and
// again by apply, so no entry grows the state past them).
const (
	// MaxNomadSpecBytes bounds a Nomad job's spec as registered (its
	// JSON); Nomad jobs are a few kilobytes.
	MaxNomadSpecBytes = 256 << 10
	// MaxNomadJobs bounds the Nomad jobs kept at once; a purged job (the
	// leader purges one whose batches all left for the history store)
	// frees its place. MaxNomadJobsPerProject and MaxNomadBytesPerProject
	// bound one billing project's (namespace's) share, so that no tenant
	// takes the rest's.
	MaxNomadJobs            = 100_000
	MaxNomadJobsPerProject  = 10_000
	MaxNomadBytesPerProject = 64 << 20
	// MaxNomadVersions is how many versions' batches a job remembers.
	MaxNomadVersions = 16
	// MaxNomadIDBytes bounds a Nomad job's ID and namespace.
	MaxNomadIDBytes = 128
)

// NomadKey names a Nomad job: its namespace and ID.
type NomadKey struct {
	Namespace, ID string
}

// NomadJob is a Nomad job registered through the Nomad API: the spec the
// client sent, its versions and the drover batch each version became.
type NomadJob struct {
	Namespace string
	ID        string
	// User registered its current version; Project is the billing
	// project its namespace names.
	User    string
	Project string
	// Spec is the job as registered (nomad/api's Job, as JSON).
	Spec []byte
	// Version counts its registered versions from 0; CreateIndex,
	// ModifyIndex and JobModifyIndex are Nomad's (the Raft indexes of
	// its first registration, its last change, and its last change of
	// spec); SubmitTime is when the current version was registered.
	Version        uint64
	CreateIndex    uint64
	ModifyIndex    uint64
	JobModifyIndex uint64
	SubmitTime     int64
	// Stopped: deregistered without purge (its batch cancelled).
	Stopped bool
	// Batches are the batches of its last versions, oldest first (none
	// for a template).
	Batches []NomadVersion
	// Template: a periodic or parameterized job, launched rather than
	// run; Parent: of a launched child, the template's ID.
	Template bool
	Parent   string
	// Of a periodic template: NextLaunch is when the leader launches it
	// next (unix ns; 0: never), ProhibitOverlap skips a launch while the
	// last child runs. Of any template: LastChild and Launched, its last
	// child's ID and how many it launched; DispatchTokens, the children
	// of its last dispatches by idempotency token.
	NextLaunch      int64
	ProhibitOverlap bool
	LastChild       string
	Launched        uint64
	DispatchTokens  map[string]string
	// DispatchToken: of a dispatched child, the token it was made with.
	DispatchToken string
}

// MaxDispatchTokens bounds the idempotency tokens a parameterized job
// remembers (the oldest go first).
const MaxDispatchTokens = 1024

// NomadVersion is one version of a Nomad job and the batch it became.
type NomadVersion struct {
	Version uint64
	Batch   uint64
}

// RegisterNomadJob registers a Nomad job, or a new version of it, and in
// the same entry creates the batch it runs as (Batch; nil for a
// template). A version whose spec equals the current one's changes
// nothing. The batch of the version it replaces is cancelled, as Nomad
// stops a replaced version's allocations.
type RegisterNomadJob struct {
	Now       int64
	Namespace string
	ID        string
	User      string
	Project   string
	Spec      []byte
	Template  bool
	Parent    string
	// EnforceIndex registers only if the job's JobModifyIndex is
	// JobModifyIndex (0: only if there is no such job), as Nomad's
	// check-index.
	EnforceIndex   bool
	JobModifyIndex uint64
	Batch          *CreateBatch
	// NextLaunch and ProhibitOverlap: of a periodic template (see
	// NomadJob).
	NextLaunch      int64
	ProhibitOverlap bool
}

// Type implements Command.
func (*RegisterNomadJob) Type() CommandType { return CmdRegisterNomadJob }

// LaunchNomadJob launches a child of a template: a periodic job's launch
// due At (the template's NextLaunch, which becomes Next), or a dispatch
// or forced launch (At 0). A launch due At is made once: a second one
// for the same time is refused. With ProhibitOverlap, a periodic launch
// while the last child runs is skipped (its time still passes). A
// dispatch with a Token the template already launched a child for
// returns that child.
type LaunchNomadJob struct {
	Now    int64
	Parent NomadKey
	At     int64
	Next   int64
	Token  string
	Child  RegisterNomadJob
	// Skip: only move a periodic job's next launch (its child could not
	// be made).
	Skip bool
}

// Type implements Command.
func (*LaunchNomadJob) Type() CommandType { return CmdLaunchNomadJob }

// DeregisterNomadJob stops a Nomad job (its running batch cancelled) and,
// with Purge, forgets it.
type DeregisterNomadJob struct {
	Now       int64
	Namespace string
	ID        string
	User      string
	Purge     bool
	// GC: the leader purges a job whose batches all left the state
	// (NomadForgettable), on no user's behalf.
	GC bool
}

// Type implements Command.
func (*DeregisterNomadJob) Type() CommandType { return CmdDeregisterNomadJob }

// NomadResult is what registering or deregistering a Nomad job did: the
// job as it is now, and the batch it created or cancelled (0: none).
type NomadResult struct {
	Job       NomadJob
	Batch     uint64
	Unchanged bool
	// Skipped: a periodic launch skipped because the last child runs.
	Skipped bool
}

// nomadBook owns the Nomad jobs registered through the Nomad API: each
// job's spec, versions and batches. It creates and cancels those batches
// through the batch book, in the same entry.
type nomadBook struct {
	*core
	*batchBook

	nomadJobs map[NomadKey]*NomadJob
	nomadHeld map[string]nomadTally // by billing project
}

// nomadTally is what a billing project's Nomad jobs hold: how many, and
// their specs' bytes.
type nomadTally struct {
	Jobs  int
	Bytes int64
}

// holdNomad counts a job's spec in (sign 1) or out (-1) of its project's
// tally.
func (s *nomadBook) holdNomad(j *NomadJob, sign int) {
	t := s.nomadHeld[j.Project]
	t.Jobs += sign
	t.Bytes += int64(sign) * int64(len(j.Spec))
	if t.Jobs == 0 && t.Bytes == 0 {
		delete(s.nomadHeld, j.Project)
		return
	}
	s.nomadHeld[j.Project] = t
}

// recountNomad recomputes the projects' tallies (after a restore).
func (s *nomadBook) recountNomad() map[string]nomadTally {
	out := map[string]nomadTally{}
	for _, j := range s.nomadJobs {
		t := out[j.Project]
		t.Jobs++
		t.Bytes += int64(len(j.Spec))
		out[j.Project] = t
	}
	return out
}

// nomadControl refuses a user who may not replace, stop or purge a
// registered job: its owner (a member or manager who registered it), a
// manager of its billing project or an admin may, as with a batch.
func (s *nomadBook) nomadControl(j *NomadJob, u *User) *ApplyError {
	if s.accessLocked(j.Project, j.User, Viewer{Name: u.Name, Admin: u.Admin}) >= Cancellable {
		return nil
	}
	return errorf(ErrForbidden, "user %q may not change job %q of namespace %q: its owner %q, a manager of billing project %q or an admin can",
		u.Name, j.ID, j.Namespace, j.User, j.Project)
}

func (s *nomadBook) applyRegisterNomadJob(c *RegisterNomadJob) any {
	if err := checkNomadName("namespace", c.Namespace); err != nil {
		return err
	}
	if err := checkNomadName("job ID", c.ID); err != nil {
		return err
	}
	if len(c.Spec) > MaxNomadSpecBytes {
		return errorf(ErrInvalid, "the job's spec is %d bytes; a Nomad job may have at most %d", len(c.Spec), MaxNomadSpecBytes)
	}
	if c.Template != (c.Batch == nil) {
		return errorf(ErrInvalid, "a template registers no batch, and any other job one")
	}
	u, uerr := s.liveUser(c.User)
	if uerr != nil {
		return uerr
	}
	if err := s.submitter(c.Project, u); err != nil {
		return err
	}
	key := NomadKey{c.Namespace, c.ID}
	cur := s.nomadJobs[key]
	if c.EnforceIndex {
		switch {
		case c.JobModifyIndex == 0 && cur != nil:
			return errorf(ErrConflict, "job %q already exists in namespace %q (enforce index 0: register only a new job)", c.ID, c.Namespace)
		case c.JobModifyIndex != 0 && (cur == nil || cur.JobModifyIndex != c.JobModifyIndex):
			have := uint64(0)
			if cur != nil {
				have = cur.JobModifyIndex
			}
			return errorf(ErrConflict, "job %q: enforce index %d, but its job modify index is %d", c.ID, c.JobModifyIndex, have)
		}
	}
	if cur != nil && !cur.Stopped && bytes.Equal(cur.Spec, c.Spec) {
		return &NomadResult{Job: cur.copy(), Unchanged: true}
	}
	if cur != nil {
		if err := s.nomadControl(cur, u); err != nil {
			return err
		}
	}
	if cur == nil && len(s.nomadJobs) >= MaxNomadJobs {
		return errorf(ErrConflict, "%d Nomad jobs are kept, the most there may be: purge some (nomad job stop -purge)", len(s.nomadJobs))
	}
	held := s.nomadHeld[c.Project]
	if cur == nil && held.Jobs >= MaxNomadJobsPerProject {
		return errorf(ErrConflict, "billing project %q keeps %d Nomad jobs, the most one may: purge some (nomad job stop -purge)", c.Project, held.Jobs)
	}
	grow := int64(len(c.Spec))
	if cur != nil && cur.Project == c.Project {
		grow -= int64(len(cur.Spec))
	}
	if held.Bytes+grow > MaxNomadBytesPerProject {
		return errorf(ErrConflict, "billing project %q's Nomad jobs would hold %d bytes of specs, past %d: purge some", c.Project, held.Bytes+grow, int64(MaxNomadBytesPerProject))
	}
	res := &NomadResult{}
	if c.Batch != nil {
		if c.Batch.User != c.User || c.Batch.BillingProject != c.Project {
			return errorf(ErrInvalid, "the job's batch belongs to its user and project")
		}
		out := s.applyCreateBatch(c.Batch)
		ur, ok := out.(*UpdateResult)
		if !ok {
			return out // the refusal
		}
		res.Batch = ur.Batch
	}
	if cur == nil {
		cur = &NomadJob{Namespace: c.Namespace, ID: c.ID, CreateIndex: s.index}
		s.nomadJobs[key] = cur
	} else {
		cur.Version++
		s.cancelNomadBatch(cur, c.Now, "replaced by version "+strconv.FormatUint(cur.Version, 10)+" of Nomad job "+c.ID)
		s.holdNomad(cur, -1)
	}
	cur.User, cur.Project, cur.Spec = c.User, c.Project, bytes.Clone(c.Spec)
	s.holdNomad(cur, 1)
	cur.ModifyIndex, cur.JobModifyIndex, cur.SubmitTime = s.index, s.index, c.Now
	cur.Stopped, cur.Template, cur.Parent = false, c.Template, c.Parent
	cur.NextLaunch, cur.ProhibitOverlap = c.NextLaunch, c.ProhibitOverlap
	if res.Batch != 0 {
		cur.Batches = append(cur.Batches, NomadVersion{Version: cur.Version, Batch: res.Batch})
		if n := len(cur.Batches); n > MaxNomadVersions {
			cur.Batches = slices.Delete(cur.Batches, 0, n-MaxNomadVersions)
		}
	}
	res.Job = cur.copy()
	return res
}

func (s *nomadBook) applyLaunchNomadJob(c *LaunchNomadJob) any {
	parent := s.nomadJobs[c.Parent]
	switch {
	case parent == nil:
		return errorf(ErrNotFound, "job %q is not in namespace %q", c.Parent.ID, c.Parent.Namespace)
	case !parent.Template:
		return errorf(ErrInvalid, "job %q is neither periodic nor parameterized: it has no children to launch", c.Parent.ID)
	case parent.Stopped:
		return errorf(ErrConflict, "job %q is stopped", c.Parent.ID)
	case c.Child.Namespace != c.Parent.Namespace || c.Child.Parent != c.Parent.ID || c.Child.Template:
		return errorf(ErrInvalid, "a child runs in its parent's namespace, names its parent and is no template")
	case c.At != 0 && !c.Skip && c.Child.User != parent.User:
		return errorf(ErrInvalid, "a periodic launch runs as the user who registered the job")
	case len(c.Token) > MaxNomadIDBytes:
		return errorf(ErrInvalid, "an idempotency token has at most %d bytes", MaxNomadIDBytes)
	}
	if c.At != 0 {
		if parent.NextLaunch != c.At {
			return errorf(ErrConflict, "job %q: the launch due at %d was made already (next: %d)", c.Parent.ID, c.At, parent.NextLaunch)
		}
		parent.NextLaunch = c.Next
		if c.Skip || parent.ProhibitOverlap && s.nomadChildRuns(parent) {
			return &NomadResult{Job: parent.copy(), Skipped: true}
		}
	}
	if c.Token != "" {
		if id, ok := parent.DispatchTokens[c.Token]; ok {
			if child := s.nomadJobs[NomadKey{c.Parent.Namespace, id}]; child != nil {
				return &NomadResult{Job: child.copy(), Unchanged: true}
			}
		}
	}
	if s.nomadJobs[NomadKey{c.Child.Namespace, c.Child.ID}] != nil {
		return errorf(ErrConflict, "job %q exists already", c.Child.ID)
	}
	out := s.applyRegisterNomadJob(&c.Child)
	res, ok := out.(*NomadResult)
	if !ok {
		return out
	}
	child := s.nomadJobs[NomadKey{c.Child.Namespace, c.Child.ID}]
	child.DispatchToken = c.Token
	parent.LastChild = c.Child.ID
	parent.Launched++
	parent.ModifyIndex = s.index
	if c.Token != "" {
		if parent.DispatchTokens == nil {
			parent.DispatchTokens = map[string]string{}
		}
		if len(parent.DispatchTokens) >= MaxDispatchTokens {
			// Forget the token of the oldest child (a purged one first),
			// in the tokens' order: every server forgets the same.
			oldest, at := "", uint64(0)
			for _, tok := range sortedKeys(parent.DispatchTokens) {
				created := uint64(0) // purged
				if ch := s.nomadJobs[NomadKey{c.Parent.Namespace, parent.DispatchTokens[tok]}]; ch != nil {
					created = ch.CreateIndex
				}
				if oldest == "" || created < at {
					oldest, at = tok, created
				}
			}
			delete(parent.DispatchTokens, oldest)
		}
		parent.DispatchTokens[c.Token] = c.Child.ID
	}
	res.Job = child.copy()
	return res
}

// nomadChildRuns reports whether a template's last child is unfinished.
func (s *nomadBook) nomadChildRuns(parent *NomadJob) bool {
	child := s.nomadJobs[NomadKey{parent.Namespace, parent.LastChild}]
	if child == nil || child.Stopped || len(child.Batches) == 0 {
		return false
	}
	b, ok := s.batches[child.Batches[len(child.Batches)-1].Batch]
	return ok && b.Completed == 0
}

// NomadDue lists the periodic templates whose next launch is due at now,
// at most limit.
func (s *State) NomadDue(now int64, limit int) []NomadJob {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []NomadJob
	for _, j := range s.nomadJobs {
		if j.Template && !j.Stopped && j.NextLaunch != 0 && j.NextLaunch <= now {
			out = append(out, j.copy())
		}
	}
	slices.SortFunc(out, func(a, b NomadJob) int {
		return compareNomadKeys(NomadKey{a.Namespace, a.ID}, NomadKey{b.Namespace, b.ID})
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// NextNomadLaunch is the earliest next launch of a periodic template (0:
// none).
func (s *State) NextNomadLaunch() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	next := int64(0)
	for _, j := range s.nomadJobs {
		if j.Template && !j.Stopped && j.NextLaunch != 0 && (next == 0 || j.NextLaunch < next) {
			next = j.NextLaunch
		}
	}
	return next
}

// cancelNomadBatch cancels the batch of a job's current version if it
// still runs.
func (s *nomadBook) cancelNomadBatch(j *NomadJob, now int64, reason string) uint64 {
	if len(j.Batches) == 0 {
		return 0
	}
	id := j.Batches[len(j.Batches)-1].Batch
	b, ok := s.batches[id]
	if !ok || b.Cancelled || b.Completed != 0 {
		return 0
	}
	s.cancelBatch(b, reason, now)
	return id
}

func (s *nomadBook) applyDeregisterNomadJob(c *DeregisterNomadJob) any {
	key := NomadKey{c.Namespace, c.ID}
	cur := s.nomadJobs[key]
	if cur == nil {
		return errorf(ErrNotFound, "job %q is not in namespace %q", c.ID, c.Namespace)
	}
	if c.GC {
		if !s.nomadForgettable(cur) || !c.Purge {
			return errorf(ErrConflict, "job %q still has a batch in the state: it is not the leader's to purge", c.ID)
		}
	} else {
		u, err := s.liveUser(c.User)
		if err != nil {
			return err
		}
		if err := s.nomadControl(cur, u); err != nil {
			return err
		}
	}
	res := &NomadResult{}
	if !cur.Stopped {
		res.Batch = s.cancelNomadBatch(cur, c.Now, "Nomad job "+c.ID+" stopped by "+c.User)
		cur.Stopped = true
		cur.ModifyIndex = s.index
	}
	res.Job = cur.copy()
	if c.Purge {
		s.holdNomad(cur, -1)
		delete(s.nomadJobs, key)
	}
	return res
}

// nomadForgettable reports whether a job's batches all left the state.
func (s *nomadBook) nomadForgettable(j *NomadJob) bool {
	if j.Template || len(j.Batches) == 0 {
		return false
	}
	_, live := s.batches[j.Batches[len(j.Batches)-1].Batch]
	return !live
}

// checkNomadName bounds a Nomad name: not empty, at most MaxNomadIDBytes,
// no control characters (a job ID may hold '/', as a child's does).
func checkNomadName(what, s string) *ApplyError {
	if s == "" || len(s) > MaxNomadIDBytes || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errorf(ErrInvalid, "%s %.40q: 1 to %d bytes without control characters", what, s, MaxNomadIDBytes)
	}
	return nil
}

func (j *NomadJob) copy() NomadJob {
	out := *j
	out.Batches = slices.Clone(j.Batches)
	out.DispatchTokens = maps.Clone(j.DispatchTokens)
	return out
}

// NomadJob returns a registered Nomad job.
func (s *State) NomadJob(namespace, id string) (NomadJob, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	j, ok := s.nomadJobs[NomadKey{namespace, id}]
	if !ok {
		return NomadJob{}, false
	}
	return j.copy(), true
}

// NomadJobs returns up to limit registered Nomad jobs of the namespaces
// visible (nil: all) whose IDs start with prefix, ordered by namespace
// and ID, after the key after.
func (s *State) NomadJobs(visible func(namespace string) bool, prefix string, after NomadKey, limit int) []NomadJob {
	s.mu.RLock()
	keys := make([]NomadKey, 0, len(s.nomadJobs))
	for k := range s.nomadJobs {
		if strings.HasPrefix(k.ID, prefix) && (visible == nil || visible(k.Namespace)) && nomadAfter(k, after) {
			keys = append(keys, k)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(keys, compareNomadKeys)
	if len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]NomadJob, 0, len(keys))
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, k := range keys {
		if j, ok := s.nomadJobs[k]; ok {
			out = append(out, j.copy())
		}
	}
	return out
}

func nomadAfter(k, after NomadKey) bool {
	if after == (NomadKey{}) {
		return true
	}
	return k.Namespace > after.Namespace || k.Namespace == after.Namespace && k.ID > after.ID
}

func compareNomadKeys(a, b NomadKey) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

func sortedNomadKeys(m map[NomadKey]*NomadJob) []NomadKey {
	keys := make([]NomadKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareNomadKeys)
	return keys
}

// NomadForgettable lists, at most limit, the Nomad jobs whose batches all
// left the state for the history store: a job that is not a template and
// whose last version's batch is forgotten (the servers' retention passed
// since it completed). The leader purges them, as Nomad's job GC does
// dead batch jobs; their batches read on from the history store.
func (s *State) NomadForgettable(limit int) []NomadKey {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []NomadKey
	for k, j := range s.nomadJobs {
		if s.nomadForgettable(j) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, compareNomadKeys)
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
