package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/tlsutil"
	"github.com/drover-sched/drover/server/cluster"
	"github.com/drover-sched/drover/server/httpapi"
	"github.com/drover-sched/drover/server/joblogs"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/ui"
	"github.com/drover-sched/drover/server/why"
)

// ErrNotLeader means this server cannot accept writes now: it is not the
// leader, or lost leadership while the write was in flight.
var ErrNotLeader = httpapi.ErrNotLeader

// Server is one control-plane server: the Raft node, the replicated state,
// the leader loops, and the HTTP API and membership built around them.
type Server struct {
	cfg   *Config
	log   *slog.Logger
	id    string
	state *state.State
	fsm   *fsm
	raft  *raftNode
	logs  *joblogs.Store
	// history is where finished batches go (see runExporter).
	history *historyBook
	// retention is Config.Retention (tests shorten it while running).
	retention atomic.Int64

	metrics *metrics
	notify  *notifier
	feed    *feedRecorder // what applied entries changed: the change stream and the web UI's live pages
	// raftUp: Raft has started (a snapshot restored before is this
	// server's own, from its disk); installed: the index of the last
	// snapshot a leader sent it since (0: none).
	raftUp    atomic.Bool
	installed atomic.Uint64
	closeUI   func() // ends the web UI's live streams (at shutdown)
	events    *eventBatcher
	live      *liveness
	waiting   why.Book           // why the last round left jobs unplaced (leader)
	autoscale *leader.Autoscaler // the leader's autoscale round and what it remembers between decisions
	scheduler *leader.Scheduler  // the leader's scheduling round
	// autoscaleStarted is set once this server's autoscaler has started
	// leading (tests wait for it before driving rounds themselves).
	autoscaleStarted atomic.Bool
	schedTrigger     chan struct{}
	keyringWake      chan struct{} // the gossip keyring in the state changed
	spendWake        chan struct{} // a billing project with a limit started or ended an attempt
	tls              *tlsSetup     // nil: plain HTTP and Raft

	api      *httpapi.Server
	httpSrv  *http.Server
	listener net.Listener
	fresh    freshConns
	cluster  *cluster.Cluster // nil without gossip

	// ready is set once this server's state has caught up with the log
	// (as leader after its barrier, as follower once it applied what the
	// leader committed). Until then the API answers 503 rather than serve
	// a state that may lack users, batches or jobs.
	ready atomic.Bool

	leaderMu     sync.Mutex
	leading      bool
	leaderCancel context.CancelFunc
	leaderWG     sync.WaitGroup

	transLog *os.File
	transBuf *bufio.Writer
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// New opens the data dir, starts Raft and the background loops, and binds
// the HTTP listener. Call Shutdown to stop.
func New(cfg *Config) (*Server, error) {
	var usedSaved bool
	if cfg.GossipAddr != "" && cfg.DataDir != "" {
		saved, err := savedKeyring(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if saved != nil {
			c := *cfg
			c.GossipKeys, cfg, usedSaved = saved, &c, true
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server config: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	id, err := nodeID(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:          cfg,
		log:          log.With("server", id),
		id:           id,
		state:        state.New(),
		notify:       newNotifier(),
		feed:         newFeedRecorder(0),
		live:         newLiveness(),
		schedTrigger: make(chan struct{}, 1),
		keyringWake:  make(chan struct{}, 1),
		spendWake:    make(chan struct{}, 1),
	}
	s.autoscale = s.newAutoscaler()
	silentAfter := min(s.cfg.ClusterDownAfter, s.cfg.LostTimeout)
	s.scheduler = &leader.Scheduler{Clock: leader.WallClock{}, MaxJobs: s.cfg.MaxPlacements, Launchable: s.autoscale.Launchable,
		Silent: func(inst uint32, now time.Time) bool { return s.live.silentFor(inst, now) >= silentAfter },
		Read:   func(read func()) { s.metrics.lock.roundRead(read) }}
	s.autoscale.Holds = s.scheduler.Holds
	keys, err := loadSecrets(cfg, s.log)
	if err != nil {
		return nil, err
	}
	var sealer httpapi.Secrets
	if keys != nil {
		sealer = keys
	}
	if usedSaved {
		s.log.Info("gossip keys come from the keyring saved by the last rotation, not -gossip-key-file", "file", filepath.Join(cfg.DataDir, keyringFile))
	}
	s.metrics = newMetrics(s.state, func() raftStats {
		if s.raft == nil || s.raft.raft == nil {
			return nil
		}
		return s.raft.raft
	}, cfg.MetricsToken != "")
	s.state.SetLockObserver(s.metrics.lock.observer())
	hooks := state.Hooks{
		Work:         s.triggerSchedule,
		Instance:     s.notify.notify,
		AllInstances: s.notify.notifyAll,
		Keyring:      s.keyringChanged,
		Spend:        s.spendChanged,
	}
	if cfg.TransitionLog != "" {
		f, err := os.OpenFile(cfg.TransitionLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open transition log: %w", err)
		}
		s.transLog, s.transBuf = f, bufio.NewWriterSize(f, 1<<16)
		hooks.Transition = func(index, b uint64, j uint32, from, to state.JobState) {
			fmt.Fprintf(s.transBuf, "%d %d %d %s %s\n", index, b, j, from, to)
			s.feed.transition(index, b, j, from, to)
		}
	} else {
		hooks.Transition = s.feed.transition
	}
	s.state.SetHooks(hooks)
	s.fsm = &fsm{state: s.state, local: newLocalCommands(), metrics: s.metrics, afterApply: s.afterApply, applied: s.feed.applied}
	s.fsm.restored = func(index uint64) {
		if s.raftUp.Load() {
			s.installed.Store(index)
		}
	}
	s.fsm.onRestore = s.feed.restored
	if s.transBuf != nil {
		// The state is replaced wholesale: histories restart from here, at
		// the snapshot's index.
		s.fsm.onRestore = func(index uint64) {
			s.feed.restored(index)
			fmt.Fprintln(s.transBuf, "restore", index)
			s.flushTransitions()
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	// undo releases what New acquired so far when a later step fails.
	var undo []func()
	fail := func(err error) (*Server, error) {
		cancel()
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		if s.transLog != nil {
			s.transLog.Close()
		}
		return nil, err
	}
	if s.tls, err = loadTLS(cfg, id, s.log); err != nil {
		return fail(err)
	}
	if s.tls != nil && s.tls.live != nil {
		for _, c := range []struct {
			label string
			at    func(tlsutil.Expiry) time.Time
		}{{"server", func(e tlsutil.Expiry) time.Time { return e.Cert }}, {"ca", func(e tlsutil.Expiry) time.Time { return e.CA }}} {
			s.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "drover_tls_expiry_timestamp_seconds",
				Help:        "When a certificate in use expires (unix seconds): the server's (-tls-cert) or the first of -ca-file's CAs to expire.",
				ConstLabels: prometheus.Labels{"certificate": c.label}},
				func() float64 { return float64(c.at(s.tlsExpiry()).Unix()) }))
		}
		s.warnExpiry(s.tlsExpiry(), time.Now())
	}
	if s.logs, err = joblogs.Open(ctx, cfg.LogStoreURL, filepath.Join(cfg.DataDir, "logs")); err != nil {
		return fail(err)
	}
	undo = append(undo, func() { s.logs.Close() })
	s.retention.Store(int64(cfg.Retention))
	if err := s.openHistory(ctx); err != nil {
		return fail(err)
	}
	undo = append(undo, s.closeHistory)
	if s.raft, err = s.setupRaft(); err != nil {
		return fail(err)
	}
	s.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "drover_raft_reachable_voters",
		Help: "On the leader, the voters (itself included) its heartbeats reach; 0 on the others: alert on the maximum over the servers."},
		s.raft.reachableVoters))
	undo = append(undo, s.shutdownRaft)
	s.raft.observe = func(cmd string, took time.Duration) {
		s.metrics.applySeconds.WithLabelValues(cmd).Observe(took.Seconds())
	}
	s.events = newEventBatcher(s.raft.Apply, cfg.MaxEventsPerEntry, s.log, func(n int) { s.metrics.events.Add(float64(n)) })
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fail(fmt.Errorf("listen for http on %s: %w", cfg.HTTPAddr, err))
	}
	undo = append(undo, func() { ln.Close() })
	s.listener = ln
	advertise, err := advertiseHTTP(cfg, ln.Addr().String())
	if err != nil {
		return fail(err)
	}
	var members httpapi.Members
	var gossip httpapi.Gossip
	if cfg.GossipAddr != "" && !cfg.gossips() {
		s.log.Info("no gossip listener: this server works alone and has no gossip key (-gossip-key-file), so nobody can join it; "+
			"to add servers, see \"From one server to several\" in docs/operations.md", "gossip_addr", cfg.GossipAddr)
	}
	if cfg.gossips() {
		c, err := cluster.Start(cluster.Config{
			ID: id, RaftAddr: s.RaftAddr(), HTTPAddr: advertise,
			GossipAddr: cfg.GossipAddr, GossipAdvertise: cfg.GossipAdvertise, Join: cfg.Join,
			BootstrapExpect: cfg.BootstrapExpect, ConsulAddr: cfg.ConsulAddr,
			DeadServerGrace: cfg.DeadServerGrace, GossipInterval: cfg.GossipInterval, GossipKeys: cfg.GossipKeys,
			KeyringFile: filepath.Join(cfg.DataDir, keyringFile), VerifyRaft: s.raftVerifier(),
			Decommissioned: func(id string) bool { _, ok := s.state.IsDecommissioned(id); return ok }, HTTPS: s.apiTLS() != nil, Logger: s.log,
		}, s.raft.raft)
		if err != nil {
			return fail(err)
		}
		s.cluster, members, gossip = c, c, c
		s.metrics.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "drover_gossip_undecryptable_total",
			Help: "Gossip messages none of this server's keys decrypted: a server with a removed or wrong gossip key is trying to reach it."},
			func() float64 { return float64(c.Undecryptable()) }))
	} else if cfg.Members != nil {
		members = cfg.Members
	}
	var raftLog httpapi.RaftLog // a nil *boltLog is not a nil interface
	if s.raft.boltLog != nil {
		raftLog = s.raft.boltLog
	}
	var raftStreams httpapi.RaftStreams
	if t, ok := s.raft.transport.(httpapi.RaftStreams); ok {
		raftStreams = t
	}
	callbackAllow, err := api.ParseCallbackAllow(cfg.CallbackAllow) // Validate checked them
	if err != nil {
		return fail(err)
	}
	s.api, err = httpapi.New(httpapi.Deps{
		Config: httpapi.Config{
			ID: id, Advertise: advertise, DataDir: cfg.DataDir, WorkerSecret: cfg.WorkerSecret,
			DefaultBillingProject: cfg.DefaultBillingProject, ApplyTimeout: cfg.ApplyTimeout,
			MaxSyncWait: cfg.MaxSyncWait, DebugPprof: cfg.DebugPprof,
			LostTimeout: cfg.LostTimeout, ClusterDownAfter: cfg.ClusterDownAfter, MaxLost: uint8(cfg.MaxLostAttempts),
			Limits: httpapi.Limits{
				MaxJobsPerBatch: cfg.MaxJobsPerBatch, MaxJobsPerUpdate: cfg.MaxJobsPerUpdate,
				MaxQueuedJobsPerUser: cfg.MaxQueuedJobsPerUser, MaxQueuedJobsPerProject: cfg.MaxQueuedJobsPerBillingProject,
				MaxBatchesPerUser: cfg.MaxBatchesPerUser, MaxOpenUpdatesPerUser: cfg.MaxOpenUpdatesPerUser,
				StateMemoryBudget: cfg.StateMemoryBudget, MaxLogBytesPerAttempt: cfg.MaxLogBytesPerAttempt,
				MaxLogBytesPerBatch: cfg.MaxLogBytesPerBatch,
			},
			PeerTLS: s.peerTLS(), DefaultTokenTTL: cfg.DefaultTokenTTL, MetricsToken: cfg.MetricsToken,
			Rates: httpapi.RateLimits{UserPerSecond: cfg.UserRequestsPerSecond, WorkerPerSecond: cfg.WorkerRequestsPerSecond,
				AnonymousPerSecond: cfg.AnonymousRequestsPerSecond},
			CallbackAllow: callbackAllow, QueueUsageRetention: cfg.QueueUsageRetention,
		},
		Log: s.log, State: s.state, Logs: s.logs, Node: apiNode{s}, Raft: s.raft.raft, Members: members,
		Liveness: s.live, Notifier: s.notify, Events: s.events, Waiting: &s.waiting, Changes: s.feed.feed, Samples: s.feed.samples, Metrics: s.metrics.reg, Autoscaler: s.autoscale, Provider: s.providerInfo,
		Gossip: gossip, History: s.history, RaftLog: raftLog, RaftStreams: raftStreams, Secrets: sealer,
	})
	if err != nil {
		if s.cluster != nil {
			s.cluster.Shutdown()
		}
		return fail(err)
	}
	handler, err := s.webHandler()
	if err != nil {
		if s.cluster != nil {
			s.cluster.Shutdown()
		}
		return fail(err)
	}
	s.httpSrv = &http.Server{
		Handler: handler, ConnState: s.fresh.track, TLSConfig: s.apiTLS(),
		ReadHeaderTimeout: min(10*time.Second, cfg.HTTPReadTimeout), ReadTimeout: cfg.HTTPReadTimeout,
		WriteTimeout: cfg.HTTPWriteTimeout, IdleTimeout: cfg.HTTPIdleTimeout,
		// net/http's own complaints (failed TLS handshakes) are logs.
		ErrorLog: slog.NewLogLogger(s.log.With("component", "http").Handler(), slog.LevelInfo),
	}
	s.httpSrv.RegisterOnShutdown(s.closeUI)

	s.wg.Add(4)
	go func() { defer s.wg.Done(); s.raft.watchLeader(ctx) }()
	go func() { defer s.wg.Done(); s.monitorLeadership(ctx) }()
	go func() { defer s.wg.Done(); s.events.run(ctx) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.api.RunAudit(ctx) }()
	if s.cluster != nil && s.cluster.Encrypted() {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.runKeyring(ctx) }()
	}
	go func() {
		defer s.wg.Done()
		serve := func() error { return s.httpSrv.Serve(ln) }
		if s.apiTLS() != nil {
			serve = func() error { return s.httpSrv.ServeTLS(ln, "", "") }
		}
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()
	s.log.Info("server started", "tls", s.apiTLS() != nil, "http", ln.Addr().String(), "raft", s.RaftAddr(), "raft_transport", s.raftTransportKind(), "data_dir", cfg.DataDir)
	return s, nil
}

