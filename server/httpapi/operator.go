package httpapi

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/version"
)

// operatorHandlers serve the servers' status (health, leader, peers,
// metrics) and their operation: Raft membership and leadership, snapshots,
// memory, the gossip keyring and the history store's recheck.
type operatorHandlers struct{ *Server }

// snapshotMagic starts every file written by `drover operator snapshot save`.
const snapshotMagic = "DROVER-SNAPSHOT 1"

// snapshotMeta is the second line of a snapshot file.
type snapshotMeta struct {
	Index  uint64    `json:"index"`
	Term   uint64    `json:"term"`
	Server string    `json:"server"`
	Time   time.Time `json:"time"`
	// AuditBytes is the audit log's share of the state that follows
	// (absent in files from before it): taken from the same snapshot, so
	// that the state's own size is the rest, at the same index.
	AuditBytes int64 `json:"audit_bytes,omitempty"`
}

// handleHealth answers 200 when the server is ready to serve the API and 503
// while it starts (load balancers should route by it). Anyone may ask, so
// it names servers by ID only: no Raft or gossip address, term or index,
// which would tell a stranger where and how to forge Raft entries
// (`drover operator raft list-peers` shows them to a user).
func (s *operatorHandlers) handleHealth(w http.ResponseWriter, r *http.Request) (any, error) {
	_, id := s.node.Leader()
	code := http.StatusOK
	if !s.node.Ready() {
		code = http.StatusServiceUnavailable
	}
	body := map[string]any{"ok": code == http.StatusOK, "ready": s.node.Ready(), "server_id": s.cfg.ID, "leader_id": id}
	if code != http.StatusOK {
		body["error"] = "server is starting: it is still catching up with the Raft log"
	}
	return withStatus(code, body), nil
}

func (s *operatorHandlers) handleLeader(w http.ResponseWriter, r *http.Request) (any, error) {
	addr, id := s.node.Leader()
	out := api.LeaderStatus{
		Leader: addr, LeaderID: id, ServerID: s.cfg.ID, IsLeader: s.node.IsLeader(),
		Term: s.raft.CurrentTerm(), LastIndex: s.raft.LastIndex(), AppliedIdx: s.raft.AppliedIndex(), Version: version.Get(),
	}
	if s.history != nil {
		h := s.history.Status()
		out.History = &h
	}
	return out, nil
}

// handleMetrics serves Prometheus metrics, behind MetricsToken when set.
func (s *operatorHandlers) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.MetricsToken != "" && subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.cfg.MetricsToken)) != 1 {
		err := s.allowAnonymous(w, r)
		if err == nil {
			err = coded(http.StatusUnauthorized, "metrics need the metrics token: send Authorization: Bearer <the server's -metrics-token>")
		}
		s.writeErr(w, err)
		return
	}
	s.metricsHandler.ServeHTTP(w, r)
}

func (s *operatorHandlers) handlePeers(w http.ResponseWriter, r *http.Request) (any, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("read raft configuration: %w", err)
	}
	_, leaderID := s.raft.LeaderWithID()
	stats := s.raft.Stats()
	commit, _ := strconv.ParseUint(stats["commit_index"], 10, 64)
	out := api.Peers{
		Servers: []api.Peer{}, LeaderID: string(leaderID), Term: s.raft.CurrentTerm(),
		LastIndex: s.raft.LastIndex(), CommitIndex: commit, AppliedIndex: s.raft.AppliedIndex(),
		LastContact: stats["last_contact"],
	}
	for _, srv := range f.Configuration().Servers {
		p := api.Peer{ID: string(srv.ID), Address: string(srv.Address), Voter: srv.Suffrage == raft.Voter,
			Leader: srv.ID == leaderID, Reported: s.cfg.ID}
		switch {
		case string(srv.ID) == s.cfg.ID:
			p.Alive, p.HTTP = true, s.cfg.Advertise
			p.Version, p.AppliedIndex = version.Get(), s.raft.AppliedIndex()
		case s.members != nil:
			if m, ok := s.members.Member(string(srv.ID)); ok {
				p.Alive, p.HTTP = m.Alive, m.HTTP
				p.Version, p.AppliedIndex = m.Version, m.Applied
			}
		}
		out.Servers = append(out.Servers, p)
	}
	var dec []state.Decommissioned
	s.state.Read(func(r state.Reader) { dec = r.DecommissionedServers() })
	for _, d := range dec {
		out.Decommissioned = append(out.Decommissioned, api.DecommissionedServer{ID: d.ID, At: time.Unix(0, d.At).UTC(), By: d.By})
	}
	return out, nil
}

