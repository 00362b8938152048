package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/joblogs"
	"github.com/drover-sched/drover/server/state"
)

// workerHandlers serve the workers: activation, syncs (with the storage
// credentials their attempts need), deactivation and the log chunks they
// upload; and the admins' list of instances.
type workerHandlers struct{ *Server }

// maxLogChunk bounds one uploaded log chunk.
const maxLogChunk = 8 << 20

func (s *workerHandlers) handleActivate(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.ActivateRequest
	if err := decodeLimit(w, r, &req, maxUnauthenticatedBody, "an activation is a few hundred bytes"); err != nil {
		return nil, err
	}
	joining, err := s.authenticateActivation(w, r, &req)
	if err != nil {
		return nil, err
	}
	if c := callerOf(r); c != nil {
		c.user = "worker:" + req.Name
	}
	if req.Name == "" || req.CPU <= 0 || req.Memory <= 0 {
		return nil, codedf(http.StatusBadRequest, "activation needs a name, cpu > 0 and memory > 0 (got name %q, cpu %g, memory %d)", req.Name, req.CPU, req.Memory)
	}
	if len(req.Name) > api.MaxWorkerName || len(req.NodeID) > api.MaxNodeID || req.CPU > api.MaxCPU {
		return nil, codedf(http.StatusBadRequest, "activation: name is at most %d bytes, node_id at most %d and cpu at most %d cores", api.MaxWorkerName, api.MaxNodeID, api.MaxCPU)
	}
	if req.Memory > api.MaxMemory {
		return nil, codedf(http.StatusBadRequest, "activation: memory is %d bytes; the limit is %d (64 TiB)", req.Memory, int64(api.MaxMemory))
	}
	if len(req.Version) > api.MaxVersion {
		return nil, codedf(http.StatusBadRequest, "activation: version is %d bytes; the limit is %d", len(req.Version), api.MaxVersion)
	}
	for _, p := range [][2]string{{"region", req.Region}, {"cluster", req.Cluster}, {"pool", req.Pool}, {"machine", req.Machine}} {
		if p[1] == "" {
			continue
		}
		if err := api.ValidatePlaceName(p[0], p[1]); err != nil {
			return nil, codedf(http.StatusBadRequest, "activation: %w", err)
		}
	}
	if req.GPUs < 0 || req.GPUs > api.MaxGPUs {
		return nil, codedf(http.StatusBadRequest, "activation: gpus is %d; a worker offers 0 to %d", req.GPUs, api.MaxGPUs)
	}
	if req.GPUs > 0 {
		if err := api.ValidatePlaceName("gpu_type", req.GPUType); err != nil {
			return nil, codedf(http.StatusBadRequest, "activation: %w", err)
		}
	}
	if err := api.ValidateAttributes(req.Labels); err != nil {
		return nil, codedf(http.StatusBadRequest, "activation: labels: %w", err)
	}
	tok, err := clientToken(req.Token)
	if err != nil {
		return nil, err
	}
	if inst, ok := s.state.InstanceByTokenHash(token.Hash(tok)); ok && req.Token != "" && inst.Active && (!joining || inst.Machine == req.Machine) {
		// A retry of an activation whose answer was lost. (Had the instance
		// been retired meanwhile, the worker activates anew below.)
		s.live.Touch(inst.ID)
		return s.activated(int64(inst.ID), tok), nil
	}
	if req.NodeID != "" {
		if old, ok := s.state.ActiveByNodeID(req.NodeID); ok && subtle.ConstantTimeCompare([]byte(token.Hash(req.PreviousToken)), []byte(old.TokenHash)) != 1 {
			// An active instance the leader has not heard from yet was
			// activated a moment ago (its activation records the contact
			// after apply, and a copy can race in between): it is live.
			heard, ok := s.live.Heard(old.ID)
			if !ok {
				heard = time.Now()
			}
			if time.Since(heard) < s.cfg.LostTimeout {
				return nil, codedf(http.StatusConflict, "node ID %s is in use by instance %d (%s), a live worker last heard %s ago: two workers share a data dir (or a copied node-id file); give each worker its own -data-dir",
					req.NodeID, old.ID, old.Name, time.Since(heard).Round(time.Millisecond))
			}
		}
	}
	cmd := &state.Activate{
		Now: time.Now().UnixNano(), Name: req.Name, NodeID: req.NodeID, MaxLost: s.cfg.MaxLost,
		CPUMilli: int64(math.Round(req.CPU * 1000)), Memory: req.Memory, TokenHash: token.Hash(tok),
		Region: req.Region, Cluster: req.Cluster, Pool: req.Pool, Labels: req.Labels,
		GPUType: req.GPUType, GPUs: int64(req.GPUs), Machine: req.Machine, Version: req.Version,
	}
	if joining {
		cmd.JoinHash, cmd.PreviousHash = hashOf(req.JoinToken), hashOf(req.PreviousToken)
	}
	res, err := s.apply(cmd)
	if err != nil {
		var ae *state.ApplyError
		if errors.As(err, &ae) && ae.Kind == state.ErrUnauthorized {
			// Another activation spent the token first (apply checks it
			// again): this one failed to authenticate after all.
			if c := callerOf(r); c != nil {
				c.user = ""
			}
			if err := s.allowAnonymous(w, r); err != nil {
				return nil, err
			}
		}
		return nil, err
	}
	ar := res.(*state.ActivateResult)
	s.live.Touch(ar.Instance)
	s.log.Info("worker activated", "name", req.Name, "instance", ar.Instance, "cpu", req.CPU, "memory", req.Memory, "cluster", req.Cluster, "region", req.Region)
	return s.activated(int64(ar.Instance), tok), nil
}

