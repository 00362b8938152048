package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/efficiency"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
	"github.com/drover-sched/drover/server/why"
)

// batchHandlers serve batches and their jobs: submission (admission
// included), updates, cancellation, reads (from the history store for
// batches that left the state), job logs and why a job waits.
type batchHandlers struct{ *Server }

// submitted validates what a create or update request submits: inline
// jobs, or a number of jobs to reserve.
func submitted(nJobs int64, jobs []api.JobSpec) ([]state.JobEntry, error) {
	if nJobs < 0 || nJobs > api.MaxJobsPerBatch {
		return nil, codedf(http.StatusBadRequest, "n_jobs is %d; it must be between 0 and %d", nJobs, int64(api.MaxJobsPerBatch))
	}
	entries, err := apiview.JobEntries(jobs)
	if err != nil {
		return nil, badRequest(err)
	}
	return entries, nil
}

// checkCallback refuses a callback URL that is malformed or goes
// anywhere the servers' admins did not allow (the leader checks again
// before it POSTs).
func (s *batchHandlers) checkCallback(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := api.ParseCallback("callback", raw)
	if err != nil {
		return err
	}
	if len(s.cfg.CallbackAllow) == 0 {
		return fmt.Errorf("callback %.100q: this server allows no callback destinations (an admin names them with the server setting -callback-allow)", raw)
	}
	if !api.CallbackAllowed(u, s.cfg.CallbackAllow) {
		return fmt.Errorf("callback %.100q is not under a destination the servers allow (server setting -callback-allow)", raw)
	}
	return nil
}

func (s *batchHandlers) handleCreateBatch(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CreateBatchRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	cmd, err := s.createCommand(userOf(r), &req)
	if err != nil {
		return nil, err
	}
	res, err := s.apply(cmd)
	if err != nil {
		return nil, err
	}
	ur := res.(*state.UpdateResult)
	b, _ := s.reads.Batch(ur.Batch)
	out := api.CreateBatchResponse{Batch: b}
	if ur.Update > 0 {
		out.UpdateID, out.StartJobID = int64(ur.Update), int64(ur.Start)
	}
	return bulk(createdStatus(ur.Existing), out), nil
}

// createCommand checks a batch's creation, admits it (the limits checked
// before a command reaches Raft) and returns its command: the native
// API's and the Nomad API's one way in.
func (s *batchHandlers) createCommand(u state.User, req *api.CreateBatchRequest) (*state.CreateBatch, error) {
	if req.BillingProject == "" {
		req.BillingProject = s.cfg.DefaultBillingProject
	}
	if err := errors.Join(api.ValidateName("name", req.Name), api.ValidateName("billing_project", req.BillingProject),
		api.ValidateName("idempotency_key", req.IdempotencyKey), api.ValidateAttributes(req.Attributes),
		api.ValidateCancelAfter(req.CancelAfterNFailures), s.checkCallback(req.Callback), api.ValidateBatchQueue(req.Queue, req.Priority),
		api.ValidateSLO(req.SLOSeconds, req.Deadline, time.Now())); err != nil {
		return nil, badRequest(err)
	}
	entries, err := submitted(req.NJobs, req.Jobs)
	if err != nil {
		return nil, err
	}
	groups, err := s.groupDecls(req.JobGroups, req.Jobs, entries, 0)
	if err != nil {
		return nil, err
	}
	size := int64(len(req.Name) + len(req.BillingProject) + len(req.IdempotencyKey) + len(req.Callback) + len(req.Queue))
	for k, v := range req.Attributes {
		size += int64(len(k) + len(v))
	}
	if err := s.admit(submission{user: u.Name, by: u.Name, project: req.BillingProject, key: req.IdempotencyKey, reserve: req.NJobs, entries: entries, batchBytes: size,
		queue: req.Queue, priority: req.Priority, groups: groups}); err != nil {
		return nil, err
	}
	return apiview.CreateBatch(u.Name, req, entries, groups, time.Now()), nil
}

