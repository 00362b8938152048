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
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/changes"
	"github.com/drover-sched/drover/server/cluster"
	"github.com/drover-sched/drover/server/joblogs"
	"github.com/drover-sched/drover/server/samples"
	"github.com/drover-sched/drover/server/state"
)

// maxBody bounds request bodies; a bunch of jobs should stay well below it.
const maxBody = 64 << 20

// ErrNotLeader means this server cannot accept writes now: it is not the
// leader, or lost leadership while the write was in flight. Node.Apply and
// Node.VerifyLeader return errors wrapping it.
var ErrNotLeader = errors.New("this server is not the leader")

// History is the history store and how it is doing.
type History interface {
	// Store returns the store, or why it cannot be used now.
	Store() (history.Store, error)
	Status() api.HistoryStatus
}

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
	// Unreachable lists the servers the leader's heartbeats fail to
	// reach (empty on a follower).
	Unreachable() []string
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

// RaftLog is the Raft log store, as the memory report shows it.
type RaftLog interface {
	// RewriteDue reports whether the log file holds enough written or
	// freed since it was opened to be rewritten once the server is
	// quiet: until then BoltDB's bookkeeping for it is in the heap.
	RewriteDue() bool
	// Rewrites counts the rewrites since the server started.
	Rewrites() int64
}

// RaftStreams is the Raft transport's pool of connections to the other
// servers.
type RaftStreams interface {
	// CloseStreams closes the pooled connections (each holds 256 KiB
	// buffers on both ends and stays while the pool has room, up to its
	// MaxPool per peer); Raft dials again on its next call.
	CloseStreams()
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
	// Queue says what the leader's last preemption round found of a
	// queue that waits: when its guarantee is reclaimed, when it
	// preempts for fair share (none: neither).
	Queue(path string) []api.Waiting
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
	// DefaultTokenTTL is how long a token lives when its maker does not
	// say (users' first tokens too).
	DefaultTokenTTL time.Duration
	// MetricsToken, when set, protects /metrics.
	MetricsToken string
	// PeerTLS, when set, is how this server reaches the others' APIs
	// (forwarding, log chunks): HTTPS verified against the cluster CA,
	// presenting this server's certificate. Nil: plain HTTP.
	PeerTLS    *tls.Config
	DebugPprof bool
	Limits     Limits
	Rates      RateLimits
	// CallbackAllow are the destinations batches' completion callbacks
	// may go to (api.CallbackAllowed; none: callbacks are refused).
	CallbackAllow []*url.URL
	// QueueUsageRetention is how long the history store keeps queue
	// samples: the queue reports over them take no more days than it
	// holds whole (0: no bound but their own 365 days).
	QueueUsageRetention time.Duration
}

// Deps is everything the API is built from. Members may be nil (a server
// without gossip); everything else is required.
type Deps struct {
	Config   Config
	Log      *slog.Logger
	State    *state.State
	Logs     *joblogs.Store
	Node     Node
	Raft     Raft
	Members  Members
	Liveness Liveness
	Notifier Notifier
	Events   Events
	Waiting  Waiting // nil: batch and job reads carry no waiting reasons
	// Autoscaler: nil where it does not run.
	Autoscaler Autoscaler
	// Provider, when set, says what a cluster's provider can tell (its
	// zones, whether it reads the cloud's prices), so that a launch
	// config naming another zone, or taking the cloud's price where the
	// provider cannot read it, is refused when it is applied.
	Provider func(ctx context.Context, cluster, kind string, settings map[string]string) (ProviderInfo, error)
	// Gossip: nil on a server without gossip.
	Gossip Gossip
	// History is where batches that left the state are read from (nil:
	// nowhere).
	History History
	// RaftLog: nil where the Raft log store is not the server's own.
	RaftLog RaftLog
	// RaftStreams, when set, is closed before the memory report.
	RaftStreams RaftStreams
	// Secrets seals storage credentials (nil: the server keeps none, and
	// refuses prefixes with credentials).
	Secrets Secrets
	// Metrics gets the request metrics registered and is served on
	// /metrics.
	Metrics *prometheus.Registry
	// Changes is the feed of what applied entries changed, served as
	// the change stream (nil: the stream answers 503).
	Changes *changes.Feed
	// Samples are attempts' usage over time (nil: none kept).
	Samples *samples.Store
}

