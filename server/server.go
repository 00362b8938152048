package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/server/state"
)

// ErrNotLeader means this server cannot accept writes now: it is not the
// leader, or lost leadership while the write was in flight.
var ErrNotLeader = errors.New("this server is not the leader")

// Server is one control-plane server.
type Server struct {
	cfg   *Config
	log   *slog.Logger
	id    string
	state *state.State
	fsm   *fsm
	raft  *raftParts
	logs  *LogStore

	metrics      *metrics
	notify       *notifier
	schedTrigger chan struct{}
	events       *eventBatcher

	contactMu   sync.Mutex
	lastContact map[uint32]time.Time
	syncing     map[uint32]int // syncs held open per instance: a waiting worker is alive

	httpSrv       *http.Server
	listener      net.Listener
	httpAdvertise string
	proxy         *httputil.ReverseProxy
	check         leaderCheck
	leaderMoves   *broadcast
	cluster       *cluster
	consul        *consulDiscovery

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
		schedTrigger: make(chan struct{}, 1),
		lastContact:  map[uint32]time.Time{},
		syncing:      map[uint32]int{},
		leaderMoves:  newBroadcast(),
	}
	s.metrics = newMetrics(s)
	hooks := state.Hooks{
		Work:         s.triggerSchedule,
		Instance:     s.notify.notify,
		AllInstances: s.notify.notifyAll,
	}
	if cfg.TransitionLog != "" {
		f, err := os.OpenFile(cfg.TransitionLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open transition log: %w", err)
		}
		s.transLog, s.transBuf = f, bufio.NewWriterSize(f, 1<<16)
		hooks.Transition = func(b uint64, j uint32, from, to state.JobState) {
			fmt.Fprintf(s.transBuf, "%d %d %s %s\n", b, j, from, to)
		}
	}
	s.state.SetHooks(hooks)
	s.fsm = &fsm{state: s.state, metrics: s.metrics, afterApply: s.flushTransitions}
	if s.transBuf != nil {
		// The state is replaced wholesale: histories restart from here.
		s.fsm.onRestore = func() { fmt.Fprintln(s.transBuf, "restore"); s.flushTransitions() }
	}

	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.logs, err = OpenLogStore(ctx, cfg.LogStoreURL, filepath.Join(cfg.DataDir, "logs")); err != nil {
		cancel()
		return nil, err
	}
	if s.raft, err = s.setupRaft(); err != nil {
		cancel()
		s.logs.Close()
		return nil, err
	}
	s.events = newEventBatcher(s)
	observations := make(chan raft.Observation, 16)
	observer := raft.NewObserver(observations, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	s.raft.raft.RegisterObserver(observer)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		cancel()
		s.shutdownRaft()
		s.logs.Close()
		return nil, fmt.Errorf("listen for http on %s: %w", cfg.HTTPAddr, err)
	}
	s.listener = ln
	if s.httpAdvertise, err = advertiseHTTP(cfg, ln.Addr().String()); err != nil {
		cancel()
		ln.Close()
		s.shutdownRaft()
		s.logs.Close()
		return nil, err
	}
	s.proxy = s.newProxy()
	s.httpSrv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	if cfg.GossipAddr != "" {
		if err := s.startCluster(ctx); err != nil {
			cancel()
			ln.Close()
			s.shutdownRaft()
			s.logs.Close()
			return nil, err
		}
	}

	s.wg.Add(4)
	go func() {
		defer s.wg.Done()
		defer s.raft.raft.DeregisterObserver(observer)
		for {
			select {
			case <-ctx.Done():
				return
			case <-observations:
				s.leaderMoves.fire()
			}
		}
	}()
	go func() { defer s.wg.Done(); s.monitorLeadership(ctx) }()
	go func() { defer s.wg.Done(); s.events.run(ctx) }()
	go func() {
		defer s.wg.Done()
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()
	s.log.Info("server started", "http", ln.Addr().String(), "raft", s.raft.transport.LocalAddr(), "data_dir", cfg.DataDir)
	return s, nil
}

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

// startCluster starts gossip, Consul registration, joining and bootstrap.
func (s *Server) startCluster(ctx context.Context) error {
	if err := s.setupGossip(); err != nil {
		return err
	}
	if s.cfg.ConsulAddr != "" {
		d, err := newConsulDiscovery(s.cfg.ConsulAddr)
		if err == nil {
			err = d.register(s.id, s.gossipAdvertise(), s.RaftAddr(), s.httpAdvertise)
		}
		if err != nil {
			_ = s.cluster.ml.Shutdown()
			return err
		}
		s.consul = d
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.runJoin(ctx) }()
	if s.cfg.BootstrapExpect > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.runBootstrap(ctx) }()
	}
	return nil
}

// GossipAddr is the address gossip listens on ("" without gossip).
func (s *Server) GossipAddr() string { return s.gossipAdvertise() }

// HTTPAddr is the address the API listens on.
func (s *Server) HTTPAddr() string { return s.listener.Addr().String() }

// RaftAddr is the address Raft listens on.
func (s *Server) RaftAddr() string { return string(s.raft.transport.LocalAddr()) }

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

// Shutdown stops the HTTP API, the loops and Raft.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.httpSrv.Shutdown(ctx)
	if s.cluster != nil {
		if s.consul != nil {
			if derr := s.consul.deregister(); derr != nil {
				s.log.Warn("consul deregister", "err", derr)
			}
		}
		// No gossip Leave: a server that stops is kept in the Raft
		// configuration (it will likely come back) until it has been gone
		// for DeadServerGrace, or an operator removes it.
		_ = s.cluster.ml.Shutdown()
	}
	s.cancel()
	s.notify.notifyAll()
	s.stopLeading()
	s.wg.Wait()
	s.shutdownRaft()
	s.logs.Close()
	if s.transLog != nil {
		s.flushTransitions()
		s.transLog.Close()
	}
	s.log.Info("server stopped")
	return err
}