// groupDecls checks the job groups a request declares (their callbacks
// against the allowed destinations too) and the groups its jobs name,
// and returns the command's declarations (see apiview.GroupDecls); batch
// is the batch they go into (0: a new one).
func (s *batchHandlers) groupDecls(groups []api.JobGroupSpec, specs []api.JobSpec, entries []state.JobEntry, batch uint64) ([]state.JobGroupDecl, error) {
	if err := api.ValidateJobGroups(groups); err != nil {
		return nil, badRequest(err)
	}
	for i := range groups {
		if err := s.checkCallback(groups[i].Callback); err != nil {
			return nil, badRequest(fmt.Errorf("job_groups[%d] (%s): %w", i, groups[i].Path, err))
		}
	}
	var exists func(string) bool
	if batch != 0 {
		exists = func(path string) bool {
			_, ok := s.state.JobGroupID(batch, path)
			return ok
		}
	}
	decls, err := apiview.GroupDecls(groups, specs, entries, exists)
	if err != nil {
		return nil, badRequest(err)
	}
	return decls, nil
}

// visibleBatch checks that the batch exists and that the caller may see it.
func (s *batchHandlers) visibleBatch(r *http.Request) (uint64, error) {
	return s.batchAccess(r, state.Visible)
}

// batchAccess checks that the batch exists and that the caller may do
// what needs level with it.
func (s *batchHandlers) batchAccess(r *http.Request, level state.BatchAccess) (uint64, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return 0, err
	}
	u := userOf(r)
	got := s.state.Access(id, viewerOf(r))
	var b api.Batch // read only to explain a refusal
	if got == state.NoBatch {
		// Not in memory: it may have moved to the history store.
		old, err := s.archivedBatch(r, id)
		if err != nil {
			return 0, err
		}
		b = old.Batch
		got = s.state.AccessTo(b.BillingProject, b.User, viewerOf(r))
		if got >= state.Visible && level > state.Visible {
			when := "its jobs ended"
			if b.TimeCompleted != nil {
				when = "it completed on " + b.TimeCompleted.Format(time.RFC3339)
			}
			return 0, codedf(http.StatusConflict, "batch %d is finished and kept in the history store (%s): it can be read but not cancelled or added to; submit a new batch", id, when)
		}
	}
	if got < level && b.ID == 0 {
		b, _ = s.reads.Batch(id)
	}
	switch {
	case got == state.Hidden:
		return 0, codedf(http.StatusForbidden, "batch %d belongs to billing project %q, which user %q is not a member of", id, b.BillingProject, u.Name)
	case got < level:
		what := "cancel it: its owner, a manager of the project or an admin can"
		if level == state.Owned {
			what = "add jobs to it: only its owner (a member or manager of the project) or an admin can"
		}
		return 0, codedf(http.StatusForbidden, "user %q may read batch %d of billing project %q but not %s", u.Name, id, b.BillingProject, what)
	}
	return id, nil
}

func (s *batchHandlers) handleGetBatch(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := s.visibleBatch(r)
	if err != nil {
		return nil, err
	}
	b, ok := s.reads.Batch(id)
	if !ok {
		old, err := s.archivedBatch(r, id)
		if err != nil {
			return nil, err
		}
		return old.Batch, nil
	}
	if s.waiting != nil && !isStale(r) {
		b.Waiting = s.waiting.Batch(id)
		b.WaitingSummary = api.SummarizeWaiting(b.Waiting)
	}
	b.Actions = batchActions(s.state.Access(id, viewerOf(r)), &b)
	return b, nil
}

// batchActions are what a caller with access level got may do with b now:
// the levels handleCancelBatch and handleCreateUpdate require, offered
// while the batch runs (a complete batch soon leaves for the history
// store, which takes neither, and reads the same from there).
func batchActions(got state.BatchAccess, b *api.Batch) []string {
	var out []string
	if got >= state.Cancellable && !b.Complete() && !b.Cancelled {
		out = append(out, api.ActionCancel)
	}
	if got >= state.Owned && !b.Complete() && !b.Cancelled {
		out = append(out, api.ActionUpdate)
	}
	if got >= state.Owned && b.NFailed+b.NError+b.NCancelled > 0 {
		out = append(out, api.ActionRetry)
	}
	return out
}