// Server serves the API. It is the core the handlers share: construction,
// the route table, authentication and authorization, the reply wrapper,
// applying and forwarding to the leader, and shared helpers. The handlers
// are methods of a few groups by concern that embed it (batchHandlers,
// workerHandlers, placementHandlers, identityHandlers, projectHandlers,
// operatorHandlers); Routes builds them.
type Server struct {
	cfg            Config
	log            *slog.Logger
	state          *state.State
	reads          apiview.Reads // the state's reads as the API shows them
	logs           *joblogs.Store
	node           Node
	raft           Raft
	members        Members
	live           Liveness
	notify         Notifier
	events         Events
	waiting        Waiting
	provider       func(ctx context.Context, cluster, kind string, settings map[string]string) (ProviderInfo, error)
	autoscaler     Autoscaler
	gossip         Gossip
	history        History
	raftLog        RaftLog
	raftStreams    RaftStreams
	secrets        Secrets
	reg            *prometheus.Registry
	httpRequests   *prometheus.CounterVec
	httpSeconds    *prometheus.HistogramVec
	proxy          *httputil.ReverseProxy
	limits         limiters
	anonLimits     limiters    // per address, for requests that fail to authenticate
	anon           anonCounter // audited requests without a valid token, counted
	attributeLogs  sync.Once   // the log store learns its batches' projects once
	samples        sampleGate
	peerClient     *http.Client // to the other servers' APIs
	audit          *auditor
	metricsHandler http.Handler
	peerScheme     string      // "http" or "https"
	blocks         blockCache  // the Nomad API's answers, for blocking queries
	streams        streamSlots // the Nomad API's long streams, per user
	changes        *changes.Feed
	usage          *samples.Store
	changeStreams  streamSlots // change streams, per user
}

// New builds the API and registers its metrics.
func New(d Deps) (*Server, error) {
	if d.Log == nil || d.State == nil || d.Logs == nil || d.Node == nil || d.Raft == nil ||
		d.Liveness == nil || d.Notifier == nil || d.Events == nil || d.Metrics == nil {
		return nil, errors.New("httpapi: every dependency but Members is required")
	}
	s := &Server{cfg: d.Config, log: d.Log, state: d.State, logs: d.Logs, node: d.Node, raft: d.Raft, members: d.Members,
		live: d.Liveness, notify: d.Notifier, events: d.Events, waiting: d.Waiting, reg: d.Metrics, autoscaler: d.Autoscaler, provider: d.Provider, gossip: d.Gossip, history: d.History, raftLog: d.RaftLog, raftStreams: d.RaftStreams,
		secrets: d.Secrets, changes: d.Changes, usage: d.Samples}
	s.changeStreams = streamSlots{most: maxChangeStreams, what: "change streams (live pages)", mostTotal: maxChangeStreamsTotal}
	s.reads = apiview.Reads{State: d.State}
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
	s.audit = newAuditor()
	if err := d.Metrics.Register(s.audit.dropped); err != nil {
		return nil, fmt.Errorf("register audit metrics: %w", err)
	}
	s.metricsHandler = promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	s.proxy = s.newProxy()
	return s, nil
}

func (s *Server) apply(c state.Command) (any, error) { return s.node.Apply(c) }

// Access says who may call a route, before the handler's own checks
// (batch and billing project roles).
type Access string