// checkServerID bounds a server ID an operator names before it can reach
// the log (a decommissioned one is kept there).
func checkServerID(id string) error {
	if id == "" || len(id) > state.MaxServerIDBytes {
		return codedf(http.StatusBadRequest, "a server ID is 1 to %d bytes, not %d (drover operator raft list-peers shows them)", state.MaxServerIDBytes, len(id))
	}
	return nil
}

func (s *operatorHandlers) handleRemovePeer(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.RemovePeerRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	if err := checkServerID(req.ID); err != nil {
		return nil, err
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	found := false
	for _, srv := range f.Configuration().Servers {
		found = found || string(srv.ID) == req.ID
	}
	if !found && !req.Permanent {
		return nil, codedf(http.StatusNotFound, "server %q is not in the raft configuration; see 'drover operator raft list-peers'", req.ID)
	}
	if req.ID == s.cfg.ID && req.Permanent {
		return nil, codedf(http.StatusConflict, "server %s leads: move leadership away first (drover operator raft transfer-leader), then decommission it", req.ID)
	}
	if req.Permanent {
		// On the list first: a restart between the two steps finds it.
		if _, err := s.apply(&state.Decommission{Now: time.Now().UnixNano(), ID: req.ID, By: userOf(r).Name}); err != nil {
			return nil, err
		}
	}
	if found {
		if err := s.raft.RemoveServer(raft.ServerID(req.ID), 0, s.cfg.ApplyTimeout).Error(); err != nil {
			return nil, fmt.Errorf("remove server %s: %w", req.ID, err)
		}
	}
	s.log.Warn("server removed from the raft configuration by an operator", "server", req.ID, "by", userOf(r).Name, "permanent", req.Permanent)
	return map[string]any{"removed": req.ID, "permanent": req.Permanent}, nil
}

func (s *operatorHandlers) handleReadmitPeer(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.RemovePeerRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	if err := checkServerID(req.ID); err != nil {
		return nil, err
	}
	if _, err := s.apply(&state.Decommission{Now: time.Now().UnixNano(), ID: req.ID, By: userOf(r).Name, Undo: true}); err != nil {
		return nil, err
	}
	s.log.Info("decommissioned server readmitted", "server", req.ID, "by", userOf(r).Name)
	return map[string]string{"readmitted": req.ID}, nil
}

// handleHistoryRecheck clears every export mark, so each finished batch
// in memory is checked against the history store (and written to it if
// missing) before it may leave memory: after the store was restored from
// a backup older than some of the marks.
func (s *operatorHandlers) handleHistoryRecheck(w http.ResponseWriter, r *http.Request) (any, error) {
	lin := s.state.Lineage()
	if lin.Store == "" {
		return nil, coded(http.StatusConflict, "the exporter has not reached a history store yet: nothing was marked exported, so there is nothing to check again")
	}
	res, err := s.apply(&state.AdoptStore{Now: time.Now().UnixNano(), Store: lin.Store, Recheck: true})
	if err != nil {
		return nil, err
	}
	n := 0
	if ar, ok := res.(*state.AdoptResult); ok {
		n = ar.Unmarked
	}
	s.log.Warn("every finished batch in memory is checked against the history store again", "batches", n, "store", lin.Store, "by", userOf(r).Name)
	return api.HistoryRecheckResult{Batches: n, Store: lin.Store}, nil
}

func (s *operatorHandlers) handleTransferLeader(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.TransferLeaderRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	// This server leads (writes come to the leader). Asked to move
	// leadership from another server, or to the one leading: it moved
	// already, this is a retry.
	if (req.From != "" && req.From != s.cfg.ID) || req.ID == s.cfg.ID {
		addr, id := s.node.Leader()
		return api.LeaderStatus{Leader: addr, LeaderID: id, ServerID: s.cfg.ID}, nil
	}
	var to *raft.Server
	if req.ID != "" {
		cf := s.raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			return nil, err
		}
		for _, srv := range cf.Configuration().Servers {
			if string(srv.ID) == req.ID {
				to = &srv
			}
		}
		if to == nil {
			return nil, codedf(http.StatusNotFound, "server %.128q is not in the raft configuration", req.ID)
		}
	}
	// Audit it now, while this server can commit: once leadership moves,
	// the request's own entry would find no leader here.
	target := req.ID
	if target == "" {
		target = "any other server"
	}
	if who := callerOf(r); who != nil {
		e := state.TrimAudit(state.AuditEntry{Time: time.Now().UnixNano(), User: who.user, Accessor: who.accessor, Method: r.Method,
			Route: "POST /api/v1/operator/raft/transfer-leader", Path: r.URL.Path, Remote: s.remoteOf(r), Status: http.StatusAccepted,
			Message: "leadership transfer from " + s.cfg.ID + " to " + target})
		if _, err := s.apply(&state.Audit{Entries: []state.AuditEntry{e}}); err != nil {
			return nil, fmt.Errorf("audit the transfer: %w", err)
		}
		who.audited = true
	}
	var f raft.Future
	if to == nil {
		f = s.raft.LeadershipTransfer()
	} else {
		f = s.raft.LeadershipTransferToServer(to.ID, to.Address)
	}
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("transfer leadership: %w", err)
	}
	// Wait (briefly) until this server hears from the new leader.
	addr, id := s.node.Leader()
	for deadline := time.Now().Add(3 * time.Second); (id == "" || id == s.cfg.ID) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		addr, id = s.node.Leader()
	}
	return api.LeaderStatus{Leader: addr, LeaderID: id, ServerID: s.cfg.ID}, nil
}