// handleBatchStages answers the first stages of a batch's DAG (a bounded
// read: state.MaxStages job entries at most, never every job).
func (s *batchHandlers) handleBatchStages(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := s.visibleBatch(r)
	if err != nil {
		return nil, err
	}
	recs, more, ok := s.state.Stages(id)
	if !ok {
		return nil, codedf(http.StatusNotFound, "batch %d is finished and kept in the history store, which keeps its jobs but not its stages", id)
	}
	out := api.BatchStages{Stages: make([]api.Stage, 0, len(recs)), More: more}
	for i, st := range recs {
		as := api.Stage{Name: st.Name, FirstJob: int64(st.First), NJobs: int64(st.Count)}
		for _, p := range st.Parents {
			as.Parents = append(as.Parents, api.IDRange{int64(p.Lo), int64(p.Hi)})
			// Stages are in job ID order: the first that ends at or
			// after the range's start, then on while they begin in it.
			k := sort.Search(i, func(k int) bool { return recs[k].First+recs[k].Count-1 >= p.Lo })
			for ; k < i && recs[k].First <= p.Hi; k++ {
				if !slices.Contains(as.DependsOn, k) {
					as.DependsOn = append(as.DependsOn, k)
				}
			}
		}
		out.Stages = append(out.Stages, as)
	}
	return out, nil
}

func (s *batchHandlers) handleListBatches(w http.ResponseWriter, r *http.Request) (any, error) {
	q, err := api.ParseBatchQuery(r.URL.Query().Get("q"))
	if err != nil {
		return nil, badRequest(err)
	}
	last, err := queryID(r, "last_id")
	if err != nil {
		return nil, err
	}
	v := viewerOf(r)
	live := s.reads.ListBatches(v, apiview.BatchFilter(q), last)
	if s.history == nil {
		return live, nil
	}
	st, err := s.history.Store()
	var old api.BatchList
	if err == nil {
		old, err = st.ListBatches(r.Context(), q, s.state.VisibleProjects(v), last)
	}
	if err != nil {
		// What is in memory is still worth showing; say what is missing.
		w.Header().Set(HistoryUnavailableHeader, err.Error())
		return live, nil
	}
	return mergeBatches(live, old, func(id int64) bool { return s.state.HasBatch(uint64(id)) }), nil
}

func (s *batchHandlers) handleCancelBatch(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := s.batchAccess(r, state.Cancellable)
	if err != nil {
		return nil, err
	}
	if _, err := s.apply(&state.CancelBatch{Now: time.Now().UnixNano(), Batch: id, Reason: "cancelled by " + userOf(r).Name}); err != nil {
		return nil, err
	}
	b, _ := s.reads.Batch(id)
	return b, nil
}

func updateResponse(ur *state.UpdateResult) api.UpdateResponse {
	return api.UpdateResponse{BatchID: int64(ur.Batch), UpdateID: int64(ur.Update), StartJobID: int64(ur.Start), NJobs: int64(ur.N), Committed: ur.Committed}
}

