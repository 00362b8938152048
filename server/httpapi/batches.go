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
				Where:      where(js.Regions, js.Pool, js.GPUType, js.GPUs, js.MachineType),
				Run:        run(js),
			},
		})
	}
	return out, nil
}

// run is a validated job's container, network, process limit and files
// (nil: a process on the default network with the worker's limit and no
// files). The default network, api.NetworkBridge, is kept as "". Paths are
// kept as written: the worker expands the job's variables in them and
// checks them again.
func run(js *api.JobSpec) *state.Run {
	network := js.Network
	if network == api.NetworkBridge {
		network = ""
	}
	if js.Image == "" && network == "" && js.MaxProcesses == 0 && len(js.Inputs) == 0 && len(js.Outputs) == 0 {
		return nil
	}
	r := &state.Run{Image: js.Image, Network: network, MaxProcesses: js.MaxProcesses}
	for _, f := range js.Inputs {
		r.Inputs = append(r.Inputs, state.File{Name: f.Name, URL: f.Source, Path: f.Path})
	}
	for _, f := range js.Outputs {
		r.Outputs = append(r.Outputs, state.File{Name: f.Name, URL: f.Destination, Path: f.Path})
	}
	return r
}

// where is a job's placement constraint, its regions sorted and deduped
// so equal sets share one constraint (nil: none).
func where(regions []string, pool, gpuType string, gpus int, machineType string) *state.Where {
	if len(regions) == 0 && pool == "" && gpus == 0 && machineType == "" {
		return nil
	}
	w := &state.Where{Pool: pool, MachineType: machineType}
	if gpus > 0 {
		w.GPUType, w.GPUs = gpuType, int64(gpus)
	}
	if len(regions) > 0 {
		w.Regions = slices.Compact(slices.Sorted(slices.Values(regions)))
	}
	return w
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

// submitted validates what a create or update request submits: inline
// jobs, or a number of jobs to reserve.
func submitted(w http.ResponseWriter, nJobs int64, jobs []api.JobSpec) ([]state.JobEntry, bool) {
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
	entries, ok := submitted(w, req.NJobs, req.Jobs)
	if !ok {
		return
	}
	size := int64(len(req.Name) + len(req.BillingProject) + len(req.IdempotencyKey))
	for k, v := range req.Attributes {
		size += int64(len(k) + len(v))
	}
	if !s.admit(w, submission{user: u.Name, by: u.Name, project: req.BillingProject, key: req.IdempotencyKey, reserve: req.NJobs, entries: entries, batchBytes: size}) {
		return
	}
	cmd := &state.CreateBatch{
		Now: time.Now().UnixNano(), User: u.Name, Name: req.Name, BillingProject: req.BillingProject,
		Attributes: req.Attributes, Key: req.IdempotencyKey, NJobs: uint32(req.NJobs), Jobs: entries, Policy: state.PolicyStorage,
	}
	if cmd.Key != "" {
		cmd.Digest = cmd.RequestDigest()
	}
	res, err := s.apply(cmd)
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
	reply(w, r, code, out)
}

// visibleBatch checks that the batch exists and that the caller may see it.
func (s *Server) visibleBatch(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	return s.batchAccess(w, r, state.Visible)
}

// batchAccess checks that the batch exists and that the caller may do
// what needs level with it.
func (s *Server) batchAccess(w http.ResponseWriter, r *http.Request, level state.BatchAccess) (uint64, bool) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return 0, false
	}
	u := userOf(r)
	got := s.state.Access(id, viewerOf(r))
	var b api.Batch // read only to explain a refusal
	if got == state.NoBatch {
		// Not in memory: it may have moved to the history store.
		old, ok := s.archivedBatch(w, r, id)
		if !ok {
			return 0, false
		}
		b = old.Batch
		got = s.state.AccessTo(b.BillingProject, b.User, viewerOf(r))
		if got >= state.Visible && level > state.Visible {
			when := "its jobs ended"
			if b.TimeCompleted != nil {
				when = "it completed on " + b.TimeCompleted.Format(time.RFC3339)
			}
			writeError(w, http.StatusConflict, fmt.Sprintf("batch %d is finished and kept in the history store (%s): it can be read but not cancelled or added to; submit a new batch", id, when))
			return 0, false
		}
	}
	if got < level && b.ID == 0 {
		b, _ = s.state.Batch(id)
	}
	switch {
	case got == state.Hidden:
		writeError(w, http.StatusForbidden, fmt.Sprintf("batch %d belongs to billing project %q, which user %q is not a member of", id, b.BillingProject, u.Name))
		return 0, false
	case got < level:
		what := "cancel it: its owner, a manager of the project or an admin can"
		if level == state.Owned {
			what = "add jobs to it: only its owner (a member or manager of the project) or an admin can"
		}
		writeError(w, http.StatusForbidden, fmt.Sprintf("user %q may read batch %d of billing project %q but not %s", u.Name, id, b.BillingProject, what))
		return 0, false
	}
	return id, true
}