// apiNode is the Node the HTTP API sees.
type apiNode struct{ s *Server }

func (n apiNode) Apply(c state.Command) (any, error)     { return n.s.raft.Apply(c) }
func (n apiNode) IsLeader() bool                         { return n.s.IsLeader() }
func (n apiNode) Ready() bool                            { return n.s.Ready() }
func (n apiNode) Leader() (addr, id string)              { return n.s.Leader() }
func (n apiNode) VerifyLeader(ctx context.Context) error { return n.s.raft.VerifyLeader(ctx) }
func (n apiNode) LeaderMoved() <-chan struct{}           { return n.s.raft.LeaderMoved() }
func (n apiNode) Unreachable() []string                  { return n.s.raft.Unreachable() }

// advertiseHTTP picks the HTTP address other servers forward to.
func advertiseHTTP(cfg *Config, bound string) (string, error) {
	if cfg.HTTPAdvertise != "" {
		return cfg.HTTPAdvertise, nil
	}
	host, port, _ := net.SplitHostPort(bound)
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return bound, nil
	}
	for _, a := range []string{cfg.GossipAdvertise, cfg.RaftAdvertise} {
		if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
			return net.JoinHostPort(h, port), nil
		}
	}
	if cfg.GossipAddr == "" {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	return "", fmt.Errorf("HTTPAddr %s listens on all interfaces: set HTTPAdvertise (-http-advertise) to the address other servers should use", cfg.HTTPAddr)
}

