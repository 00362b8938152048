// Package httpapi is the HTTP API of a drover server: the user, admin,
// worker and operator endpoints, authentication, forwarding of writes and
// consistent reads to the leader, and request metrics. It sees the node only
// through the small interfaces below, defined here where they are used.
package httpapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/cluster"
	"github.com/drover-sched/drover/server/logstore"
	"github.com/drover-sched/drover/server/state"
)

// maxBody bounds request bodies; a bunch of jobs should stay well below it.
const maxBody = 64 << 20

// ErrNotLeader means this server cannot accept writes now: it is not the
// leader, or lost leadership while the write was in flight. Node.Apply and
// Node.VerifyLeader return errors wrapping it.
var ErrNotLeader = errors.New("this server is not the leader")

// Node is the Raft node as the API needs it: leadership and writes.
type Node interface {
	// Apply commits a command and returns the state machine's answer; a
	// command the state machine rejected is a *state.ApplyError.
	Apply(c state.Command) (any, error)
	IsLeader() bool
	// Ready reports whether the local state has caught up with the log.
	Ready() bool
	// Leader returns the leader's Raft address and ID as this node knows
	// them (empty while there is none).
	Leader() (addr, id string)
	// VerifyLeader confirms with a quorum that this node still leads.
	VerifyLeader(ctx context.Context) error
	// LeaderMoved returns a channel closed the next time leadership changes.
	LeaderMoved() <-chan struct{}
}