// handleMemory closes the Raft transport's pooled connections, collects
// garbage and reports this server's heap, so a benchmark can measure the
// memory a batch costs: the pool grows with how busy Raft has been (under
// load, to several connections of 512 KiB a peer), not with what the
// state holds.
func (s *operatorHandlers) handleMemory(w http.ResponseWriter, r *http.Request) (any, error) {
	held := s.state.Held()
	auditBytes := s.state.AuditSize()
	active, retired := s.state.InstanceCounts()
	if s.raftStreams != nil {
		s.raftStreams.CloseStreams()
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out := api.MemoryStats{
		ServerID: s.cfg.ID, PID: os.Getpid(), HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse,
		HeapObjects: ms.HeapObjects, Sys: ms.Sys, NumGC: ms.NumGC,
		StateBatches: held.Batches, StateJobs: held.Jobs, AuditBytes: auditBytes,
		StateInstancesActive: int64(active), StateInstancesRetired: int64(retired),
	}
	if s.raftLog != nil {
		out.RaftLogRewriteDue, out.RaftLogRewrites = s.raftLog.RewriteDue(), s.raftLog.Rewrites()
	}
	return out, nil
}

// handleSnapshotSave streams the whole state: a header line, a JSON line
// with the Raft index and term, then the state machine's snapshot.
func (s *operatorHandlers) handleSnapshotSave(w http.ResponseWriter, r *http.Request) {
	noWriteDeadline(w) // a large state takes a while to stream
	sn := s.state.Snapshot()
	meta := snapshotMeta{Index: sn.Index(), Term: s.raft.CurrentTerm(), Server: s.cfg.ID, Time: time.Now().UTC(), AuditBytes: sn.AuditSize()}
	mb, _ := json.Marshal(meta)
	w.Header().Set("Content-Type", "application/octet-stream")
	bw := bufio.NewWriterSize(w, 1<<20)
	fmt.Fprintf(bw, "%s\n%s\n", snapshotMagic, mb)
	if _, err := sn.WriteTo(bw); err != nil {
		s.log.Error("snapshot save", "err", err)
		return
	}
	_ = bw.Flush()
}

// handleSnapshotRestore replaces the whole cluster's state with a saved
// snapshot (disaster recovery).
func (s *operatorHandlers) handleSnapshotRestore(w http.ResponseWriter, r *http.Request) (any, error) {
	// A whole state may take longer to upload than any other request.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	noWriteDeadline(w)
	br := bufio.NewReaderSize(r.Body, 1<<20)
	magic, err := br.ReadString('\n')
	if err != nil || strings.TrimSpace(magic) != snapshotMagic {
		return nil, coded(http.StatusBadRequest, "not a drover snapshot (written by 'drover operator snapshot save')")
	}
	line, err := br.ReadString('\n')
	var meta snapshotMeta
	if err != nil || json.Unmarshal([]byte(line), &meta) != nil {
		return nil, coded(http.StatusBadRequest, "snapshot header is damaged")
	}
	// Raft wants the size up front: spool the body to disk first.
	tmp, err := os.CreateTemp(s.cfg.DataDir, "restore-*.snap")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := io.Copy(tmp, br); err != nil {
		return nil, codedf(http.StatusBadRequest, "read snapshot: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	// The restored cluster gets a timeline of its own, and batch IDs
	// resume past every one used so far: by the timeline the restore
	// discards (this state's), and in the history store (which another
	// cluster may have written, if this one is new).
	out := api.RestoreResult{RestoredIndex: meta.Index, Taken: meta.Time, FromServer: meta.Server}
	resume := s.state.NextBatchID()
	if s.history != nil {
		st, err := s.history.Store()
		var top uint64
		if err == nil {
			top, err = st.MaxBatch(r.Context())
		}
		if err != nil {
			out.HistoryNote = fmt.Sprintf("the history store's highest batch ID could not be read (%v): batch IDs resume past this cluster's, and the exporter moves them past the store's when it reaches it", err)
		} else {
			resume = max(resume, top+1)
		}
	}
	forked, err := os.CreateTemp(s.cfg.DataDir, "restore-*.fork")
	if err != nil {
		return nil, err
	}
	defer os.Remove(forked.Name())
	defer forked.Close()
	fw := bufio.NewWriterSize(forked, 1<<20)
	fork, err := state.ForkSnapshot(bufio.NewReaderSize(tmp, 1<<20), fw, state.NewTimeline(), resume, time.Now().UnixNano())
	if err != nil {
		return nil, codedf(http.StatusBadRequest, "read snapshot: %w", err)
	}
	if err := fw.Flush(); err != nil {
		return nil, err
	}
	size, err := forked.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	if _, err := forked.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	out.Timeline, out.ResumeBatchID, out.DiscardedFromBatchID, out.Reexport = fork.NewTimeline, fork.Resume, fork.Below, fork.Unmarked
	// What is not the snapshot's to bring back: the gossip keyring in use
	// now (the snapshot's may hold a key removed since, perhaps because it
	// leaked) and the audit log's entries since (who did what stays
	// known, the restore included).
	var keys [][]byte
	if s.gossip != nil && s.gossip.Encrypted() {
		keys = s.keyring()
	}
	prior := s.state.AuditLog(time.Time{}, "", state.MaxAuditEntries+state.MaxAnonymousAuditEntries)
	rm := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: meta.Index, Term: meta.Term, Size: size}
	if err := s.raft.Restore(rm, bufio.NewReaderSize(forked, 1<<20), 5*time.Minute); err != nil {
		return nil, fmt.Errorf("restore snapshot: %w", err)
	}
	s.state.Read(func(r state.Reader) { out.Batches, out.Users = r.Counts() })
	if len(keys) > 0 && !slices.EqualFunc(keys, s.state.GossipKeyring(), bytes.Equal) {
		enc := make([]string, len(keys))
		for i, k := range keys {
			enc[i] = base64.StdEncoding.EncodeToString(k)
		}
		if _, err := s.apply(&state.GossipKeyring{Now: time.Now().UnixNano(), Op: "restore", Keys: enc}); err != nil {
			return nil, fmt.Errorf("the state is restored, but the gossip keyring in use before could not be put back (the snapshot's is in force; rotate it): %w", err)
		}
		out.KeyringKept = true
	}
	var since int64
	if last := s.state.AuditLog(time.Time{}, "", 1); len(last) > 0 {
		since = last[0].Time
	}
	var carry []state.AuditEntry
	for i := len(prior) - 1; i >= 0; i-- { // oldest first
		if prior[i].Time > since {
			carry = append(carry, prior[i])
		}
	}
	for len(carry) > 0 {
		n := min(len(carry), state.MaxAuditPerCommand)
		if _, err := s.apply(&state.Audit{Entries: carry[:n]}); err != nil {
			return nil, fmt.Errorf("the state is restored, but %d audit entries made since the snapshot could not be kept: %w", len(carry), err)
		}
		out.AuditKept += n
		carry = carry[n:]
	}
	s.log.Warn("state restored from a snapshot", "snapshot_index", meta.Index, "from_server", meta.Server, "taken", meta.Time, "by", userOf(r).Name,
		"batches", out.Batches, "users", out.Users, "keyring_kept", out.KeyringKept, "audit_kept", out.AuditKept,
		"timeline", out.Timeline, "resume_batch_id", out.ResumeBatchID, "discarded_from_batch_id", out.DiscardedFromBatchID, "reexport", out.Reexport)
	return out, nil
}
