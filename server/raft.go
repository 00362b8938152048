package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/server/state"
)

// nodeID returns the configured node ID, or the one saved in the data dir,
// or a new one (saved for the next start).
func nodeID(cfg *Config) (string, error) {
	if cfg.NodeID != "" {
		return cfg.NodeID, nil
	}
	path := filepath.Join(cfg.DataDir, "node-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !os.IsNotExist(err) {
		return "", fmt.Errorf("read node id: %w", err)
	}
	host, _ := os.Hostname()
	buf := make([]byte, 4)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	id := fmt.Sprintf("%s-%s", strings.Split(host, ".")[0], hex.EncodeToString(buf))
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("save node id: %w", err)
	}
	return id, nil
}

// raftNode owns the Raft instance and what sits around it: the stores and
// transport (opened here unless the Config injects them), writes, the
// coalesced leadership check and the leader-change broadcast.
type raftNode struct {
	raft         *raft.Raft
	transport    raft.Transport
	applyTimeout time.Duration
	observe      func(cmd string, took time.Duration) // apply latency, for metrics
	check        leaderCheck
	moves        *broadcast
	local        *localCommands // shared with the FSM
	closers      []func() error // what this node opened, closed on shutdown
	boltLog      *boltLog       // the log store, unless the config brought one
	// failing holds the servers whose heartbeats from this leader fail,
	// since when (emptied when leadership changes).
	failingMu sync.Mutex
	failing   map[raft.ServerID]time.Time
}

// inmemRaftAddress is the Raft address of a server without a Raft
// listener (Config.RaftAddr empty): it names the server in the Raft
// configuration and reaches nothing.
const inmemRaftAddress = "in-memory"

// raftLogCacheEntries is how many recent log entries are kept in memory.
// An entry is at most one bunch of jobs (about 1 MB for 10,000 distinct
// ones) and usually a plan or a group of worker events (a few KB).
const raftLogCacheEntries = 64

// raftLogCacheAge is how long an entry stays in the log cache: a follower
// applies it, and the leader replicates it, within milliseconds.
const raftLogCacheAge = 10 * time.Second

// setupRaft opens (or takes from the Config) the stores and transport,
// bootstraps a single-server cluster when asked to, and starts Raft.
func (s *Server) setupRaft() (*raftNode, error) {
	cfg := s.cfg
	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create raft dir: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(s.id)
	rc.Logger = newHclog(s.log, "raft", hclog.Info)
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	}
	if cfg.CommitTimeout > 0 {
		rc.CommitTimeout = cfg.CommitTimeout
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 512

	n := &raftNode{applyTimeout: cfg.ApplyTimeout, moves: newBroadcast(), observe: func(string, time.Duration) {}, local: s.fsm.local}
	// The node's background loops stop before anything is closed.
	bg, stopBG := context.WithCancel(context.Background())
	n.closers = append(n.closers, func() error { stopBG(); return nil })
	logs, stable := cfg.RaftLogStore, cfg.RaftStableStore
	if logs == nil {
		store, err := openBoltLog(filepath.Join(dir, "raft.db"), s.log.With("component", "raft"))
		if err != nil {
			n.close()
			return nil, err
		}
		go every(bg, RaftLogRewriteCheck, store.rewriteWhenQuiet)
		n.closers = append(n.closers, store.Close)
		logs, stable = store, store
		n.boltLog = store
	}
	// Recent entries stay in memory: a follower applies every entry right
	// after storing it, and the leader replicates what it has just stored;
	// both would otherwise read them back from BoltDB (decoding them again
	// and paging its memory-mapped file in).
	cached, err := newLogCache(raftLogCacheEntries, raftLogCacheAge, logs)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("raft log cache: %w", err)
	}
	go every(bg, raftLogCacheAge, func() { cached.expire() })
	logs = cached
	snaps := cfg.RaftSnapshots
	if snaps == nil {
		fs, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, rc.Logger)
		if err != nil {
			n.close()
			return nil, fmt.Errorf("open snapshot store: %w", err)
		}
		snaps = fs
	}
	n.transport = cfg.RaftTransport
	if n.transport == nil && cfg.RaftAddr == "" {
		// No listener: the single voter never sends or takes an RPC.
		_, t := raft.NewInmemTransport(inmemRaftAddress)
		n.transport = t
		n.closers = append([]func() error{t.Close}, n.closers...)
	}
	if n.transport == nil {
		var advertise net.Addr
		if cfg.RaftAdvertise != "" {
			a, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
			if err != nil {
				n.close()
				return nil, fmt.Errorf("resolve raft advertise address %q: %w", cfg.RaftAdvertise, err)
			}
			advertise = a
		}
		var t *raft.NetworkTransport
		var err error
		if s.tls != nil {
			t, err = newTLSTransport(cfg.RaftAddr, advertise, s.tls, rc.Logger)
		} else {
			t, err = raft.NewTCPTransportWithLogger(cfg.RaftAddr, advertise, 8, 10*time.Second, rc.Logger)
		}
		if err != nil {
			n.close()
			return nil, fmt.Errorf("listen for raft on %s: %w", cfg.RaftAddr, err)
		}
		if s.tls == nil {
			s.log.Warn("WARNING: Raft listens in plain text (-insecure): any process that can reach this address can take over the cluster "+
				"(append entries to the log: make itself admin, rewrite or wipe the state). Run without -insecure for mutual TLS",
				"raft", t.LocalAddr())
		}
		n.transport = t
		n.closers = append([]func() error{t.Close}, n.closers...)
	}
	if cfg.bootstrapsAlone() {
		existing, err := raft.HasExistingState(logs, stable, snaps)
		if err != nil {
			n.close()
			return nil, fmt.Errorf("check raft state: %w", err)
		}
		if !existing {
			conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: n.transport.LocalAddr()}}}
			if err := raft.BootstrapCluster(rc, logs, stable, snaps, n.transport, conf); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
				n.close()
				return nil, fmt.Errorf("bootstrap raft: %w", err)
			}
		}
	}
	r, err := raft.NewRaft(rc, s.fsm, logs, stable, snaps, n.transport)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	s.raftUp.Store(true) // a snapshot restored from now on was sent by a leader
	return n, nil
}