// Raft is what the operator endpoints read and change in the Raft node;
// *raft.Raft has it.
type Raft interface {
	GetConfiguration() raft.ConfigurationFuture
	LeaderWithID() (raft.ServerAddress, raft.ServerID)
	Stats() map[string]string
	CurrentTerm() uint64
	LastIndex() uint64
	AppliedIndex() uint64
	RemoveServer(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	LeadershipTransfer() raft.Future
	LeadershipTransferToServer(id raft.ServerID, address raft.ServerAddress) raft.Future
	Restore(meta *raft.SnapshotMeta, reader io.Reader, timeout time.Duration) error
}

// Members is the membership view: who the other servers are and where
// their APIs listen.
type Members interface {
	Member(id string) (cluster.Member, bool)
	Members() []cluster.Member
}

// Liveness is told when a worker is heard from, and while it waits in a
// sync (a waiting worker is alive).
type Liveness interface {
	Touch(instance uint32)
	HoldSync(instance uint32) (release func())
	// Heard returns when an instance was last heard from (now while it
	// waits in a sync); false when this leader has not heard from it.
	Heard(instance uint32) (time.Time, bool)
}

// Notifier wakes held syncs when an instance's assignments change.
type Notifier interface {
	// Wait returns a channel closed at the instance's next change. Take it
	// before reading the state so no change is missed.
	Wait(instance uint32) <-chan struct{}
}

// Autoscaler tells what the leader's autoscaler decided last (nil: it has
// not decided, or does not run here).
type Autoscaler interface {
	LastRound() *api.AutoscaleRound
}

// Waiting says why Ready jobs were left unplaced by the last scheduling
// round this server ran as leader.
type Waiting interface {
	Batch(id uint64) []api.Waiting
	Job(batch uint64, job uint32) *api.Waiting
}

// Events commits worker events, grouped with those of concurrent syncs.
type Events interface {
	Submit(ctx context.Context, events []state.Event) error
}

// Config is what the handlers need to know about their server.
type Config struct {
	ID        string // this server's Raft ID
	Advertise string // the HTTP address other servers forward to
	// DataDir spools snapshots being restored.
	DataDir               string
	WorkerSecret          string
	DefaultBillingProject string
	ApplyTimeout          time.Duration
	MaxSyncWait           time.Duration
	// LostTimeout is how long a worker may be silent before it is
	// retired; within it, its node ID is taken.
	LostTimeout time.Duration
	// ClusterDownAfter: a cluster whose workers none was heard from for
	// this long (or LostTimeout) is shown down, as the scheduler treats it.
	ClusterDownAfter time.Duration
	MaxLost          uint8 // see state.Activate
	// PeerTLS, when set, is how this server reaches the others' APIs
	// (forwarding, log chunks): HTTPS verified against the cluster CA,
	// presenting this server's certificate. Nil: plain HTTP.
	PeerTLS    *tls.Config
	DebugPprof bool
	Limits     Limits
	Rates      RateLimits
}

// Deps is everything the API is built from. Members may be nil (a server
// without gossip); everything else is required.
type Deps struct {
	Config   Config
	Log      *slog.Logger
	State    *state.State
	Logs     *logstore.Store
	Node     Node
	Raft     Raft
	Members  Members
	Liveness Liveness
	Notifier Notifier
	Events   Events
	Waiting  Waiting // nil: batch and job reads carry no waiting reasons
	// Autoscaler: nil where it does not run.
	Autoscaler Autoscaler
	// Gossip: nil on a server without gossip.
	Gossip Gossip
	// Metrics gets the request metrics registered and is served on
	// /metrics.
	Metrics *prometheus.Registry
}

// Server serves the API.
type Server struct {
	cfg          Config
	log          *slog.Logger
	state        *state.State
	logs         *logstore.Store
	node         Node
	raft         Raft
	members      Members
	live         Liveness
	notify       Notifier
	events       Events
	waiting      Waiting
	autoscaler   Autoscaler
	gossip       Gossip
	reg          *prometheus.Registry
	httpRequests *prometheus.CounterVec
	httpSeconds  *prometheus.HistogramVec
	proxy        *httputil.ReverseProxy
	limits       limiters
	samples      sampleGate
	peerClient   *http.Client // to the other servers' APIs
	peerScheme   string       // "http" or "https"
}

// New builds the API and registers its metrics.
func New(d Deps) (*Server, error) {
	if d.Log == nil || d.State == nil || d.Logs == nil || d.Node == nil || d.Raft == nil ||
		d.Liveness == nil || d.Notifier == nil || d.Events == nil || d.Metrics == nil {
		return nil, errors.New("httpapi: every dependency but Members is required")
	}
	s := &Server{cfg: d.Config, log: d.Log, state: d.State, logs: d.Logs, node: d.Node, raft: d.Raft, members: d.Members,
		live: d.Liveness, notify: d.Notifier, events: d.Events, waiting: d.Waiting, reg: d.Metrics, autoscaler: d.Autoscaler, gossip: d.Gossip}
	s.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_http_requests_total", Help: "HTTP requests by route and status code."}, []string{"route", "code"})
	s.httpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "drover_http_request_seconds", Help: "HTTP request latency by route.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"route"})
	if err := d.Metrics.Register(s.httpRequests); err != nil {
		return nil, fmt.Errorf("register http metrics: %w", err)
	}
	if err := d.Metrics.Register(s.httpSeconds); err != nil {
		return nil, fmt.Errorf("register http metrics: %w", err)
	}
	s.peerScheme = "http"
	peerTransport := http.DefaultTransport.(*http.Transport).Clone()
	if d.Config.PeerTLS != nil {
		s.peerScheme = "https"
		peerTransport.TLSClientConfig = d.Config.PeerTLS.Clone()
	}
	s.peerClient = &http.Client{Transport: peerTransport}
	s.proxy = s.newProxy()
	return s, nil
}

func (s *Server) apply(c state.Command) (any, error) { return s.node.Apply(c) }

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	route := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, s.instrument(pattern, h))
	}
	route("GET /api/v1/health", s.handleHealth)
	route("GET /api/v1/status/leader", s.authUser(s.handleLeader))
	route("GET /api/v1/whoami", s.authUser(s.handleWhoami))

	route("POST /api/v1/batches", s.authUser(s.handleCreateBatch))
	route("GET /api/v1/batches", s.authUser(s.handleListBatches))
	route("GET /api/v1/batches/{id}", s.authUser(s.handleGetBatch))
	route("POST /api/v1/batches/{id}/cancel", s.authUser(s.handleCancelBatch))
	route("POST /api/v1/batches/{id}/updates", s.authUser(s.handleCreateUpdate))
	route("POST /api/v1/batches/{id}/updates/{update}/jobs", s.authUser(s.handleAddJobs))
	route("POST /api/v1/batches/{id}/updates/{update}/commit", s.authUser(s.handleCommitUpdate))
	route("GET /api/v1/batches/{id}/jobs", s.authUser(s.handleListJobs))
	route("GET /api/v1/batches/{id}/jobs/{job}", s.authUser(s.handleGetJob))
	route("GET /api/v1/batches/{id}/jobs/{job}/log", s.authUser(s.handleJobLog))
	route("GET /api/v1/batches/{id}/jobs/{job}/why", s.authUser(s.handleJobWhy))

	route("GET /api/v1/regions", s.authUser(s.handleListRegions))
	route("GET /api/v1/clusters", s.authUser(s.handleListClusters))
	route("GET /api/v1/cluster-groups", s.authUser(s.handleListClusterGroups))
	route("GET /api/v1/autoscaler", s.authUser(s.handleAutoscalerStatus))
	route("GET /api/v1/clusters/{name}", s.authUser(s.handleGetCluster))
	route("POST /api/v1/clusters/{name}/disable", s.authAdmin(s.handleDisableCluster))
	route("POST /api/v1/clusters/{name}/enable", s.authAdmin(s.handleEnableCluster))
	route("GET /api/v1/teams", s.authUser(s.handleListTeams))
	route("GET /api/v1/teams/{name}", s.authUser(s.handleGetTeam))
	route("PUT /api/v1/teams/{name}", s.authAdmin(s.handlePutTeam))
	route("PUT /api/v1/teams/{name}/quota", s.authAdmin(s.handlePutQuota))
	route("POST /api/v1/placement", s.authAdmin(s.handleApplyPlacement))

	route("POST /api/v1/users", s.authAdmin(s.handleCreateUser))
	route("GET /api/v1/users", s.authAdmin(s.handleListUsers))
	route("POST /api/v1/users/{name}/token", s.authAdmin(s.handleRotateToken))
	route("POST /api/v1/billing-projects", s.authAdmin(s.handleCreateBillingProject))
	route("GET /api/v1/billing-projects", s.authUser(s.handleListBillingProjects))
	route("POST /api/v1/billing-projects/{name}/members", s.authAdmin(s.handleAddMember))
	route("DELETE /api/v1/billing-projects/{name}/members/{user}", s.authAdmin(s.handleRemoveMember))
	route("GET /api/v1/instances", s.authAdmin(s.handleListInstances))
	route("GET /api/v1/status/peers", s.authUser(s.handlePeers))
	route("POST /api/v1/operator/raft/remove-peer", s.authAdmin(s.handleRemovePeer))
	route("POST /api/v1/operator/raft/transfer-leader", s.authAdmin(s.handleTransferLeader))
	route("GET /api/v1/operator/snapshot", s.authAdmin(s.handleSnapshotSave))
	route("PUT /api/v1/operator/snapshot", s.authAdmin(s.handleSnapshotRestore))
	route("GET /api/v1/operator/memory", s.authAdmin(s.handleMemory))
	route("GET /api/v1/operator/gossip/keyring", s.authAdmin(s.handleGossipKeyring))
	route("POST /api/v1/operator/gossip/keyring", s.authAdmin(s.handleChangeGossipKeyring))
	if s.cfg.DebugPprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}

	route("POST /api/v1/workers/activate", s.handleActivate)
	route("POST /api/v1/workers/sync", s.authWorker(s.handleSync))
	route("POST /api/v1/workers/deactivate", s.authWorker(s.handleDeactivate))
	route("PUT /api/v1/workers/logs/{id}/{job}/{attempt}/{seq}", s.authWorker(s.handleLogChunk))

	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		if s.node.IsLeader() {
			w.Header().Set(api.LeaderHeader, s.cfg.Advertise)
		}
		local := pattern == "" || localRoutes[pattern] || strings.HasPrefix(pattern, "GET /debug/pprof/")
		stale := isStale(r)
		// Writes and consistent reads are the leader's; any server passes
		// them on. Stale reads are served from this server's own state.
		if !local && !stale && !s.node.IsLeader() {
			s.forward(w, r)
			return
		}
		if pattern != "GET /metrics" && pattern != "GET /api/v1/health" && !s.node.Ready() {
			writeError(w, http.StatusServiceUnavailable, "server is starting: it is still catching up with the Raft log; retry in a few seconds")
			return
		}
		if pattern == "" {
			// ServeMux answers unknown paths and methods in plain text;
			// answer in JSON like every other error.
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, r)
			if rec.Code == http.StatusMethodNotAllowed {
				w.Header().Set("Allow", rec.Header().Get("Allow"))
				writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, rec.Header().Get("Allow")))
				return
			}
			writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s (the API lives under /api/v1)", r.Method, r.URL.Path))
			return
		}
		if r.Method == http.MethodGet && !local && !stale {
			// A consistent read: make sure we still lead before answering.
			if err := s.node.VerifyLeader(r.Context()); err != nil {
				s.writeErr(w, fmt.Errorf("%w: %v", ErrNotLeader, err))
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// isStale reports whether a read asks to be served from the receiving
// server's own state rather than the leader's.
func isStale(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Query().Get("stale") == "true"
}

// localRoutes are answered by whichever server receives them, from its own
// view: health, metrics and cluster status.
var localRoutes = map[string]bool{
	"GET /api/v1/health":          true,
	"GET /metrics":                true,
	"GET /api/v1/status/leader":   true,
	"GET /api/v1/status/peers":    true,
	"GET /api/v1/operator/memory": true,
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// noWriteDeadline lifts the server's write timeout for a response that may
// rightly take long: a streamed log or snapshot, a forwarded request.
func noWriteDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) instrument(route string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h(sw, r)
		s.httpRequests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		s.httpSeconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
		switch {
		case sw.code == http.StatusServiceUnavailable:
			s.log.Debug("request refused: no leader or not ready", "method", r.Method, "path", r.URL.Path)
		case sw.code >= 500:
			s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "code", sw.code)
		}
	})
}