// activated is an activation's answer: the instance, its token and its
// lease (FenceAfter), three quarters of -lost-timeout, so that a worker
// cut off from the servers has stopped its attempts, the kill's grace
// included, before they are given up as lost and run elsewhere. The
// worker measures its lease from when it sent its last sync that
// succeeded, which is never later than when the servers heard it.
func (s *workerHandlers) activated(id int64, tok string) api.ActivateResponse {
	lease := s.cfg.LostTimeout * 3 / 4
	grace := (s.cfg.LostTimeout - lease) / 2
	return api.ActivateResponse{InstanceID: id, Token: tok, FenceAfterMillis: lease.Milliseconds(), FenceGraceMillis: grace.Milliseconds()}
}

// authenticateActivation checks an activation's credential; a failure
// counts against the anonymous rate limit. A worker an
// operator started presents the worker secret. A worker on a machine the
// autoscaler launched presents the machine's one-time join token, or,
// restarted with its data dir, the instance token of the machine's last
// worker (joining: then apply checks the same rule again, state's
// CheckJoin, and spends the token).
func (s *workerHandlers) authenticateActivation(w http.ResponseWriter, r *http.Request, req *api.ActivateRequest) (joining bool, err error) {
	switch {
	case req.JoinToken != "" && !token.Valid(req.JoinToken):
		return false, coded(http.StatusBadRequest, "activation: join_token must be 64 hex digits: the token the autoscaler gave the machine")
	case req.PreviousToken != "" && !token.Valid(req.PreviousToken):
		return false, coded(http.StatusBadRequest, "activation: previous_token must be 64 hex digits: the instance token of the worker's last activation")
	case req.JoinToken != "" && req.Secret != "":
		return false, coded(http.StatusBadRequest, "activation: give the worker secret or a join token, not both")
	case req.JoinToken != "" && req.Machine == "":
		return false, coded(http.StatusBadRequest, "activation: a join token joins only the machine it was made for: name the machine (machine, the worker's -machine)")
	}
	if req.Secret == "" && req.Machine != "" && (req.JoinToken != "" || req.PreviousToken != "") {
		if req.Token != "" && token.Valid(req.Token) {
			if inst, ok := s.state.InstanceByTokenHash(token.Hash(req.Token)); ok && inst.Active && inst.Machine == req.Machine {
				// A retry of an activation whose answer was lost: its
				// instance token is the proof (answered below).
				return true, nil
			}
		}
		if err := s.state.CheckJoin(req.Machine, hashOf(req.JoinToken), hashOf(req.PreviousToken), time.Now().UnixNano()); err != nil {
			if err := s.allowAnonymous(w, r); err != nil {
				return false, err
			}
			return false, codedf(http.StatusUnauthorized, "activation refused: %w", err)
		}
		return true, nil
	}
	if s.cfg.WorkerSecret == "" {
		return false, coded(http.StatusForbidden, "this server accepts no worker secret: it was started without -worker-secret-file (workers on the autoscaler's machines join with their join tokens)")
	}
	if subtle.ConstantTimeCompare([]byte(req.Secret), []byte(s.cfg.WorkerSecret)) != 1 {
		if err := s.allowAnonymous(w, r); err != nil {
			return false, err
		}
		return false, coded(http.StatusUnauthorized, "worker secret does not match this cluster's; start the worker with the same -worker-secret-file as the servers")
	}
	return false, nil
}