func (s *batchHandlers) handleCreateUpdate(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := s.batchAccess(r, state.Owned)
	if err != nil {
		return nil, err
	}
	var req api.CreateUpdateRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	if err := api.ValidateName("idempotency_key", req.IdempotencyKey); err != nil {
		return nil, badRequest(err)
	}
	entries, err := submitted(req.NJobs, req.Jobs)
	if err != nil {
		return nil, err
	}
	groups, err := s.groupDecls(req.JobGroups, req.Jobs, entries, id)
	if err != nil {
		return nil, err
	}
	by := userOf(r).Name
	if err := s.admit(submission{batch: id, by: by, key: req.IdempotencyKey, reserve: req.NJobs, entries: entries, groups: groups}); err != nil {
		return nil, err
	}
	cmd := &state.CreateUpdate{Now: time.Now().UnixNano(), Batch: id, Key: req.IdempotencyKey, NJobs: uint32(req.NJobs), Jobs: entries,
		Policy: state.PolicyStorage, User: by, Groups: groups}
	if cmd.Key != "" {
		cmd.Digest = cmd.RequestDigest()
	}
	res, err := s.apply(cmd)
	if err != nil {
		return nil, err
	}
	ur := res.(*state.UpdateResult)
	return bulk(createdStatus(ur.Existing), updateResponse(ur)), nil
}

// ownedUpdate reads the batch and update IDs of an update path, checking
// that the caller may add jobs to the batch.
func (s *batchHandlers) ownedUpdate(r *http.Request) (batch, update uint64, err error) {
	if batch, err = s.batchAccess(r, state.Owned); err != nil {
		return 0, 0, err
	}
	update, err = pathID(r, "update")
	return batch, update, err
}

func (s *batchHandlers) handleAddJobs(w http.ResponseWriter, r *http.Request) (any, error) {
	id, upd, err := s.ownedUpdate(r)
	if err != nil {
		return nil, err
	}
	var req api.AddJobsRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	if len(req.Jobs) == 0 {
		return nil, coded(http.StatusBadRequest, "jobs is empty; a bunch needs at least one job")
	}
	entries, err := apiview.JobEntries(req.Jobs)
	if err != nil {
		return nil, badRequest(err)
	}
	groups, err := s.groupDecls(req.JobGroups, req.Jobs, entries, id)
	if err != nil {
		return nil, err
	}
	by := userOf(r).Name
	if err := s.admit(submission{batch: id, by: by, entries: entries, intoUpdate: true, groups: groups}); err != nil {
		return nil, err
	}
	if _, err := s.apply(&state.AddJobs{Batch: id, Update: uint32(upd), Jobs: entries, Now: time.Now().UnixNano(), Policy: state.PolicyStorage, User: by, Groups: groups}); err != nil {
		return nil, err
	}
	return bulk(http.StatusOK, map[string]int{"accepted": len(entries)}), nil
}

func (s *batchHandlers) handleCommitUpdate(w http.ResponseWriter, r *http.Request) (any, error) {
	id, upd, err := s.ownedUpdate(r)
	if err != nil {
		return nil, err
	}
	res, err := s.apply(&state.CommitUpdate{Now: time.Now().UnixNano(), Batch: id, Update: uint32(upd)})
	if err != nil {
		return nil, err
	}
	return updateResponse(res.(*state.UpdateResult)), nil
}

func (s *batchHandlers) handleListJobs(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := s.visibleBatch(r)
	if err != nil {
		return nil, err
	}
	q, err := api.ParseJobQuery(r.URL.Query().Get("q"))
	if err != nil {
		return nil, badRequest(err)
	}
	last, err := queryID(r, "last_id")
	if err != nil {
		return nil, err
	}
	if last > math.MaxUint32 {
		last = math.MaxUint32
	}
	list, found := s.reads.ListJobs(id, apiview.JobFilter(q), uint32(last))
	if !found {
		st, err := s.historyStore(fmt.Sprintf("batch %d", id))
		if err != nil {
			return nil, err
		}
		if list, err = st.ListJobs(r.Context(), id, q, uint32(last)); err != nil {
			return nil, historyFailed(id, err)
		}
		return list, nil
	}
	// Why each Ready job waits, as a job read says it: from the leader's
	// last round, read once for the page (one lock, one round's words).
	if s.waiting != nil && !isStale(r) {
		stretches := s.waiting.Batch(id)
		for i := range list.Jobs {
			j := &list.Jobs[i]
			if j.State != api.JobReady {
				continue
			}
			for _, wt := range stretches {
				if j.JobID >= wt.FirstJob && j.JobID < wt.FirstJob+wt.Count {
					j.Waiting = &wt
					break
				}
			}
		}
	}
	return list, nil
}