type ctxKey int

const (
	userKey ctxKey = iota
	instanceKey
)

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

func (s *Server) authUser(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r)
		if tok == "" {
			writeError(w, http.StatusUnauthorized, "missing token: send Authorization: Bearer <token> (the CLI reads DROVER_TOKEN or ~/.config/drover/token)")
			return
		}
		u, ok := s.state.UserByTokenHash(token.Hash(tok))
		if !ok {
			writeError(w, http.StatusUnauthorized, "invalid token: no user has this token")
			return
		}
		if !s.allowRate(w, r, "user:"+u.Name, "user "+u.Name, "max_requests_per_second_per_user", s.cfg.Rates.UserPerSecond) {
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), userKey, u)))
	}
}

func (s *Server) authAdmin(h http.HandlerFunc) http.HandlerFunc {
	return s.authUser(func(w http.ResponseWriter, r *http.Request) {
		if u := userOf(r); !u.Admin {
			writeError(w, http.StatusForbidden, fmt.Sprintf("user %q is not an admin; ask an admin to do this", u.Name))
			return
		}
		h(w, r)
	})
}

func userOf(r *http.Request) state.User {
	u, _ := r.Context().Value(userKey).(state.User)
	return u
}

func viewerOf(r *http.Request) state.Viewer {
	u := userOf(r)
	return state.Viewer{Name: u.Name, Admin: u.Admin}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// reply answers in MessagePack when the request asks for it (Accept), in
// JSON otherwise; the bulk endpoints answer this way.
func reply(w http.ResponseWriter, r *http.Request, code int, v any) {
	if r.Header.Get("Accept") != api.MsgpackContentType {
		writeJSON(w, code, v)
		return
	}
	data, err := api.MarshalMsgpack(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal error: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", api.MsgpackContentType)
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, api.ErrorResponse{Error: msg})
}

// writeErr maps an error to a status code and a message.
func (s *Server) writeErr(w http.ResponseWriter, err error) {
	var ae *state.ApplyError
	switch {
	case errors.As(err, &ae):
		code := map[state.ErrorKind]int{
			state.ErrInvalid: http.StatusBadRequest, state.ErrNotFound: http.StatusNotFound,
			state.ErrConflict: http.StatusConflict, state.ErrForbidden: http.StatusForbidden,
		}[ae.Kind]
		if code == 0 {
			code = http.StatusBadRequest
		}
		writeError(w, code, ae.Msg)
	case errors.Is(err, ErrNotLeader):
		addr, _ := s.node.Leader()
		msg := "no cluster leader right now; retry in a few seconds"
		if addr != "" {
			msg = fmt.Sprintf("this server is not the leader (the leader is at raft address %s); retry", addr)
		}
		writeError(w, http.StatusServiceUnavailable, msg+" ("+err.Error()+")")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, "request cancelled or timed out: "+err.Error())
	default:
		s.log.Error("internal error", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: "+err.Error())
	}
}

// decode reads a JSON body strictly: unknown fields are errors, so a typo in
// a field name does not silently do nothing.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeLimit(w, r, v, maxBody, "send jobs in smaller bunches")
}