// hashOf is a token's hash, or empty for no token.
func hashOf(tok string) string {
	if tok == "" {
		return ""
	}
	return token.Hash(tok)
}

func (s *Server) authWorker(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r)
		inst, ok := s.state.InstanceByTokenHash(token.Hash(tok))
		if tok == "" || !ok {
			err := s.allowAnonymous(w, r)
			if err == nil {
				err = coded(http.StatusUnauthorized, "unknown worker token; activate first")
			}
			s.writeErr(w, err)
			return
		}
		if !inst.Active {
			s.writeErr(w, codedf(http.StatusGone, "instance %d (%s) was retired: %s; activate again", inst.ID, inst.Name, inst.Reason))
			return
		}
		if err := s.allowRate(w, r, fmt.Sprintf("instance:%d", inst.ID), fmt.Sprintf("worker instance %d (%s)", inst.ID, inst.Name),
			"max_requests_per_second_per_worker", s.cfg.Rates.WorkerPerSecond); err != nil {
			s.writeErr(w, err)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), instanceKey, inst)))
	}
}

func instanceOf(r *http.Request) state.Instance {
	inst, _ := r.Context().Value(instanceKey).(state.Instance)
	return inst
}

// handleSync records a worker's events, then answers with the attempts it
// should start and those it should kill. With nothing to say, the request is
// held until something changes for the instance or the wait runs out. It
// writes its own reply (nothing to a worker that hung up), through
// writeValue and writeErr as wrap does.
func (s *workerHandlers) handleSync(w http.ResponseWriter, r *http.Request) {
	inst := instanceOf(r)
	var req api.SyncRequest
	if err := decode(w, r, &req); err != nil {
		s.writeErr(w, err)
		return
	}
	// While the sync is held, the worker counts as alive (and it is stamped
	// on the way in and out).
	defer s.live.HoldSync(inst.ID)()
	events := make([]state.Event, 0, len(req.Events))
	now := time.Now()
	for _, e := range req.Events {
		ev, err := apiview.Event(inst, e, now)
		if err != nil {
			s.writeErr(w, badRequest(err))
			return
		}
		if ev.Sample {
			// Only the attempt's own instance may use its sample slot:
			// another worker's sample would keep the owner's out of the
			// log for a gap, and apply would ignore it anyway.
			if on, ok := s.state.AttemptInstance(ev.Batch, ev.Job, ev.Attempt); !ok || on != inst.ID {
				continue
			}
			if !s.samples.allow(ev, now) {
				continue // a sample sooner than a worker should send one adds nothing to the log
			}
		}
		events = append(events, ev)
	}
	known := make([]state.AttemptID, 0, len(req.Known))
	for _, k := range req.Known {
		id, ok := apiview.AttemptID(k)
		if !ok {
			s.writeErr(w, codedf(http.StatusBadRequest, "known attempt %s is not a valid attempt", k))
			return
		}
		known = append(known, id)
	}
	if len(events) > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ApplyTimeout)
		err := s.events.Submit(ctx, events)
		cancel()
		if err != nil {
			s.writeErr(w, err)
			return
		}
	}
	// A held sync ends within a quarter of -lost-timeout (a third of the
	// worker's lease), so a worker in touch never nears its lease.
	wait := min(time.Duration(req.WaitMillis)*time.Millisecond, s.cfg.MaxSyncWait, s.cfg.LostTimeout/4)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	if len(req.Stopping) > len(req.Known) {
		s.writeErr(w, codedf(http.StatusBadRequest, "%d attempts stopping of %d known: a worker stops only attempts it holds", len(req.Stopping), len(req.Known)))
		return
	}
	stopping := make(map[state.AttemptID]bool, len(req.Stopping))
	for _, a := range req.Stopping {
		if id, ok := apiview.AttemptID(a); ok {
			stopping[id] = true
		}
	}
	for {
		changed := s.notify.Wait(inst.ID)
		v := s.state.WorkerView(inst.ID, known)
		// What the worker stops already it is not told again (a sync
		// would otherwise return at once for the whole grace).
		v.Preempt = slices.DeleteFunc(v.Preempt, func(p state.PreemptOrder) bool { return stopping[p.AttemptID] })
		if len(v.Orphans) > 0 {
			if err := s.cancelOrphans(r.Context(), inst.ID, v.Orphans); err != nil {
				s.writeErr(w, err)
				return
			}
			continue
		}
		if !v.Active {
			s.writeValue(w, r, bulk(http.StatusOK, api.SyncResponse{Acked: len(req.Events), Retired: true}))
			return
		}
		if len(v.Assign) > 0 || len(v.Kill) > 0 || len(v.Preempt) > 0 || wait <= 0 {
			s.writeValue(w, r, bulk(http.StatusOK, apiview.SyncResponse(len(req.Events), v, s.storageGrants)))
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			s.writeValue(w, r, bulk(http.StatusOK, api.SyncResponse{Acked: len(req.Events)}))
			return
		case <-r.Context().Done():
			return
		}
	}
}