// visibleJob reads the batch and job IDs of a job path, checking that the
// caller may see the batch.
func (s *batchHandlers) visibleJob(r *http.Request) (uint64, uint32, error) {
	id, err := s.visibleBatch(r)
	if err != nil {
		return 0, 0, err
	}
	jid, err := jobID(r)
	return id, jid, err
}

func jobID(r *http.Request) (uint32, error) {
	j, err := pathID(r, "job")
	if err != nil {
		return 0, err
	}
	if j > math.MaxUint32 {
		return 0, codedf(http.StatusNotFound, "job %d does not exist", j)
	}
	return uint32(j), nil
}

func (s *batchHandlers) handleGetJob(w http.ResponseWriter, r *http.Request) (any, error) {
	id, jid, err := s.visibleJob(r)
	if err != nil {
		return nil, err
	}
	j, found := s.reads.Job(id, jid)
	if !found && !s.state.HasBatch(id) {
		if j, err = s.archivedJob(r, id, jid); err != nil {
			return nil, err
		}
		found = true
	}
	if !found {
		return nil, codedf(http.StatusNotFound, "batch %d has no job %d", id, jid)
	}
	if s.waiting != nil && j.State == api.JobReady && !isStale(r) {
		j.Waiting = s.waiting.Job(id, jid)
	}
	return j, nil
}

// handleRetry runs final jobs of a batch again (state.RetryJobs): those
// in the states asked (failed and error by default) and among the IDs
// named (none: all), with the jobs cancelled because of them. Its owner
// or an admin may, within the spend limit and the queued-job limits.
func (s *batchHandlers) handleRetry(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := s.batchAccess(r, state.Owned)
	if err != nil {
		return nil, err
	}
	var req api.RetryRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return nil, err
		}
	}
	if err := req.Validate(); err != nil {
		return nil, badRequest(err)
	}
	cmd := &state.RetryJobs{Now: time.Now().UnixNano(), Batch: id, User: userOf(r).Name}
	for _, name := range req.StatesOrDefault() {
		st, _ := state.ParseJobState(name)
		cmd.States |= state.RetryStates(st)
	}
	for _, j := range req.JobIDs {
		cmd.Jobs = append(cmd.Jobs, state.Range{Lo: uint32(j), Hi: uint32(j)})
	}
	for _, rg := range req.JobRanges {
		cmd.Jobs = append(cmd.Jobs, state.Range{Lo: uint32(rg[0]), Hi: uint32(rg[1])})
	}
	var n int64
	var specs []state.JobEntry
	s.state.Read(func(r state.Reader) {
		if b := r.Batch(id); b != nil {
			n, specs = r.RetryCount(b, cmd.States, cmd.Jobs)
		}
	})
	if n == 0 {
		// Nothing to run again: nothing reaches the log (a job that
		// failed since runs again only through a retry admitted for it).
		return api.RetryResponse{BatchID: int64(id)}, nil
	}
	if err := s.admit(submission{batch: id, by: cmd.User, rerun: n, recheck: specs}); err != nil {
		return nil, err
	}
	res, err := s.apply(cmd)
	if err != nil {
		return nil, err
	}
	return api.RetryResponse{BatchID: int64(id), Retried: res.(*state.RetryResult).Retried}, nil
}