// maxUnauthenticatedBody bounds the body of a request that is read before
// its sender is known (worker activation): a stranger must not make the
// server read megabytes.
const maxUnauthenticatedBody = 64 << 10

// decodeLimit is decode with a body limit and a hint for a body beyond it.
// A body sent as MessagePack (Content-Type) is read as such.
func decodeLimit(w http.ResponseWriter, r *http.Request, v any, limit int64, hint string) bool {
	if r.Header.Get("Content-Type") == api.MsgpackContentType {
		return decodeMsgpack(w, r, v, limit, hint)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %s; %s", formatSize(limit), hint))
		case errors.Is(err, io.EOF):
			writeError(w, http.StatusBadRequest, "request body is empty; expected a JSON object")
		default:
			writeError(w, http.StatusBadRequest, "request body is not valid: "+err.Error())
		}
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "request body has data after the JSON object")
		return false
	}
	return true
}

func decodeMsgpack(w http.ResponseWriter, r *http.Request, v any, limit int64, hint string) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %s; %s", formatSize(limit), hint))
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, "request body could not be read: "+err.Error())
		return false
	case len(data) == 0:
		writeError(w, http.StatusBadRequest, "request body is empty; expected a msgpack map")
		return false
	}
	if err := api.UnmarshalMsgpack(data, v); err != nil {
		writeError(w, http.StatusBadRequest, "request body is not valid msgpack for this endpoint: "+err.Error())
		return false
	}
	return true
}

