package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/logstore"
	"github.com/drover-sched/drover/server/state"
)

// toEntries validates API job specs and turns them into state entries,
// applying defaults (1 core, 1 GiB per core). Errors name the offending job.
func toEntries(specs []api.JobSpec) ([]state.JobEntry, error) {
	if err := api.ValidateJobs(specs); err != nil {
		return nil, err
	}
	out := make([]state.JobEntry, 0, len(specs))
	for i := range specs {
		js := &specs[i]
		cpu := js.CPU
		if cpu == 0 {
			cpu = 1
		}
		milli := int64(math.Round(cpu * 1000))
		mem := js.Memory
		if mem == 0 {
			mem = milli * (1 << 30) / 1000
		}
		out = append(out, state.JobEntry{
			First:        uint32(js.JobID),
			Count:        uint32(js.NumJobs()),
			Parents:      ranges(js.ParentIDs, js.ParentRanges),
			BatchParents: ranges(js.BatchParentIDs, js.BatchParentRanges),
			Spec: &state.Spec{
				Name:       js.Name,
				Array:      js.Count > 0,
				Command:    js.Command,
				Env:        js.Env,
				CPUMilli:   milli,
				Memory:     mem,
				TimeoutMs:  int64(js.TimeoutSeconds * 1000),
				Retries:    uint16(js.Retries),
				AlwaysRun:  js.AlwaysRun,
				Attributes: js.Attributes,
			},
		})
	}
	return out, nil
}

// ranges converts validated parent IDs and ranges.
func ranges(ids []int64, rs []api.IDRange) []state.Range {
	var out []state.Range
	for _, id := range ids {
		out = append(out, state.Range{Lo: uint32(id), Hi: uint32(id)})
	}
	for _, r := range rs {
		out = append(out, state.Range{Lo: uint32(r[0]), Hi: uint32(r[1])})
	}
	return out
}

// submission validates what a create or update request submits: inline
// jobs, or a number of jobs to reserve.
func submission(w http.ResponseWriter, nJobs int64, jobs []api.JobSpec) ([]state.JobEntry, bool) {
	if nJobs < 0 || nJobs > api.MaxJobsPerBatch {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("n_jobs is %d; it must be between 0 and %d", nJobs, int64(api.MaxJobsPerBatch)))
		return nil, false
	}
	entries, err := toEntries(jobs)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, false
	}
	return entries, true
}

func (s *Server) handleCreateBatch(w http.ResponseWriter, r *http.Request) {
	var req api.CreateBatchRequest
	if !decode(w, r, &req) {
		return
	}
	u := userOf(r)
	if req.BillingProject == "" {
		req.BillingProject = s.cfg.DefaultBillingProject
	}
	if err := errors.Join(api.ValidateName("name", req.Name), api.ValidateName("billing_project", req.BillingProject),
		api.ValidateName("idempotency_key", req.IdempotencyKey), api.ValidateAttributes(req.Attributes)); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	entries, ok := submission(w, req.NJobs, req.Jobs)
	if !ok || !s.admit(w, 0, req.NJobs, entries, false) {
		return
	}
	res, err := s.apply(&state.CreateBatch{
		Now: time.Now().UnixNano(), User: u.Name, Name: req.Name, BillingProject: req.BillingProject,
		Attributes: req.Attributes, Key: req.IdempotencyKey, NJobs: uint32(req.NJobs), Jobs: entries,
	})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	ur := res.(*state.UpdateResult)
	b, _ := s.state.Batch(ur.Batch)
	out := api.CreateBatchResponse{Batch: b}
	if ur.Update > 0 {
		out.UpdateID, out.StartJobID = int64(ur.Update), int64(ur.Start)
	}
	code := http.StatusCreated
	if ur.Existing {
		code = http.StatusOK
	}
	writeJSON(w, code, out)
}