// Route access.
const (
	Public   Access = "public"   // anyone (health; metrics unless -metrics-token)
	AnyUser  Access = "user"     // a valid user token
	Admin    Access = "admin"    // an admin's token
	Worker   Access = "worker"   // a worker instance's token
	Activate Access = "activate" // a worker presenting the worker secret or its machine's join token
)

// Route is one endpoint of the API. A JSON endpoint's handler is a
// handlerFunc turned into an http.HandlerFunc by wrap; those that stream
// (job logs, snapshots, metrics) or hold the request (worker syncs) are
// registered as they are.
type Route struct {
	Pattern string
	Access  Access
	handler http.HandlerFunc
}

// Routes lists every endpoint of the API (the authorization test is
// generated from it).
func (s *Server) Routes() []Route {
	u, a := AnyUser, Admin
	batches, workers, place := &batchHandlers{s}, &workerHandlers{s}, &placementHandlers{s}
	ids, projects, ops := &identityHandlers{s}, &projectHandlers{s}, &operatorHandlers{s}
	return append([]Route{
		{"GET /api/v1/health", Public, s.wrap(ops.handleHealth)},
		{"GET /metrics", Public, ops.handleMetrics},
		{"GET /api/v1/status/leader", u, s.wrap(ops.handleLeader)},
		{"GET /api/v1/whoami", u, s.wrap(ids.handleWhoami)},

		{"POST /api/v1/batches", u, s.wrap(batches.handleCreateBatch)},
		{"GET /api/v1/changes", u, s.handleChanges},
		{"GET /api/v1/batches", u, s.wrap(batches.handleListBatches)},
		{"GET /api/v1/batches/{id}", u, s.wrap(batches.handleGetBatch)},
		{"POST /api/v1/batches/{id}/cancel", u, s.wrap(batches.handleCancelBatch)},
		{"POST /api/v1/batches/{id}/jobs/{job}/restart", u, s.wrap(batches.handleJobRestart)},
		{"POST /api/v1/batches/{id}/retry", u, s.wrap(batches.handleRetry)},
		{"GET /api/v1/batches/{id}/job-groups", u, s.wrap(batches.handleListJobGroups)},
		{"GET /api/v1/batches/{id}/job-groups/{group}", u, s.wrap(batches.handleGetJobGroup)},
		{"POST /api/v1/batches/{id}/job-groups/{group}/cancel", u, s.wrap(batches.handleCancelJobGroup)},
		{"GET /api/v1/batches/{id}/efficiency", u, s.wrap(batches.handleEfficiency)},
		{"POST /api/v1/batches/{id}/updates", u, s.wrap(batches.handleCreateUpdate)},
		{"POST /api/v1/batches/{id}/updates/{update}/jobs", u, s.wrap(batches.handleAddJobs)},
		{"POST /api/v1/batches/{id}/updates/{update}/commit", u, s.wrap(batches.handleCommitUpdate)},
		{"GET /api/v1/batches/{id}/stages", u, s.wrap(batches.handleBatchStages)},
		{"GET /api/v1/batches/{id}/jobs", u, s.wrap(batches.handleListJobs)},
		{"GET /api/v1/batches/{id}/jobs/{job}", u, s.wrap(batches.handleGetJob)},
		{"GET /api/v1/batches/{id}/jobs/{job}/log", u, batches.handleJobLog},
		{"GET /api/v1/batches/{id}/jobs/{job}/why", u, s.wrap(batches.handleJobWhy)},
		{"GET /api/v1/batches/{id}/jobs/{job}/usage", u, s.wrap(batches.handleAttemptUsage)},

		{"GET /api/v1/regions", u, s.wrap(place.handleListRegions)},
		{"GET /api/v1/clusters", u, s.wrap(place.handleListClusters)},
		{"GET /api/v1/cluster-groups", u, s.wrap(place.handleListClusterGroups)},
		{"GET /api/v1/autoscaler", u, s.wrap(place.handleAutoscalerStatus)},
		{"GET /api/v1/clusters/{name}", u, s.wrap(place.handleGetCluster)},
		{"POST /api/v1/clusters/{name}/disable", a, s.wrap(place.handleDisableCluster)},
		{"POST /api/v1/clusters/{name}/enable", a, s.wrap(place.handleEnableCluster)},
		{"DELETE /api/v1/clusters/{name}", a, s.wrap(place.removeDeclared(state.KindCluster))},
		{"DELETE /api/v1/cluster-groups/{name}", a, s.wrap(place.removeDeclared(state.KindClusterGroup))},
		{"DELETE /api/v1/autoscaler/launch-configs/{name}", a, s.wrap(place.removeDeclared(state.KindLaunchConfig))},
		{"GET /api/v1/queues", u, s.wrap(place.handleListQueues)},
		{"GET /api/v1/queues/{path...}", u, s.wrap(place.handleGetQueue)},
		{"PUT /api/v1/queues/{path...}", a, s.wrap(place.handlePutQueue)},
		{"DELETE /api/v1/queues/{path...}", a, s.wrap(place.handleDeleteQueue)},
		{"GET /api/v1/queue-recommendations", u, s.wrap(place.handleRecommendQueues)},
		{"GET /api/v1/queue-slo", u, s.wrap(place.handleQueueSLO)},
		{"GET /api/v1/queue-history", u, s.wrap(place.handleQueueHistory)},
		{"GET /api/v1/queue-report", u, s.wrap(place.handleQueueReport)},
		{"GET /api/v1/queue-rebalance", u, s.wrap(place.handleProposeRebalance)},
		{"POST /api/v1/queue-rebalance", a, s.wrap(place.handleApplyRebalance)},
		{"POST /api/v1/queue-auto-apply", a, s.wrap(place.handleQueueAutoApply)},
		{"POST /api/v1/queue-rollback", a, s.wrap(place.handleQueueRollback)},
		{"POST /api/v1/placement", a, s.wrap(place.handleApplyPlacement)},

		{"POST /api/v1/users", a, s.wrap(ids.handleCreateUser)},
		{"GET /api/v1/users", a, s.wrap(ids.handleListUsers)},
		{"DELETE /api/v1/users/{name}", a, s.wrap(ids.handleDeleteUser)},
		{"POST /api/v1/users/{name}/token", a, s.wrap(ids.handleRotateToken)},
		{"POST /api/v1/tokens", u, s.wrap(ids.handleCreateToken)},
		{"GET /api/v1/tokens", u, s.wrap(ids.handleListTokens)},
		{"DELETE /api/v1/tokens/{accessor}", u, s.wrap(ids.handleRevokeToken)},
		{"POST /api/v1/tokens/{accessor}/rotate", u, s.wrap(ids.handleRotateOwnToken)},
		{"POST /api/v1/billing-projects", a, s.wrap(projects.handleCreateBillingProject)},
		{"GET /api/v1/billing-projects", u, s.wrap(projects.handleListBillingProjects)},
		{"DELETE /api/v1/billing-projects/{name}", a, s.wrap(projects.handleDeleteBillingProject)},
		{"POST /api/v1/billing-projects/{name}/members", u, s.wrap(projects.handleAddMember)},
		{"DELETE /api/v1/billing-projects/{name}/members/{user}", u, s.wrap(projects.handleRemoveMember)},
		{"PUT /api/v1/billing-projects/{name}/spend-limit", u, s.wrap(projects.handleSetSpendLimit)},
		{"PUT /api/v1/billing-projects/{name}/max-priority", u, s.wrap(projects.handleSetMaxPriority)},
		{"PUT /api/v1/billing-projects/{name}/log-quota", a, s.wrap(projects.handleSetLogQuota)},
		{"GET /api/v1/billing-projects/{name}/cost", u, s.wrap(projects.handleProjectCost)},
		{"GET /api/v1/efficiency", u, s.wrap(projects.handlePeriodEfficiency)},
		{"GET /api/v1/billing-projects/{name}/storage", u, s.wrap(projects.handleListStorage)},
		{"POST /api/v1/billing-projects/{name}/storage", a, s.wrap(projects.handleAddStorage)},
		{"DELETE /api/v1/billing-projects/{name}/storage", a, s.wrap(projects.handleRemoveStorage)},
		{"PUT /api/v1/billing-projects/{name}/settings", a, s.wrap(projects.handleProjectSettings)},
		{"GET /api/v1/audit", a, s.wrap(ids.handleAudit)},
		{"GET /api/v1/rates", u, s.wrap(projects.handleListRates)},
		{"PUT /api/v1/rates", a, s.wrap(projects.handleSetRates)},
		{"GET /api/v1/instances", a, s.wrap(workers.handleListInstances)},
		{"GET /api/v1/status/peers", u, s.wrap(ops.handlePeers)},
		{"POST /api/v1/operator/raft/remove-peer", a, s.wrap(ops.handleRemovePeer)},
		{"POST /api/v1/operator/raft/readmit", a, s.wrap(ops.handleReadmitPeer)},
		{"POST /api/v1/operator/history/recheck", a, s.wrap(ops.handleHistoryRecheck)},
		{"POST /api/v1/operator/raft/transfer-leader", a, s.wrap(ops.handleTransferLeader)},
		{"GET /api/v1/operator/snapshot", a, ops.handleSnapshotSave},
		{"PUT /api/v1/operator/snapshot", a, s.wrap(ops.handleSnapshotRestore)},
		{"GET /api/v1/operator/memory", a, s.wrap(ops.handleMemory)},
		{"GET /api/v1/operator/gossip/keyring", a, s.wrap(ops.handleGossipKeyring)},
		{"POST /api/v1/operator/gossip/keyring", a, s.wrap(ops.handleChangeGossipKeyring)},

		{"POST /api/v1/workers/activate", Activate, s.wrap(workers.handleActivate)},
		{"POST /api/v1/workers/sync", Worker, workers.handleSync},
		{"POST /api/v1/workers/deactivate", Worker, s.wrap(workers.handleDeactivate)},
		{"PUT /api/v1/workers/logs/{id}/{job}/{attempt}/{seq}", Worker, s.wrap(workers.handleLogChunk)},
	}, s.nomadRoutes()...)
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.Routes() {
		h := rt.handler
		switch rt.Access {
		case AnyUser:
			h = s.authUser(h)
		case Admin:
			h = s.authAdmin(h)
		case Worker:
			h = s.authWorker(h)
		}
		mux.Handle(rt.Pattern, s.instrument(rt.Pattern, rt.Access, h))
	}
	if s.cfg.DebugPprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}

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
			s.writeErr(w, coded(http.StatusServiceUnavailable, "server is starting: it is still catching up with the Raft log; retry in a few seconds"))
			return
		}
		if pattern == "" {
			// ServeMux answers unknown paths and methods in plain text;
			// answer in JSON like every other error.
			if allow := allowedMethods(mux, r); len(allow) > 0 {
				w.Header().Set("Allow", strings.Join(allow, ", "))
				s.writeErr(w, codedf(http.StatusMethodNotAllowed, "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
				return
			}
			s.writeErr(w, codedf(http.StatusNotFound, "no such endpoint: %s %s (the API lives under /api/v1, and Nomad's batch API under /v1: docs/nomad.md)", r.Method, r.URL.Path))
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

// allowedMethods lists the methods mux serves r's path with (none: the
// path is unknown).
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := *r
		probe.Method = m
		if _, pattern := mux.Handler(&probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	return allow
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
	// keepError keeps the start of an error answer (code >= 400), for
	// the audit log.
	keepError bool
	errBody   []byte
}

// errorMessage is the message of the JSON error answered, if any.
func (w *statusWriter) errorMessage() string {
	if w.code < 400 || len(w.errBody) == 0 {
		return ""
	}
	var e api.ErrorResponse
	if json.Unmarshal(w.errBody, &e) == nil && e.Error != "" {
		return e.Error
	}
	return string(w.errBody)
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.keepError && w.code >= 400 && len(w.errBody) < 1024 {
		w.errBody = append(w.errBody, p[:min(len(p), 1024-len(w.errBody))]...)
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

func (s *Server) instrument(route string, access Access, h http.HandlerFunc) http.Handler {
	audited := access != Worker
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		var who *caller
		if audited && isMutating(r.Method) {
			who = &caller{}
			sw.keepError = true
			r = r.WithContext(context.WithValue(r.Context(), callerKey, who))
		}
		h(sw, r)
		s.httpRequests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
		s.httpSeconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
		switch {
		case sw.code == http.StatusServiceUnavailable:
			s.log.Debug("request refused: no leader or not ready", "method", r.Method, "path", r.URL.Path)
		case sw.code >= 500:
			s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "code", sw.code)
		}
		if who != nil && !who.audited {
			// Cut to the log's sizes here, before the entry is queued: a
			// 1 MB path must not travel through Raft to be cut at apply.
			e := state.TrimAudit(state.AuditEntry{Time: start.UnixNano(), User: who.user, Accessor: who.accessor,
				Method: r.Method, Route: route, Path: r.URL.Path, Remote: s.remoteOf(r), Status: sw.code, Message: sw.errorMessage()})
			if e.Anonymous() {
				s.anon.add(e)
			} else {
				s.audit.record(e)
			}
		}
	})
}

func isMutating(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodDelete || method == http.MethodPatch
}

// caller is who made a request, filled in by authentication, for the
// audit log.
// caller is who made a request; audited: the handler committed the
// request's audit entry itself.
type caller struct {
	user, accessor string
	audited        bool
}

func callerOf(r *http.Request) *caller {
	c, _ := r.Context().Value(callerKey).(*caller)
	return c
}

// remoteOf is where a request came from: its peer address, or, for one a
// server forwarded, the client's address that server saw.
func (s *Server) remoteOf(r *http.Request) string {
	if fwd := r.Header.Get("X-Forwarded-For"); fwd != "" && s.fromPeer(r) {
		first, _, _ := strings.Cut(fwd, ",")
		return strings.TrimSpace(first)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

type ctxKey int

const (
	userKey ctxKey = iota
	instanceKey
	callerKey
	tokenKey
)

// bearer is a request's token: Authorization: Bearer, or, from a Nomad
// client, X-Nomad-Token.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return strings.TrimSpace(r.Header.Get("X-Nomad-Token"))
}

func (s *Server) authUser(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r)
		// Nomad's API answers a missing or unknown token 403.
		unauthorized := http.StatusUnauthorized
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			unauthorized = http.StatusForbidden
		}
		if tok == "" {
			err := s.allowAnonymous(w, r)
			if err == nil {
				err = coded(unauthorized, "missing token: send Authorization: Bearer <token> (the CLI reads DROVER_TOKEN or ~/.config/drover/token; Nomad's clients send NOMAD_TOKEN as X-Nomad-Token)")
			}
			s.writeErr(w, err)
			return
		}
		u, t, st := s.state.Authenticate(token.Hash(tok), time.Now())
		if st != state.TokenValid {
			if err := s.allowAnonymous(w, r); err != nil {
				s.writeErr(w, err)
				return
			}
		}
		switch st {
		case state.TokenUnknown:
			s.writeErr(w, coded(unauthorized, "invalid token: it was never made, was revoked, or its user was deleted"))
			return
		case state.TokenExpired:
			s.writeErr(w, codedf(unauthorized, "token %q (%s) of user %q expired at %s; make a new one with `drover token create` (an admin can with `drover user rotate-token %s`)",
				t.Name, t.Accessor, u.Name, time.Unix(0, t.Expires).UTC().Format(time.RFC3339), u.Name))
			return
		}
		if c := callerOf(r); c != nil {
			c.user, c.accessor = u.Name, t.Accessor
		}
		if err := s.allowRate(w, r, "user:"+u.Name, "user "+u.Name, "max_requests_per_second_per_user", s.cfg.Rates.UserPerSecond); err != nil {
			s.writeErr(w, err)
			return
		}
		ctx := context.WithValue(r.Context(), userKey, u)
		h(w, r.WithContext(context.WithValue(ctx, tokenKey, t)))
	}
}