// formatSize renders a body limit: "64 MiB", "64 KiB".
func formatSize(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

func pathID(w http.ResponseWriter, r *http.Request, name string) (uint64, bool) {
	v, err := strconv.ParseUint(r.PathValue(name), 10, 64)
	if err != nil || v == 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %q is not a positive integer", name, r.PathValue(name)))
		return 0, false
	}
	return v, true
}

func queryID(w http.ResponseWriter, r *http.Request, name string) (uint64, bool) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return 0, true
	}
	v, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query parameter %s=%q is not a non-negative integer", name, raw))
		return 0, false
	}
	return v, true
}

// handleHealth answers 200 when the server is ready to serve the API and 503
// while it starts (load balancers should route by it).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	addr, id := s.node.Leader()
	code := http.StatusOK
	if !s.node.Ready() {
		code = http.StatusServiceUnavailable
	}
	body := map[string]any{"ok": code == http.StatusOK, "ready": s.node.Ready(), "server_id": s.cfg.ID, "leader": addr, "leader_id": id}
	if code != http.StatusOK {
		body["error"] = "server is starting: it is still catching up with the Raft log"
	}
	writeJSON(w, code, body)
}

func (s *Server) handleLeader(w http.ResponseWriter, r *http.Request) {
	addr, id := s.node.Leader()
	writeJSON(w, http.StatusOK, api.LeaderStatus{
		Leader: addr, LeaderID: id, ServerID: s.cfg.ID, IsLeader: s.node.IsLeader(),
		Term: s.raft.CurrentTerm(), LastIndex: s.raft.LastIndex(), AppliedIdx: s.raft.AppliedIndex(),
	})
}

func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	writeJSON(w, http.StatusOK, api.User{Name: u.Name, Admin: u.Admin, TimeCreated: time.Unix(0, u.Created).UTC()})
}