// visibleBatch checks that the batch exists and that the caller may see it.
func (s *Server) visibleBatch(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return 0, false
	}
	u := userOf(r)
	switch s.state.Access(id, viewerOf(r)) {
	case state.NoBatch:
		writeError(w, http.StatusNotFound, fmt.Sprintf("batch %d does not exist", id))
		return 0, false
	case state.Hidden:
		b, _ := s.state.Batch(id)
		writeError(w, http.StatusForbidden, fmt.Sprintf("batch %d belongs to billing project %q, which user %q is not a member of", id, b.BillingProject, u.Name))
		return 0, false
	}
	return id, true
}

func (s *Server) handleGetBatch(w http.ResponseWriter, r *http.Request) {
	id, ok := s.visibleBatch(w, r)
	if !ok {
		return
	}
	b, _ := s.state.Batch(id)
	if s.waiting != nil && !isStale(r) {
		b.Waiting = s.waiting.Batch(id)
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) handleListBatches(w http.ResponseWriter, r *http.Request) {
	f, err := state.ParseBatchFilter(r.URL.Query().Get("q"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	last, ok := queryID(w, r, "last_id")
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.state.ListBatches(viewerOf(r), f, last))
}

func (s *Server) handleCancelBatch(w http.ResponseWriter, r *http.Request) {
	id, ok := s.visibleBatch(w, r)
	if !ok {
		return
	}
	if _, err := s.apply(&state.CancelBatch{Now: time.Now().UnixNano(), Batch: id, Reason: "cancelled by " + userOf(r).Name}); err != nil {
		s.writeErr(w, err)
		return
	}
	b, _ := s.state.Batch(id)
	if s.waiting != nil && !isStale(r) {
		b.Waiting = s.waiting.Batch(id)
	}
	writeJSON(w, http.StatusOK, b)
}

func updateResponse(ur *state.UpdateResult) api.UpdateResponse {
	return api.UpdateResponse{BatchID: int64(ur.Batch), UpdateID: int64(ur.Update), StartJobID: int64(ur.Start), NJobs: int64(ur.N), Committed: ur.Committed}
}

func (s *Server) handleCreateUpdate(w http.ResponseWriter, r *http.Request) {
	id, ok := s.visibleBatch(w, r)
	if !ok {
		return
	}
	var req api.CreateUpdateRequest
	if !decode(w, r, &req) {
		return
	}
	if err := api.ValidateName("idempotency_key", req.IdempotencyKey); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	entries, ok := submission(w, req.NJobs, req.Jobs)
	if !ok || !s.admit(w, id, req.NJobs, entries, false) {
		return
	}
	res, err := s.apply(&state.CreateUpdate{Now: time.Now().UnixNano(), Batch: id, Key: req.IdempotencyKey, NJobs: uint32(req.NJobs), Jobs: entries})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	ur := res.(*state.UpdateResult)
	code := http.StatusCreated
	if ur.Existing {
		code = http.StatusOK
	}
	writeJSON(w, code, updateResponse(ur))
}

func (s *Server) handleAddJobs(w http.ResponseWriter, r *http.Request) {
	id, ok := s.visibleBatch(w, r)
	if !ok {
		return
	}
	upd, ok := pathID(w, r, "update")
	if !ok {
		return
	}
	var req api.AddJobsRequest
	if !decode(w, r, &req) {
		return
	}
	if len(req.Jobs) == 0 {
		writeError(w, http.StatusBadRequest, "jobs is empty; a bunch needs at least one job")
		return
	}
	entries, err := toEntries(req.Jobs)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !s.admit(w, id, 0, entries, true) {
		return
	}
	if _, err := s.apply(&state.AddJobs{Batch: id, Update: uint32(upd), Jobs: entries}); err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"accepted": len(entries)})
}

func (s *Server) handleCommitUpdate(w http.ResponseWriter, r *http.Request) {
	id, ok := s.visibleBatch(w, r)
	if !ok {
		return
	}
	upd, ok := pathID(w, r, "update")
	if !ok {
		return
	}
	res, err := s.apply(&state.CommitUpdate{Now: time.Now().UnixNano(), Batch: id, Update: uint32(upd)})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, updateResponse(res.(*state.UpdateResult)))
}