// GossipAddr is the address gossip listens on ("" without gossip).
func (s *Server) GossipAddr() string {
	if s.cluster == nil {
		return ""
	}
	return s.cluster.GossipAddr()
}

// HTTPAddr is the address the API listens on.
func (s *Server) HTTPAddr() string { return s.listener.Addr().String() }

// RaftAddr is the address Raft listens on (with no listener, the name
// the server has in the Raft configuration).
func (s *Server) RaftAddr() string { return string(s.raft.transport.LocalAddr()) }

// raftTransportKind says how Raft reaches its peers, for the log.
func (s *Server) raftTransportKind() string {
	switch {
	case s.cfg.RaftTransport != nil:
		return "injected"
	case s.cfg.RaftAddr == "":
		return "in-memory (no listener)"
	case s.tls == nil:
		return "plain TCP (-insecure)"
	case s.cfg.TLSCert == "":
		return "mutual TLS, own CA (" + filepath.Join(s.cfg.DataDir, ownTLSDir) + ")"
	}
	return "mutual TLS"
}

// webHandler serves the API, and the web UI under /ui/ (which calls the
// API in-process).
func (s *Server) webHandler() (http.Handler, error) {
	apiH := s.api.Handler()
	access := map[string]string{}
	for _, rt := range s.api.Routes() {
		access[rt.Pattern] = string(rt.Access)
	}
	web, err := ui.New(ui.Deps{API: apiH, Access: func(p string) string { return access[p] }, Changes: s.feed.feed.Wait, StreamLife: s.cfg.UIStreamLife,
		TLS: s.apiTLS() != nil, Log: s.log.With("component", "ui")})
	if err != nil {
		return nil, err
	}
	uiH := web.Handler()
	s.closeUI = web.Close
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case strings.HasPrefix(p, ui.Prefix):
			uiH.ServeHTTP(w, r)
		case (p == "/" || p == "/ui") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			http.Redirect(w, r, ui.Prefix, http.StatusFound)
		default:
			apiH.ServeHTTP(w, r)
		}
	}), nil
}