func (s *Server) authAdmin(h http.HandlerFunc) http.HandlerFunc {
	return s.authUser(func(w http.ResponseWriter, r *http.Request) {
		if u := userOf(r); !u.Admin {
			s.writeErr(w, codedf(http.StatusForbidden, "user %q is not an admin; ask an admin to do this", u.Name))
			return
		}
		h(w, r)
	})
}

func userOf(r *http.Request) state.User {
	u, _ := r.Context().Value(userKey).(state.User)
	return u
}

// tokenOf is the token an authenticated request came with.
func tokenOf(r *http.Request) state.Token {
	t, _ := r.Context().Value(tokenKey).(state.Token)
	return t
}

func viewerOf(r *http.Request) state.Viewer {
	u := userOf(r)
	return state.Viewer{Name: u.Name, Admin: u.Admin}
}

// decode reads a JSON body strictly: unknown fields are errors, so a typo in
// a field name does not silently do nothing.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeLimit(w, r, v, maxBody, "send jobs in smaller bunches")
}

// maxUnauthenticatedBody bounds the body of a request that is read before
// its sender is known (worker activation): a stranger must not make the
// server read megabytes.
const maxUnauthenticatedBody = 64 << 10

// decodeLimit is decode with a body limit and a hint for a body beyond it.
// A body sent as MessagePack (Content-Type) is read as such.
func decodeLimit(w http.ResponseWriter, r *http.Request, v any, limit int64, hint string) error {
	if r.Header.Get("Content-Type") == api.MsgpackContentType {
		return decodeMsgpack(w, r, v, limit, hint)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return codedf(http.StatusRequestEntityTooLarge, "request body is larger than %s; %s", formatSize(limit), hint)
		case errors.Is(err, io.EOF):
			return coded(http.StatusBadRequest, "request body is empty; expected a JSON object")
		default:
			return codedf(http.StatusBadRequest, "request body is not valid: %w", err)
		}
	}
	if dec.More() {
		return coded(http.StatusBadRequest, "request body has data after the JSON object")
	}
	return nil
}

func decodeMsgpack(w http.ResponseWriter, r *http.Request, v any, limit int64, hint string) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return codedf(http.StatusRequestEntityTooLarge, "request body is larger than %s; %s", formatSize(limit), hint)
	case err != nil:
		return codedf(http.StatusBadRequest, "request body could not be read: %w", err)
	case len(data) == 0:
		return coded(http.StatusBadRequest, "request body is empty; expected a msgpack map")
	}
	if err := api.UnmarshalMsgpack(data, v); err != nil {
		return codedf(http.StatusBadRequest, "request body is not valid msgpack for this endpoint: %w", err)
	}
	return nil
}

// formatSize renders a body limit: "64 MiB", "64 KiB".
func formatSize(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

func pathID(r *http.Request, name string) (uint64, error) {
	v, err := strconv.ParseUint(r.PathValue(name), 10, 64)
	if err != nil || v == 0 {
		return 0, codedf(http.StatusBadRequest, "%s %q is not a positive integer", name, r.PathValue(name))
	}
	return v, nil
}

func queryID(r *http.Request, name string) (uint64, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, codedf(http.StatusBadRequest, "query parameter %s=%q is not a non-negative integer", name, raw)
	}
	return v, nil
}