func (s *Server) handleListJobs(w http.ResponseWriter, r *http.Request) {
	id, ok := s.visibleBatch(w, r)
	if !ok {
		return
	}
	f, err := state.ParseJobFilter(r.URL.Query().Get("q"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	last, ok := queryID(w, r, "last_id")
	if !ok {
		return
	}
	if last > math.MaxUint32 {
		last = math.MaxUint32
	}
	list, _ := s.state.ListJobs(id, f, uint32(last))
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) jobID(w http.ResponseWriter, r *http.Request) (uint32, bool) {
	j, ok := pathID(w, r, "job")
	if !ok {
		return 0, false
	}
	if j > math.MaxUint32 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("job %d does not exist", j))
		return 0, false
	}
	return uint32(j), true
}

func (s *Server) handleGetJob(w http.ResponseWriter, r *http.Request) {
	id, ok := s.visibleBatch(w, r)
	if !ok {
		return
	}
	jid, ok := s.jobID(w, r)
	if !ok {
		return
	}
	j, found := s.state.Job(id, jid)
	if !found {
		writeError(w, http.StatusNotFound, fmt.Sprintf("batch %d has no job %d", id, jid))
		return
	}
	if s.waiting != nil && j.State == api.JobReady && !isStale(r) {
		j.Waiting = s.waiting.Job(id, jid)
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *Server) handleJobLog(w http.ResponseWriter, r *http.Request) {
	noWriteDeadline(w) // logs can be long
	id, ok := s.visibleBatch(w, r)
	if !ok {
		return
	}
	jid, ok := s.jobID(w, r)
	if !ok {
		return
	}
	want := 0
	if raw := r.URL.Query().Get("attempt"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("attempt=%q is not a positive integer", raw))
			return
		}
		want = n
	}
	attempt, found := s.state.LogTarget(id, jid, want)
	switch {
	case !found:
		writeError(w, http.StatusNotFound, fmt.Sprintf("batch %d has no job %d", id, jid))
		return
	case attempt < 0:
		writeError(w, http.StatusNotFound, fmt.Sprintf("job %d of batch %d has no attempt %d", jid, id, want))
		return
	case attempt == 0:
		writeError(w, http.StatusNotFound, fmt.Sprintf("job %d of batch %d has not started, so it has no log yet", jid, id))
		return
	}
	chunks, err := s.logs.Chunks(r.Context(), id, jid, attempt)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if r.URL.Query().Get("chunks") == "local" {
		// Another server is gathering this log: give it what is here.
		writeJSON(w, http.StatusOK, chunks)
		return
	}
	// Chunks uploaded while another server led are on that server (unless
	// the log store is shared); gather them.
	for _, m := range s.peerHTTP() {
		remote, err := s.peerChunks(r, m, id, jid, attempt)
		if err != nil {
			s.log.Debug("log chunks from peer", "peer", m, "err", err)
			continue
		}
		for seq, data := range remote {
			if _, ok := chunks[seq]; !ok {
				chunks[seq] = data
			}
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Drover-Attempt", strconv.Itoa(attempt))
	if err := logstore.WriteChunks(w, chunks); err != nil {
		s.log.Debug("write job log", "err", err)
	}
}

// peerHTTP lists the HTTP addresses of the other alive servers.
func (s *Server) peerHTTP() []string {
	if s.members == nil {
		return nil
	}
	var out []string
	for _, m := range s.members.Members() {
		if m.Alive && m.ID != s.cfg.ID && m.HTTP != "" {
			out = append(out, m.HTTP)
		}
	}
	return out
}

// peerChunks fetches a peer's local chunks of a log, as the same user.
func (s *Server) peerChunks(r *http.Request, peer string, batch uint64, job uint32, attempt int) (map[int][]byte, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/api/v1/batches/%d/jobs/%d/log?attempt=%d&stale=true&chunks=local", peer, batch, job, attempt)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	req.Header.Set(forwardedHeader, s.cfg.ID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var out map[int][]byte
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}