// handleEfficiency measures a batch's jobs' use against what they asked
// for (package efficiency), from the state or the history store.
func (s *batchHandlers) handleEfficiency(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := s.visibleBatch(r)
	if err != nil {
		return nil, err
	}
	var atts []efficiency.Attempt
	var last uint32
	var jobs int64
	partial := false
	for {
		if jobs >= api.MaxEfficiencyJobs {
			partial = true
			break
		}
		list, found := s.reads.ListJobs(id, nil, last)
		if !found {
			st, err := s.historyStore(fmt.Sprintf("batch %d", id))
			if err != nil {
				return nil, err
			}
			if list, err = st.ListJobs(r.Context(), id, api.JobQuery{}, last); err != nil {
				return nil, historyFailed(id, err)
			}
		}
		for i := range list.Jobs {
			atts = append(atts, efficiency.JobAttempts(&list.Jobs[i])...)
		}
		jobs += int64(len(list.Jobs))
		if list.LastID == 0 || len(list.Jobs) == 0 {
			break
		}
		last = uint32(list.LastID)
	}
	out := efficiency.Report(atts, efficiency.DefaultOptions())
	out.BatchID, out.Jobs, out.Partial = int64(id), jobs, partial
	return out, nil
}

// handleJobRestart stops a running job's attempt as a preemption does
// (SIGTERM, its grace, SIGKILL) and runs the job again at the head of its
// line, counted against neither its retries nor its lost attempts: the
// way out of an attempt that hangs. Whoever may cancel the batch may.
func (s *batchHandlers) handleJobRestart(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := s.batchAccess(r, state.Cancellable)
	if err != nil {
		return nil, err
	}
	jid, err := jobID(r)
	if err != nil {
		return nil, err
	}
	var at state.JobAt
	var found bool
	s.state.Read(func(r state.Reader) { at, found = r.Job(r.Batch(id), jid) })
	switch {
	case !found:
		return nil, codedf(http.StatusNotFound, "batch %d has no job %d", id, jid)
	case at.State != state.Running:
		return nil, codedf(http.StatusConflict, "job %d is %s: only a running job restarts (drover batch retry runs finished jobs again)", jid, at.State)
	}
	res, err := s.apply(&state.Preempt{Now: time.Now().UnixNano(), Attempts: []state.PreemptAttempt{
		{AttemptID: state.AttemptID{Batch: id, Job: jid, Attempt: at.Attempt}, Reason: "restarted by " + userOf(r).Name}}})
	if err != nil {
		return nil, err
	}
	out := api.JobRestart{BatchID: int64(id), JobID: int64(jid), Attempt: int(at.Attempt), Stopping: res.(*state.PreemptResult).Stopping > 0}
	if !out.Stopping {
		return nil, codedf(http.StatusConflict, "job %d's attempt %d is being stopped already, or has just ended", jid, at.Attempt)
	}
	return out, nil
}

// handleJobWhy says why a job is where it is: the parents it waits for, the
// reason the leader's last scheduling round recorded for a Ready job, or
// where it runs.
func (s *batchHandlers) handleJobWhy(w http.ResponseWriter, r *http.Request) (any, error) {
	id, jid, err := s.visibleJob(r)
	if err != nil {
		return nil, err
	}
	var jp view.JobPlace
	var found bool
	now := time.Now()
	s.state.Read(func(r state.Reader) { jp, found = view.Place(r, id, jid, now.UnixNano()) })
	if !found {
		return nil, codedf(http.StatusNotFound, "batch %d has no job %d", id, jid)
	}
	in := why.JobInput{Place: jp, Batch: id, Job: jid, Now: now, Clusters: s.state.Clusters(), Machines: s.state.Machines()}
	if s.waiting != nil && !isStale(r) {
		in.Round = s.waiting.Job(id, jid)
		if len(jp.Queues) > 0 {
			in.Queue = s.waiting.Queue(jp.Queues[0].Path)
		}
	}
	if s.autoscaler != nil {
		in.Autoscaling, in.LastRound = true, s.autoscaler.LastRound()
		_, _, in.Marks = s.state.AutoscalerSettings()
	}
	return why.Job(in), nil
}

