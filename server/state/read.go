package state

import (
	"sort"
	"time"

	"github.com/drover-sched/drover/billing"

	"github.com/drover-sched/drover/api"
)

// PageSize is the number of items in one page of a listing.
const PageSize = 50

func unixTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

func timePtr(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := unixTime(ns)
	return &t
}

func (b *Batch) toAPI() api.Batch {
	out := api.Batch{
		ID:             int64(b.ID),
		Name:           b.Name,
		User:           b.User,
		BillingProject: b.BillingProject,
		Attributes:     b.Attributes,
		State:          api.BatchRunning,
		Cancelled:      b.Cancelled,
		NJobs:          b.nJobs,
		NPending:       b.counts[Pending],
		NReady:         b.counts[Ready],
		NRunning:       b.counts[Running] + b.counts[Creating],
		NSucceeded:     b.counts[Success],
		NFailed:        b.counts[Failed],
		NCancelled:     b.counts[Cancelled],
		NError:         b.counts[Error],
		NUpdates:       int64(len(b.updates)),
		TimeCreated:    unixTime(b.Created),
		TimeCompleted:  timePtr(b.Completed),
	}
	out.NCompleted = out.NSucceeded + out.NFailed + out.NCancelled + out.NError
	out.Cost = b.cost(time.Now().UnixNano())
	if b.Completed != 0 {
		out.State = api.BatchComplete
	}
	return out
}

// Viewer is who is asking; it decides which batches are visible.
type Viewer struct {
	Name  string
	Admin bool
}