// shutdown stops Raft and closes what setupRaft opened.
func (n *raftNode) shutdown() error {
	var err error
	if n.raft != nil {
		err = n.raft.Shutdown().Error()
	}
	n.close()
	return err
}

func (n *raftNode) close() {
	for _, c := range n.closers {
		_ = c()
	}
	n.closers = nil
}

// Apply commits a command through Raft and returns the state machine's
// answer. A command the state machine rejected comes back as a
// *state.ApplyError; losing leadership as an error wrapping ErrNotLeader.
func (n *raftNode) Apply(c state.Command) (any, error) {
	data, err := state.Encode(c)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	forget := n.local.put(data, c)
	f := n.raft.Apply(data, n.applyTimeout)
	err = f.Error()
	forget()
	if err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
			errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrRaftShutdown) {
			return nil, fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return nil, fmt.Errorf("apply %s: %w", c.Type(), err)
	}
	n.observe(c.Type().String(), time.Since(start))
	resp := f.Response()
	if ae, ok := resp.(*state.ApplyError); ok {
		return nil, ae
	}
	return resp, nil
}

// LeaderMoved returns a channel closed the next time leadership changes.
func (n *raftNode) LeaderMoved() <-chan struct{} { return n.moves.wait() }

// watchLeader fires the leader-change broadcast on every Raft leader
// observation until ctx ends, and keeps track of the servers this
// leader's heartbeats fail to reach.
func (n *raftNode) watchLeader(ctx context.Context) {
	observations := make(chan raft.Observation, 64)
	observer := raft.NewObserver(observations, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(observer)
	defer n.raft.DeregisterObserver(observer)
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-observations:
			n.failingMu.Lock()
			switch d := o.Data.(type) {
			case raft.LeaderObservation:
				n.failing = nil
			case raft.FailedHeartbeatObservation:
				if n.failing == nil {
					n.failing = map[raft.ServerID]time.Time{}
				}
				if _, ok := n.failing[d.PeerID]; !ok {
					n.failing[d.PeerID] = time.Now()
				}
			case raft.ResumedHeartbeatObservation:
				delete(n.failing, d.PeerID)
			}
			n.failingMu.Unlock()
			if _, ok := o.Data.(raft.LeaderObservation); ok {
				n.moves.fire()
			}
		}
	}
}

// reachableVoters is, on the leader, the voters its heartbeats reach
// (itself included); 0 elsewhere.
func (n *raftNode) reachableVoters() float64 {
	if n.raft == nil || n.raft.State() != raft.Leader {
		return 0
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	down := n.Unreachable()
	reach := 0
	for _, sv := range f.Configuration().Servers {
		if sv.Suffrage == raft.Voter && !slices.Contains(down, string(sv.ID)) {
			reach++
		}
	}
	return float64(reach)
}

// Unreachable lists the servers this leader's heartbeats fail to reach
// (a server killed a moment ago is here within a heartbeat, long before
// gossip declares it dead); empty on a follower.
func (n *raftNode) Unreachable() []string {
	if n.raft.State() != raft.Leader {
		return nil
	}
	n.failingMu.Lock()
	defer n.failingMu.Unlock()
	out := make([]string, 0, len(n.failing))
	for id := range n.failing {
		out = append(out, string(id))
	}
	slices.Sort(out)
	return out
}

// broadcast wakes every waiter each time something happens.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

// wait returns a channel closed at the next fire.
func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) fire() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// leaderCheck coalesces VerifyLeader calls: a consistent read needs a
// verification that started after the read arrived, and one verification
// serves every read waiting for it.
type leaderCheck struct {
	mu   sync.Mutex
	call *verifyCall
}

type verifyCall struct {
	started time.Time
	done    chan struct{}
	err     error
}

// verifyLeader confirms with a quorum that this server still leads, so a read
// served now is not stale (a deposed leader that has not noticed yet fails).
func (n *raftNode) VerifyLeader(ctx context.Context) error {
	arrived := time.Now()
	for {
		n.check.mu.Lock()
		c := n.check.call
		finished := false
		if c != nil {
			select {
			case <-c.done:
				finished = true
			default:
			}
		}
		switch {
		case c != nil && !c.started.Before(arrived):
			// Started after we arrived: its answer is good for us.
		case c == nil || finished:
			c = &verifyCall{started: time.Now(), done: make(chan struct{})}
			n.check.call = c
			go func(c *verifyCall) {
				c.err = n.raft.VerifyLeader().Error()
				close(c.done)
			}(c)
		default:
			// One is in flight but began before we arrived: wait for it
			// to finish, then start (or join) a newer one.
			n.check.mu.Unlock()
			select {
			case <-c.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		n.check.mu.Unlock()
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