func (s *Server) shutdownRaft() {
	if s.raft.raft != nil {
		if err := s.raft.raft.Shutdown().Error(); err != nil {
			s.log.Warn("raft shutdown", "err", err)
		}
	}
	s.raft.close()
}

// apply commits a command through Raft and returns the state machine's
// answer. A command the state machine rejected comes back as a
// *state.ApplyError.
func (s *Server) apply(c state.Command) (any, error) {
	data, err := state.Encode(c)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	f := s.raft.raft.Apply(data, s.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
			errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrRaftShutdown) {
			return nil, fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return nil, fmt.Errorf("apply %s: %w", c.Type(), err)
	}
	s.metrics.applySeconds.WithLabelValues(c.Type().String()).Observe(time.Since(start).Seconds())
	resp := f.Response()
	if ae, ok := resp.(*state.ApplyError); ok {
		return nil, ae
	}
	return resp, nil
}

func (s *Server) triggerSchedule() {
	select {
	case s.schedTrigger <- struct{}{}:
	default:
	}
}

// monitorLeadership starts the leader loops when this server becomes leader
// and stops them when it is not any more.
func (s *Server) monitorLeadership(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.raft.raft.LeaderCh():
		case <-tick.C:
		}
		isLeader := s.raft.raft.State() == raft.Leader
		if !isLeader && !s.ready.Load() {
			s.checkFollowerReady()
		}
		if isLeader == s.IsLeader() {
			continue
		}
		if isLeader {
			s.startLeading(ctx)
		} else {
			s.stopLeading()
		}
	}
}

func (s *Server) startLeading(parent context.Context) {
	// Everything committed by earlier leaders must be applied before the
	// loops read the state.
	if err := s.raft.raft.Barrier(s.cfg.ApplyTimeout).Error(); err != nil {
		s.log.Warn("leader barrier failed; will retry", "err", err)
		return
	}
	s.ready.Store(true)
	ctx, cancel := context.WithCancel(parent)
	s.leaderMu.Lock()
	s.leading = true
	s.leaderCancel = cancel
	s.leaderMu.Unlock()
	s.metrics.isLeader.Set(1)
	s.log.Info("leading the cluster", "index", s.state.Index())

	now := time.Now()
	s.contactMu.Lock()
	s.lastContact = map[uint32]time.Time{}
	for _, id := range s.state.ActiveInstances() {
		s.lastContact[id] = now
	}
	s.contactMu.Unlock()

	s.leaderWG.Add(4)
	go func() { defer s.leaderWG.Done(); s.runAutopilot(ctx) }()
	go func() { defer s.leaderWG.Done(); s.bootstrapAdmin(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runScheduler(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runLiveness(ctx) }()
	s.triggerSchedule()
}

// checkFollowerReady marks a follower ready once it has applied everything
// the leader has told it is committed.
func (s *Server) checkFollowerReady() {
	if addr, _ := s.raft.raft.LeaderWithID(); addr == "" {
		return
	}
	commit, err := strconv.ParseUint(s.raft.raft.Stats()["commit_index"], 10, 64)
	if err != nil || commit == 0 {
		return
	}
	if s.raft.raft.AppliedIndex() >= commit {
		s.ready.Store(true)
		s.log.Info("caught up with the leader", "index", commit)
	}
}

// Ready reports whether the server's state has caught up with the log.
func (s *Server) Ready() bool { return s.ready.Load() }

func (s *Server) stopLeading() {
	s.leaderMu.Lock()
	cancel := s.leaderCancel
	wasLeading := s.leading
	s.leading = false
	s.leaderCancel = nil
	s.leaderMu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.leaderWG.Wait()
	if wasLeading {
		s.metrics.isLeader.Set(0)
		s.log.Info("no longer leading")
	}
}

// bootstrapAdmin creates the admin user on a fresh cluster and writes its
// token to <data-dir>/root.token. The file is written before the command is
// committed so that a crash in between cannot leave an admin nobody can log
// in as.
func (s *Server) bootstrapAdmin(ctx context.Context) {
	for !s.state.HasUsers() {
		if s.tryBootstrapAdmin(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (s *Server) tryBootstrapAdmin(ctx context.Context) bool {
	token, err := newToken()
	if err != nil {
		s.log.Error("generate admin token", "err", err)
		return false
	}
	path := filepath.Join(s.cfg.DataDir, "root.token")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		s.log.Error("write admin token", "err", err)
		return false
	}
	res, err := s.apply(&state.Bootstrap{
		Now: time.Now().UnixNano(), Admin: s.cfg.AdminName, TokenHash: HashToken(token),
		DefaultProject: s.cfg.DefaultBillingProject,
	})
	if err != nil {
		os.Remove(tmp)
		if ctx.Err() == nil {
			s.log.Error("bootstrap admin", "err", err)
		}
		return false
	}
	if !res.(*state.BootstrapResult).Created {
		os.Remove(tmp)
		return true
	}
	if err := os.Rename(tmp, path); err != nil {
		s.log.Error("write admin token", "err", err)
		return true
	}
	s.log.Info("created admin user; its token is in "+path, "user", s.cfg.AdminName)
	return true
}

// HashToken is how tokens are stored: only their SHA-256 is replicated.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func newToken() (string, error) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("read random: %w", err)
	}
	return hex.EncodeToString(buf), nil
}

// Leader returns the leader's Raft address and ID as this server knows them.
func (s *Server) Leader() (addr, id string) {
	a, i := s.raft.raft.LeaderWithID()
	return string(a), string(i)
}