func (s *Server) handleGetBatch(w http.ResponseWriter, r *http.Request) {
	id, ok := s.visibleBatch(w, r)
	if !ok {
		return
	}
	b, ok := s.state.Batch(id)
	if !ok {
		old, found := s.archivedBatch(w, r, id)
		if found {
			writeJSON(w, http.StatusOK, old.Batch)
		}
		return
	}
	if s.waiting != nil && !isStale(r) {
		b.Waiting = s.waiting.Batch(id)
		b.WaitingSummary = api.SummarizeWaiting(b.Waiting)
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) handleListBatches(w http.ResponseWriter, r *http.Request) {
	q, err := api.ParseBatchQuery(r.URL.Query().Get("q"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	last, ok := queryID(w, r, "last_id")
	if !ok {
		return
	}
	v := viewerOf(r)
	live := s.state.ListBatches(v, state.CompileBatchQuery(q), last)
	if s.history == nil {
		writeJSON(w, http.StatusOK, live)
		return
	}
	st, err := s.history.Store()
	var old api.BatchList
	if err == nil {
		old, err = st.ListBatches(r.Context(), q, s.state.VisibleProjects(v), last)
	}
	if err != nil {
		// What is in memory is still worth showing; say what is missing.
		w.Header().Set(HistoryUnavailableHeader, err.Error())
		writeJSON(w, http.StatusOK, live)
		return
	}
	writeJSON(w, http.StatusOK, mergeBatches(live, old, func(id int64) bool { return s.state.HasBatch(uint64(id)) }))
}

func (s *Server) handleCancelBatch(w http.ResponseWriter, r *http.Request) {
	id, ok := s.batchAccess(w, r, state.Cancellable)
	if !ok {
		return
	}
	if _, err := s.apply(&state.CancelBatch{Now: time.Now().UnixNano(), Batch: id, Reason: "cancelled by " + userOf(r).Name}); err != nil {
		s.writeErr(w, err)
		return
	}
	b, _ := s.state.Batch(id)
	writeJSON(w, http.StatusOK, b)
}

func updateResponse(ur *state.UpdateResult) api.UpdateResponse {
	return api.UpdateResponse{BatchID: int64(ur.Batch), UpdateID: int64(ur.Update), StartJobID: int64(ur.Start), NJobs: int64(ur.N), Committed: ur.Committed}
}

func (s *Server) handleCreateUpdate(w http.ResponseWriter, r *http.Request) {
	id, ok := s.batchAccess(w, r, state.Owned)
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
	entries, ok := submitted(w, req.NJobs, req.Jobs)
	by := userOf(r).Name
	if !ok || !s.admit(w, submission{batch: id, by: by, key: req.IdempotencyKey, reserve: req.NJobs, entries: entries}) {
		return
	}
	cmd := &state.CreateUpdate{Now: time.Now().UnixNano(), Batch: id, Key: req.IdempotencyKey, NJobs: uint32(req.NJobs), Jobs: entries,
		Policy: state.PolicyStorage, User: by}
	if cmd.Key != "" {
		cmd.Digest = cmd.RequestDigest()
	}
	res, err := s.apply(cmd)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	ur := res.(*state.UpdateResult)
	code := http.StatusCreated
	if ur.Existing {
		code = http.StatusOK
	}
	reply(w, r, code, updateResponse(ur))
}

func (s *Server) handleAddJobs(w http.ResponseWriter, r *http.Request) {
	id, ok := s.batchAccess(w, r, state.Owned)
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
	by := userOf(r).Name
	if !s.admit(w, submission{batch: id, by: by, entries: entries, intoUpdate: true}) {
		return
	}
	if _, err := s.apply(&state.AddJobs{Batch: id, Update: uint32(upd), Jobs: entries, Now: time.Now().UnixNano(), Policy: state.PolicyStorage, User: by}); err != nil {
		s.writeErr(w, err)
		return
	}
	reply(w, r, http.StatusOK, map[string]int{"accepted": len(entries)})
}

func (s *Server) handleCommitUpdate(w http.ResponseWriter, r *http.Request) {
	id, ok := s.batchAccess(w, r, state.Owned)
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
	q, err := api.ParseJobQuery(r.URL.Query().Get("q"))
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
	list, found := s.state.ListJobs(id, state.CompileJobQuery(q), uint32(last))
	if !found {
		st := s.historyStore(w, fmt.Sprintf("batch %d", id))
		if st == nil {
			return
		}
		if list, err = st.ListJobs(r.Context(), id, q, uint32(last)); err != nil {
			historyFailed(w, id, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// visibleJob reads the batch and job IDs of a job path, checking that the
// caller may see the batch.
func (s *Server) visibleJob(w http.ResponseWriter, r *http.Request) (uint64, uint32, bool) {
	id, ok := s.visibleBatch(w, r)
	if !ok {
		return 0, 0, false
	}
	jid, ok := s.jobID(w, r)
	return id, jid, ok
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
	id, jid, ok := s.visibleJob(w, r)
	if !ok {
		return
	}
	j, found := s.state.Job(id, jid)
	if !found && !s.state.HasBatch(id) {
		var ok bool
		if j, ok = s.archivedJob(w, r, id, jid); !ok {
			return
		}
		found = true
	}
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
	id, jid, ok := s.visibleJob(w, r)
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
	if !found && !s.state.HasBatch(id) {
		j, ok := s.archivedJob(w, r, id, jid)
		if !ok {
			return
		}
		attempt, found = latestAttempt(&j, want), true
	}
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
	s.writeLog(w, r, id, jid, attempt)
}

// writeLog streams an attempt's log in chunk order, one chunk in memory at
// a time. Chunks uploaded while another server led are on that server
// (unless the log store is shared): each other server is asked for its
// index and its chunks are relayed. A log that may be missing chunks (a
// server did not answer, or sequence numbers have holes) is still served,
// marked with the LogIncompleteHeader.
func (s *Server) writeLog(w http.ResponseWriter, r *http.Request, id uint64, jid uint32, attempt int) {
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
			writeError(w, http.StatusNotFound, fmt.Sprintf("no chunk %q of this log here", q.Get("chunk")))
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.FormatInt(index[seq], 10))
		if _, err := s.logs.CopyChunk(ctx, w, id, jid, attempt, seq); err != nil {
			s.log.Debug("send log chunk", "err", err)
		}
		return
	}
	from := make(map[int]string, len(index)) // seq → peer HTTP address ("" here)
	for seq := range index {
		from[seq] = ""
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
			for seq := range remote {
				if _, ok := from[seq]; !ok {
					from[seq] = m.HTTP
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
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Drover-Attempt", strconv.Itoa(attempt))
	for _, seq := range seqs {
		var err error
		if peer := from[seq]; peer == "" {
			_, err = s.logs.CopyChunk(ctx, w, id, jid, attempt, seq)
		} else {
			err = s.peerChunk(r, w, peer, id, jid, attempt, seq)
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
func (s *Server) peerGet(ctx context.Context, r *http.Request, peer string, batch uint64, job uint32, attempt int, what string) (*http.Response, error) {
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
func (s *Server) peerIndex(r *http.Request, peer string, batch uint64, job uint32, attempt int) (map[int]int64, string, error) {
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
func (s *Server) peerChunk(r *http.Request, w io.Writer, peer string, batch uint64, job uint32, attempt, seq int) error {
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