// handleJobLog streams a job's log: its errors, found before the first
// byte is written, are answered by writeErr.
func (s *batchHandlers) handleJobLog(w http.ResponseWriter, r *http.Request) {
	noWriteDeadline(w) // logs can be long
	id, jid, attempt, err := s.logTarget(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	s.writeLog(w, r, id, jid, attempt)
}

// logTarget is the batch, job and attempt whose log a request reads.
func (s *batchHandlers) logTarget(r *http.Request) (uint64, uint32, int, error) {
	id, jid, err := s.visibleJob(r)
	if err != nil {
		return 0, 0, 0, err
	}
	want := 0
	if raw := r.URL.Query().Get("attempt"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 {
			return 0, 0, 0, codedf(http.StatusBadRequest, "attempt=%q is not a positive integer", raw)
		}
		want = n
	}
	attempt, found := s.state.LogTarget(id, jid, want)
	if !found && !s.state.HasBatch(id) {
		j, err := s.archivedJob(r, id, jid)
		if err != nil {
			return 0, 0, 0, err
		}
		attempt, found = latestAttempt(&j, want), true
	}
	switch {
	case !found:
		return 0, 0, 0, codedf(http.StatusNotFound, "batch %d has no job %d", id, jid)
	case attempt < 0:
		return 0, 0, 0, codedf(http.StatusNotFound, "job %d of batch %d has no attempt %d", jid, id, want)
	case attempt == 0:
		return 0, 0, 0, codedf(http.StatusNotFound, "job %d of batch %d has not started, so it has no log yet", jid, id)
	}
	return id, jid, attempt, nil
}

// writeLog streams an attempt's log in chunk order, one chunk in memory at
// a time. Chunks uploaded while another server led are on that server
// (unless the log store is shared): each other server is asked for its
// index and its chunks are relayed. A log that may be missing chunks (a
// server did not answer, or sequence numbers have holes) is still served,
// marked with the LogIncompleteHeader.
func (s *batchHandlers) writeLog(w http.ResponseWriter, r *http.Request, id uint64, jid uint32, attempt int) {
	ctx := r.Context()
	index, err := s.logs.Index(ctx, id, jid, attempt)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	q := r.URL.Query()
	truncated, err := s.logs.Truncated(ctx, id, jid, attempt)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	switch {
	case q.Get("chunks") == "index":
		// Another server is gathering this log: what is here.
		if truncated != "" {
			w.Header().Set(api.LogTruncatedHeader, truncated)
		}
		writeJSON(w, http.StatusOK, index)
		return
	case q.Has("chunk"):
		seq, err := strconv.Atoi(q.Get("chunk"))
		if _, ok := index[seq]; err != nil || !ok {
			s.writeErr(w, codedf(http.StatusNotFound, "no chunk %q of this log here", q.Get("chunk")))
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.FormatInt(index[seq], 10))
		if _, err := s.logs.CopyChunk(ctx, w, id, jid, attempt, seq); err != nil {
			s.log.Debug("send log chunk", "err", err)
		}
		return
	}
	offset := int64(0)
	if raw := q.Get("offset"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			s.writeErr(w, codedf(http.StatusBadRequest, "offset=%q is not a byte offset (a non-negative integer)", raw))
			return
		}
		offset = n
	}
	from := make(map[int]string, len(index)) // seq → peer HTTP address ("" here)
	size := make(map[int]int64, len(index))
	for seq, n := range index {
		from[seq], size[seq] = "", n
	}
	var silent []string
	if s.members != nil {
		for _, m := range s.members.Members() {
			if m.ID == s.cfg.ID {
				continue
			}
			if !m.Alive || m.HTTP == "" {
				silent = append(silent, m.ID)
				continue
			}
			remote, cut, err := s.peerIndex(r, m.HTTP, id, jid, attempt)
			if err != nil {
				s.log.Debug("log index from peer", "peer", m.ID, "err", err)
				silent = append(silent, m.ID)
				continue
			}
			if truncated == "" {
				truncated = cut
			}
			for seq, n := range remote {
				if _, ok := from[seq]; !ok {
					from[seq], size[seq] = m.HTTP, n
				}
			}
		}
	}
	seqs := make([]int, 0, len(from))
	for seq := range from {
		seqs = append(seqs, seq)
	}
	sort.Ints(seqs)
	if why := incompleteLog(silent, seqs); why != "" {
		w.Header().Set(api.LogIncompleteHeader, why)
	}
	if truncated != "" {
		w.Header().Set(api.LogTruncatedHeader, truncated)
	}
	var total int64
	for _, seq := range seqs {
		total += size[seq]
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Drover-Attempt", strconv.Itoa(attempt))
	w.Header().Set(api.LogSizeHeader, strconv.FormatInt(total, 10))
	at := int64(0) // where the next chunk starts in the whole log
	for _, seq := range seqs {
		start := at
		at += size[seq]
		if at <= offset {
			continue // wholly before the offset: not read at all
		}
		out := io.Writer(w)
		if start < offset {
			out = &skipWriter{w: w, skip: offset - start}
		}
		var err error
		if peer := from[seq]; peer == "" {
			_, err = s.logs.CopyChunk(ctx, out, id, jid, attempt, seq)
		} else {
			err = s.peerChunk(r, out, peer, id, jid, attempt, seq)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// Headers are gone: say it where the reader will see it.
			fmt.Fprintf(w, "\n[drover: chunk %d of this log could not be read: %v]\n", seq, err)
		}
	}
}

// skipWriter drops the first skip bytes written to it: a log read from
// an offset inside a chunk.
type skipWriter struct {
	w    io.Writer
	skip int64
}

func (s *skipWriter) Write(p []byte) (int, error) {
	n := len(p)
	if s.skip > 0 {
		d := min(s.skip, int64(len(p)))
		s.skip -= d
		p = p[d:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if _, err := s.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

// incompleteLog says why a log may be missing chunks: servers that did not
// answer, holes in the sequence numbers (chunks are numbered from 0).
func incompleteLog(silent []string, seqs []int) string {
	var parts []string
	if len(silent) > 0 {
		parts = append(parts, fmt.Sprintf("server %s did not answer", strings.Join(silent, ", ")))
	}
	var holes []string
	next := 0
	for _, seq := range seqs {
		if seq > next {
			if seq-1 == next {
				holes = append(holes, strconv.Itoa(next))
			} else {
				holes = append(holes, fmt.Sprintf("%d-%d", next, seq-1))
			}
		}
		next = seq + 1
	}
	if len(holes) > 0 {
		parts = append(parts, "chunks "+strings.Join(holes, ", ")+" missing")
	}
	return strings.Join(parts, "; ")
}

// peerGet asks a peer for part of a log, as the same user.
func (s *batchHandlers) peerGet(ctx context.Context, r *http.Request, peer string, batch uint64, job uint32, attempt int, what string) (*http.Response, error) {
	url := fmt.Sprintf("%s://%s/api/v1/batches/%d/jobs/%d/log?attempt=%d&stale=true&%s", s.peerScheme, peer, batch, job, attempt, what)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	req.Header.Set(forwardedHeader, s.cfg.ID)
	resp, err := s.peerClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%s answered %d", peer, resp.StatusCode)
	}
	return resp, nil
}

// peerIndex fetches a peer's index of a log's chunks, and why the peer cut
// the log ("": it did not).
func (s *batchHandlers) peerIndex(r *http.Request, peer string, batch uint64, job uint32, attempt int) (map[int]int64, string, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	resp, err := s.peerGet(ctx, r, peer, batch, job, attempt, "chunks=index")
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var out map[int]int64
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&out); err != nil {
		return nil, "", err
	}
	return out, resp.Header.Get(api.LogTruncatedHeader), nil
}

// peerChunk relays one chunk from a peer.
func (s *batchHandlers) peerChunk(r *http.Request, w io.Writer, peer string, batch uint64, job uint32, attempt, seq int) error {
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	resp, err := s.peerGet(ctx, r, peer, batch, job, attempt, "chunk="+strconv.Itoa(seq))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}