func (s *State) visible(b *Batch, v Viewer) bool {
	return v.Admin || s.isMember(b.BillingProject, v.Name)
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
func (s *State) Access(id uint64, v Viewer) BatchAccess {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[id]
	if !ok {
		return NoBatch
	}
	return s.accessLocked(b.BillingProject, b.User, v)
}

// AccessTo is what the viewer may do with a batch of owner in project
// (for batches the state no longer holds: the history store's).
func (s *State) AccessTo(project, owner string, v Viewer) BatchAccess {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.accessLocked(project, owner, v)
}

func (s *State) accessLocked(project, owner string, v Viewer) BatchAccess {
	switch {
	case v.Admin:
		return Owned
	case !s.isMember(project, v.Name):
		return Hidden
	}
	p := s.projects[project]
	role := ""
	if p != nil {
		role = p.role(v.Name)
	}
	switch {
	case owner == v.Name && (role == RoleMember || role == RoleManager):
		return Owned
	case role == RoleManager:
		return Cancellable
	}
	return Visible
}

// VisibleProjects lists the billing projects whose batches the viewer
// sees (nil: all, for an admin).
func (s *State) VisibleProjects(v Viewer) []string {
	if v.Admin {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []string{}
	for _, name := range sortedKeys(s.projects) {
		if s.isMember(name, v.Name) {
			out = append(out, name)
		}
	}
	return out
}

// Batch returns a batch's status.
func (s *State) Batch(id uint64) (api.Batch, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[id]
	if !ok {
		return api.Batch{}, false
	}
	return b.toAPI(), true
}

// ListBatches returns up to PageSize visible batches matching f with IDs
// below lastID (0: from the newest), newest first.
func (s *State) ListBatches(v Viewer, f BatchFilter, lastID uint64) api.BatchList {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := api.BatchList{Batches: []api.Batch{}}
	i := len(s.batchIDs)
	if lastID > 0 {
		i = sort.Search(len(s.batchIDs), func(k int) bool { return s.batchIDs[k] >= lastID })
	}
	for i--; i >= 0; i-- {
		b := s.batches[s.batchIDs[i]]
		if !s.visible(b, v) || !f(b) {
			continue
		}
		out.Batches = append(out.Batches, b.toAPI())
		if len(out.Batches) == PageSize {
			if i > 0 {
				out.LastID = int64(b.ID)
			}
			break
		}
	}
	return out
}

// ListJobs returns up to PageSize jobs of a batch matching f with IDs above
// lastID.
func (s *State) ListJobs(batch uint64, f JobFilter, lastID uint32) (api.JobList, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[batch]
	if !ok {
		return api.JobList{}, false
	}
	out := api.JobList{Jobs: []api.Job{}}
	for id := lastID + 1; int(id) <= len(b.jobs); id++ {
		j := &b.jobs[id-1]
		if j.state == Staged {
			continue
		}
		g := b.groupOf(id)
		if !f(b, id, j, g) {
			continue
		}
		out.Jobs = append(out.Jobs, s.jobToAPI(b, id, j, g))
		if len(out.Jobs) == PageSize {
			if int(id) < len(b.jobs) {
				out.LastID = int64(id)
			}
			break
		}
	}
	return out, true
}

// Job returns one job.
func (s *State) Job(batch uint64, id uint32) (api.Job, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[batch]
	if !ok || id < 1 || int(id) > len(b.jobs) || b.jobs[id-1].state == Staged {
		return api.Job{}, false
	}
	return s.jobToAPI(b, id, &b.jobs[id-1], b.groupOf(id)), true
}

// LogTarget returns the attempt of a job whose log to read: the given one if
// it exists, else the latest. ok is false when the job does not exist;
// attempt is 0 when it never ran.
func (s *State) LogTarget(batch uint64, id uint32, attempt int) (n int, ok bool) {
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

func (s *State) instanceName(id uint32) string {
	if inst, ok := s.instances[id]; ok {
		return inst.Name
	}
	return ""
}

func (s *State) jobToAPI(b *Batch, id uint32, j *job, g *group) api.Job {
	now := time.Now().UnixNano() // a running attempt's cost grows until it ends
	spec := g.spec
	out := api.Job{
		BatchID:    int64(b.ID),
		JobID:      int64(id),
		Name:       jobName(g, id),
		ArrayIndex: int64(id - g.first),
		State:      j.state.String(),
		Attempts:   []api.Attempt{},
		Command:    spec.Command,
		CPU:        float64(spec.CPUMilli) / 1000,
		Memory:     spec.Memory,
		Timeout:    float64(spec.TimeoutMs) / 1000,
		Retries:    int(spec.Retries),
		AlwaysRun:  spec.AlwaysRun,
		Attributes: spec.Attributes,
		Regions:    spec.Regions(),
		Pool:       spec.Pool(),
	}
	if typ, n := spec.GPUs(); n > 0 {
		out.GPUType, out.GPUs = typ, int(n)
	}
	if spec.Where != nil {
		out.MachineType = spec.Where.MachineType
	}
	if r := spec.Run; r != nil {
		out.Image, out.Network, out.MaxProcesses = r.Image, r.Network, r.MaxProcesses
		for _, f := range r.Inputs {
			out.Inputs = append(out.Inputs, api.InputFile{Name: f.Name, Source: f.URL, Path: f.Path})
		}
		for _, f := range r.Outputs {
			out.Outputs = append(out.Outputs, api.OutputFile{Name: f.Name, Path: f.Path, Destination: f.URL})
		}
	}
	for _, ri := range g.parents {
		r := b.ranges[ri].r
		out.Parents = append(out.Parents, api.IDRange{int64(r.Lo), int64(r.Hi)})
	}
	for _, rec := range b.history[id] {
		out.Attempts = append(out.Attempts, s.attemptToAPI(rec, false, g.spec, now))
	}
	if j.attempt > 0 {
		cur := attemptRec{Attempt: j.attempt, Instance: j.instance, Start: j.start, End: j.end, Exit: j.exit, Outcome: j.outcome, Message: b.messages[id]}
		if u, ok := b.usage[id]; ok {
			cur.Usage = &u
		}
		out.Attempts = append(out.Attempts, s.attemptToAPI(cur, j.state == Running, g.spec, now))
		if j.state.Final() && (j.outcome == OutcomeSuccess || j.outcome == OutcomeFailed) {
			code := int(j.exit)
			out.ExitCode = &code
		}
	}
	out.Message = b.messages[id]
	cancelled := "batch cancelled"
	if b.CancelReason != "" {
		cancelled += ": " + b.CancelReason
	}
	switch {
	case j.state == Cancelled && out.Message == "" && b.Cancelled:
		out.Message = cancelled
	case j.state == Cancelled && out.Message == "":
		out.Message = "a parent job did not succeed"
	case j.state == Cancelled && b.Cancelled && j.outcome == OutcomeCancelled:
		// Its worker killed it for the cancel: the job says why, its
		// attempt keeps what the worker said.
		out.Message = cancelled
	case j.state == Running && b.Cancelled:
		out.Message = cancelled + "; its running attempt is being stopped"
	}
	return out
}

func (s *State) attemptToAPI(rec attemptRec, running bool, spec *Spec, now int64) api.Attempt {
	a := api.Attempt{
		Attempt:   int(rec.Attempt),
		Instance:  s.instanceName(rec.Instance),
		StartTime: timePtr(rec.Start),
		EndTime:   timePtr(rec.End),
		Message:   rec.Message,
		State:     rec.Outcome.String(),
	}
	if inst, ok := s.instances[rec.Instance]; ok {
		a.Cluster, a.Region = inst.Cluster, inst.Region
	}
	if u := rec.Usage; u != nil {
		a.Usage = &api.Usage{
			CPUSeconds: float64(u.CPUMillis) / 1000, PeakMemory: u.PeakMemory, BytesIn: u.BytesIn, BytesOut: u.BytesOut,
			ImageSeconds: float64(u.ImageMillis) / 1000, InputSeconds: float64(u.InputMillis) / 1000, OutputSeconds: float64(u.OutputMillis) / 1000,
		}
	}
	if running {
		a.State = api.JobRunning
		a.EndTime = nil
	}
	if rec.Start != 0 && spec != nil {
		perHour, lines := s.price(spec, s.instances[rec.Instance], rec.Start)
		end := rec.End
		if running || end == 0 {
			end = now
		}
		cost := billing.Cost(perHour, rec.Start, end)
		a.Cost, a.PricePerHour = &cost, perHour.Rate()
		for _, l := range lines {
			a.CostLines = append(a.CostLines, api.CostLine{Resource: l.Resource, Rate: l.Rated, Version: int(l.Version), Units: l.Units, PricePerHour: l.PerHour})
		}
	}
	if !running && (rec.Outcome == OutcomeSuccess || rec.Outcome == OutcomeFailed) {
		code := int(rec.Exit)
		a.ExitCode = &code
	}
	return a
}

// Counts returns cluster-wide job counts by state and batch counts, for
// metrics: totals kept as the state changes, not a walk.
func (s *State) Counts() (byState [numStates]int64, batches, running int) {
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

// AdmissionFor reads what admission needs for a submission to batch (0: a
// new batch of user in project) with idempotency key (may be empty).
func (s *State) AdmissionFor(batch uint64, user, project, key string) Admission {
	s.mu.RLock()
	defer s.mu.RUnlock()
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