// cancelOrphans ends attempts the worker never took because their batch was
// cancelled first.
func (s *workerHandlers) cancelOrphans(ctx context.Context, inst uint32, orphans []state.AttemptID) error {
	now := time.Now().UnixNano()
	events := make([]state.Event, len(orphans))
	for i, o := range orphans {
		events[i] = state.Event{Instance: inst, Batch: o.Batch, Job: o.Job, Attempt: o.Attempt,
			Outcome: state.OutcomeCancelled, End: now, Message: "batch cancelled before the attempt started"}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
	defer cancel()
	return s.events.Submit(ctx, events)
}

// minSampleGap is the shortest time between two usage samples of one
// attempt that reach the log: workers send one a minute, and a worker that
// sends more often only makes the log longer.
const minSampleGap = 30 * time.Second

// sampleGate remembers when each running attempt's last usage sample was
// let through (on this server; a new leader starts afresh, which lets at
// most one more through per attempt).
type sampleGate struct {
	mu    sync.Mutex
	last  map[state.AttemptID]time.Time
	swept time.Time // when last forgotten
}

// allow reports whether ev, a usage sample, may go to the log now, and
// forgets attempts not sampled for a while.
func (g *sampleGate) allow(ev state.Event, now time.Time) bool {
	id := state.AttemptID{Batch: ev.Batch, Job: ev.Job, Attempt: ev.Attempt}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil {
		g.last = map[state.AttemptID]time.Time{}
	}
	if t, ok := g.last[id]; ok && now.Sub(t) < minSampleGap {
		return false
	}
	// Forgetting walks the map, so it runs at most once a gap however
	// many attempts are sampled.
	if len(g.last) > 100_000 && now.Sub(g.swept) >= minSampleGap {
		g.swept = now
		for k, t := range g.last {
			if now.Sub(t) > 10*minSampleGap {
				delete(g.last, k)
			}
		}
	}
	g.last[id] = now
	return true
}

func (s *workerHandlers) handleDeactivate(w http.ResponseWriter, r *http.Request) (any, error) {
	inst := instanceOf(r)
	var req api.DeactivateRequest
	if err := decodeLimit(w, r, &req, maxUnauthenticatedBody, "a deactivation is a few bytes"); err != nil {
		return nil, err
	}
	reason := "worker deactivated"
	if req.Preempted {
		reason = "worker preempted: its machine is going away"
	}
	if _, err := s.apply(&state.Retire{Now: time.Now().UnixNano(), Instance: inst.ID, Reason: reason, MaxLost: s.cfg.MaxLost, Preempted: req.Preempted}); err != nil {
		return nil, err
	}
	s.log.Info("worker deactivated", "name", inst.Name, "instance", inst.ID, "preempted", req.Preempted)
	return map[string]bool{"ok": true}, nil
}

// handleListInstances lists the workers, active and retired, with when
// this server (the leader: the read is a consistent one) last heard from
// each active one.
func (s *workerHandlers) handleListInstances(w http.ResponseWriter, r *http.Request) (any, error) {
	out := apiview.Instances(s.state.Instances())
	for i := range out {
		if !out[i].Active {
			continue
		}
		if t, ok := s.live.Heard(uint32(out[i].ID)); ok {
			heard := t.UTC()
			out[i].LastHeard = &heard
		}
	}
	return out, nil
}

// logOverLimit says which limit on the logs this server keeps a chunk
// adding grow bytes to an attempt's log would pass ("": none): the
// attempt's log, its batch's or its billing project's; and how much of the
// chunk still fits under all of them. batchHeld and projectHeld are what
// the log store holds (and has reserved) of the batch and the project.
func (s *workerHandlers) logOverLimit(batch uint64, job uint32, attempt int, project string, quota int64, index map[int]int64, grow, batchHeld, projectHeld int64, known bool) (why string, room int64) {
	var held int64
	for _, n := range index {
		held += n
	}
	if !known {
		s.attributeLogs.Do(func() { go s.logs.Attribute(s.projectOfBatch) })
	}
	room = grow
	for _, l := range []struct {
		limit, held int64
		what        string
	}{
		{s.cfg.Limits.MaxLogBytesPerAttempt, held, fmt.Sprintf("the log of attempt %d of job %d/%d reached %%d bytes (server setting max_log_bytes_per_attempt)", attempt, batch, job)},
		{s.cfg.Limits.MaxLogBytesPerBatch, batchHeld, fmt.Sprintf("batch %d's logs on this server reached %%d bytes (server setting max_log_bytes_per_batch)", batch)},
		{quota, projectHeld, fmt.Sprintf("billing project %s's logs on this server reached its log quota of %%d bytes (drover billing-project set-log-quota)", project)},
	} {
		if l.limit > 0 && l.held+grow > l.limit {
			if r := max(0, l.limit-l.held); why == "" || r < room {
				why, room = fmt.Sprintf(l.what, l.limit), r
			}
		}
	}
	return why, room
}

// projectOfBatch is the billing project of a batch the state or the
// history store holds ("": neither does).
func (s *workerHandlers) projectOfBatch(batch uint64) string {
	if p, _, ok := s.state.LogQuotaOf(batch); ok {
		return p
	}
	if s.history == nil {
		return ""
	}
	st, err := s.history.Store()
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if b, found, err := st.Batch(ctx, batch); err == nil && found {
		return b.BillingProject
	}
	return ""
}

func (s *workerHandlers) handleLogChunk(w http.ResponseWriter, r *http.Request) (any, error) {
	inst := instanceOf(r)
	batch, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	job, err := jobID(r)
	if err != nil {
		return nil, err
	}
	attempt, err := strconv.Atoi(r.PathValue("attempt"))
	seq, err2 := strconv.Atoi(r.PathValue("seq"))
	if err != nil || err2 != nil || attempt < 1 || attempt > math.MaxUint16 || seq < 0 {
		return nil, coded(http.StatusBadRequest, "attempt and seq must be non-negative integers")
	}
	if on, ok := s.state.AttemptInstance(batch, job, uint16(attempt)); !ok || on != inst.ID {
		return nil, codedf(http.StatusForbidden, "attempt %d of job %d/%d is not assigned to instance %d", attempt, batch, job, inst.ID)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLogChunk))
	if err != nil {
		return nil, codedf(http.StatusRequestEntityTooLarge, "log chunk larger than %d MiB", maxLogChunk>>20)
	}
	index, err := s.logs.Index(r.Context(), batch, job, attempt)
	if err != nil {
		return nil, err
	}
	project, quota, _ := s.state.LogQuotaOf(batch)
	replaced := index[seq] // a retried chunk replaces itself
	cut, err := s.logs.Truncated(r.Context(), batch, job, attempt)
	if err != nil {
		return nil, err
	}
	if cut != "" {
		return nil, codedf(http.StatusRequestEntityTooLarge, "log of attempt %d of job %d/%d truncated: %s", attempt, batch, job, cut)
	}
	// The chunk's bytes are counted against the limits before they are
	// written, in one step with the check, so that chunks arriving
	// together cannot each take the same room.
	var why string
	var kept []byte
	grow := int64(len(data)) - replaced
	counted := s.logs.Reserve(batch, project, func(batchHeld, projectHeld int64, known bool) int64 {
		var room int64
		why, room = s.logOverLimit(batch, job, attempt, project, quota, index, grow, batchHeld, projectHeld, known)
		if why == "" {
			return grow
		}
		kept = data[:min(room, int64(len(data)))]
		return int64(len(kept)+len(joblogs.TruncationLine(why))) - replaced
	})
	if why != "" {
		// The log ends here with what of the chunk fits and a line saying
		// why, and the worker stops sending.
		if err := s.logs.Truncate(r.Context(), batch, job, attempt, seq, kept, why); err != nil {
			s.logs.Release(batch, project, counted)
			return nil, err
		}
		return nil, codedf(http.StatusRequestEntityTooLarge, "log of attempt %d of job %d/%d truncated: %s", attempt, batch, job, why)
	}
	if err := s.logs.PutChunk(r.Context(), batch, job, attempt, seq, data); err != nil {
		s.logs.Release(batch, project, counted)
		return nil, err
	}
	return map[string]int{"bytes": len(data)}, nil
}