// afterApply runs after each applied group of entries, from the FSM
// goroutine: transition lines out, live pages woken.
func (s *Server) afterApply() {
	s.flushTransitions()
}

// flushTransitions writes buffered transition lines (called after each
// applied batch, from the FSM goroutine).
func (s *Server) flushTransitions() {
	if s.transBuf != nil {
		_ = s.transBuf.Flush()
	}
}

// Logger is the server's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// ID is this server's Raft ID.
func (s *Server) ID() string { return s.id }

// State gives read access to the replicated state (tests, the agent).
func (s *Server) State() *state.State { return s.state }

// IsLeader reports whether this server leads the cluster and runs the
// leader loops.
func (s *Server) IsLeader() bool {
	s.leaderMu.Lock()
	defer s.leaderMu.Unlock()
	return s.leading
}

// Ready reports whether the server's state has caught up with the log.
func (s *Server) Ready() bool { return s.ready.Load() }

// Leader returns the leader's Raft address and ID as this server knows them.
func (s *Server) Leader() (addr, id string) {
	a, i := s.raft.raft.LeaderWithID()
	return string(a), string(i)
}

// Shutdown stops the HTTP API, the loops and Raft.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.shutdownHTTP(ctx)
	if s.cluster != nil {
		s.cluster.Shutdown()
	}
	s.cancel()
	s.notify.notifyAll()
	// monitorLeadership stops the leader loops as it returns.
	s.wg.Wait()
	s.shutdownRaft()
	s.logs.Close()
	s.closeHistory()
	if s.transLog != nil {
		s.flushTransitions()
		s.transLog.Close()
	}
	s.log.Info("server stopped")
	return err
}

// shutdownHTTP stops accepting requests and waits for those in flight.
// net/http counts a connection that has not sent its first request as busy
// for 5 seconds, and HTTP clients keep such connections (a dial that lost
// the race to an idle connection goes to the pool): those are closed here,
// so one client's spare connection does not hold a restart for 5 seconds.
func (s *Server) shutdownHTTP(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.httpSrv.Shutdown(ctx) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			s.fresh.closeAll()
		}
	}
}

// freshConns tracks the API's connections that have not sent a request.
type freshConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st == http.StateNew {
		if f.conns == nil {
			f.conns = map[net.Conn]struct{}{}
		}
		f.conns[c] = struct{}{}
	} else {
		delete(f.conns, c)
	}
}

func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close()
		delete(f.conns, c)
	}
}

func (s *Server) shutdownRaft() {
	if err := s.raft.shutdown(); err != nil {
		s.log.Warn("raft shutdown", "err", err)
	}
}
