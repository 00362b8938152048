package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/cluster"
)

// TestConfig returns a configuration for a single-server cluster on loopback
// with short timeouts, for tests in this and other packages.
func TestConfig(dataDir string, log *slog.Logger) *Config {
	cfg := DefaultConfig()
	cfg.DataDir = dataDir
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.Bootstrap = true
	cfg.WorkerSecret = "test-secret"
	cfg.HeartbeatTimeout = 200 * time.Millisecond
	cfg.ElectionTimeout = 200 * time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.LostTimeout = 5 * time.Second
	cfg.ApplyTimeout = 10 * time.Second
	cfg.BillingInterval = 100 * time.Millisecond
	cfg.ExportInterval = 100 * time.Millisecond
	// Tests make many requests without a valid token from one address
	// (the authorization matrix); the tests of the limit set it.
	cfg.AnonymousRequestsPerSecond = 0
	cfg.Logger = log
	return cfg
}

// StartReady starts a server with cfg and waits (up to 20 s) until it leads
// and its admin token exists; it returns the server and the token. On
// failure nothing is left running.
func StartReady(cfg *Config) (*Server, string, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tok, err := s.WaitReady(ctx)
	if err != nil {
		_ = s.Shutdown(ctx)
		return nil, "", err
	}
	return s, tok, nil
}

// WaitReady waits until the server leads and its admin token exists, and
// returns the token.
func (s *Server) WaitReady(ctx context.Context) (string, error) {
	path := filepath.Join(s.cfg.DataDir, "root.token")
	for {
		if s.IsLeader() {
			if b, err := os.ReadFile(path); err == nil {
				return strings.TrimSpace(string(b)), nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("server not ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ClusterOptions shapes an in-process cluster.
type ClusterOptions struct {
	// Gossip starts real memberlist gossip on loopback and lets the servers
	// bootstrap Raft among themselves (bootstrap-expect); without it the
	// Raft configuration and the membership view are fixed up front.
	Gossip bool
	// ConsulAddr makes the servers find each other through Consul instead
	// of -join addresses (needs Gossip).
	ConsulAddr string
	// Configure, when set, adjusts each server's configuration.
	Configure func(i int, cfg *Config)
	Logger    *slog.Logger
}

// TestCluster is a cluster of servers in one process: Raft runs over
// raft.InmemTransport with in-memory log, stable and snapshot stores, and
// the HTTP APIs listen on loopback. It is for tests that need several
// servers but no process to die; the multi-process fault suite in e2e/
// covers kills and freezes.
type TestCluster struct {
	Servers []*Server
	// Token is the admin's token, known to every server.
	Token string
}

// NewTestCluster starts n servers and waits until one leads and every
// server knows the admin. Stop it with Shutdown.
func NewTestCluster(ctx context.Context, dir string, n int, opts ClusterOptions) (*TestCluster, error) {
	if opts.ConsulAddr != "" && !opts.Gossip {
		return nil, fmt.Errorf("test cluster: ConsulAddr needs Gossip")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	type node struct {
		addr  raft.ServerAddress
		trans *raft.InmemTransport
	}
	nodes := make([]node, n)
	for i := range nodes {
		nodes[i].addr, nodes[i].trans = raft.NewInmemTransport("")
	}
	for i := range nodes {
		for j := range nodes {
			if i != j {
				nodes[i].trans.Connect(nodes[j].addr, nodes[j].trans)
			}
		}
	}
	var conf raft.Configuration
	for i := range nodes {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(fmt.Sprint("s", i)), Address: nodes[i].addr})
	}
	members := &staticMembers{}
	c := &TestCluster{}
	var gossip []string
	var gossipKey []byte
	if opts.Gossip {
		key, err := cluster.GenerateGossipKey()
		if err == nil {
			gossipKey, err = cluster.ParseGossipKey(key)
		}
		if err != nil {
			return nil, err
		}
	}
	for i := range nodes {
		cfg := TestConfig(filepath.Join(dir, fmt.Sprint("s", i)), log)
		cfg.NodeID = fmt.Sprint("s", i)
		cfg.Bootstrap = false
		cfg.RaftTransport = nodes[i].trans
		store := raft.NewInmemStore()
		cfg.RaftLogStore, cfg.RaftStableStore = store, store
		cfg.RaftSnapshots = raft.NewInmemSnapshotStore()
		if opts.Gossip {
			cfg.GossipAddr = "127.0.0.1:0"
			cfg.GossipInterval = 200 * time.Millisecond
			cfg.BootstrapExpect = n
			cfg.GossipKeys = [][]byte{gossipKey}
			// Raft runs in memory and the APIs on loopback: no TLS.
			cfg.Insecure = true
			cfg.ConsulAddr = opts.ConsulAddr
			if opts.ConsulAddr == "" {
				cfg.Join = gossip
			}
		} else {
			cfg.Members = members
			rc := raft.DefaultConfig()
			rc.LocalID = raft.ServerID(cfg.NodeID)
			if err := raft.BootstrapCluster(rc, store, store, cfg.RaftSnapshots, nodes[i].trans, conf); err != nil {
				c.Shutdown()
				return nil, fmt.Errorf("bootstrap s%d: %w", i, err)
			}
		}
		if opts.Configure != nil {
			opts.Configure(i, cfg)
		}
		s, err := New(cfg)
		if err != nil {
			c.Shutdown()
			return nil, fmt.Errorf("start s%d: %w", i, err)
		}
		c.Servers = append(c.Servers, s)
		if opts.Gossip {
			gossip = append(append([]string(nil), gossip...), s.GossipAddr())
		}
	}
	var all []cluster.Member
	for i, s := range c.Servers {
		all = append(all, cluster.Member{ID: s.ID(), Raft: string(nodes[i].addr), HTTP: s.HTTPAddr(), Alive: true})
	}
	members.set(all)
	tok, err := c.waitToken(ctx)
	if err != nil {
		c.Shutdown()
		return nil, err
	}
	c.Token = tok
	return c, nil
}

// waitToken waits for the admin token file (written by whichever server
// led first) and until every server has applied the admin user.
func (c *TestCluster) waitToken(ctx context.Context) (string, error) {
	for {
		tok := ""
		for _, s := range c.Servers {
			if b, err := os.ReadFile(filepath.Join(s.cfg.DataDir, "root.token")); err == nil {
				tok = strings.TrimSpace(string(b))
			}
		}
		known := tok != ""
		for _, s := range c.Servers {
			if _, ok := s.State().UserByTokenHash(token.Hash(tok)); !ok || !s.Ready() {
				known = false
			}
		}
		if known {
			return tok, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("test cluster: no leader with an admin known to every server: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Leader returns the server that leads now, or nil.
func (c *TestCluster) Leader() *Server {
	for _, s := range c.Servers {
		if s.IsLeader() {
			return s
		}
	}
	return nil
}

// HTTPAddrs lists every server's API address, comma-separated (as the CLI
// and api.NewClient take them).
func (c *TestCluster) HTTPAddrs() string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = "http://" + s.HTTPAddr()
	}
	return strings.Join(addrs, ",")
}

// Shutdown stops every server.
func (c *TestCluster) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range c.Servers {
		_ = s.Shutdown(ctx)
	}
}

// staticMembers is a fixed membership view: every server alive.
type staticMembers struct {
	mu  sync.Mutex
	all []cluster.Member
}

func (m *staticMembers) set(all []cluster.Member) {
	m.mu.Lock()
	m.all = all
	m.mu.Unlock()
}

func (m *staticMembers) Members() []cluster.Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]cluster.Member(nil), m.all...)
}

func (m *staticMembers) Member(id string) (cluster.Member, bool) {
	for _, mb := range m.Members() {
		if mb.ID == id {
			return mb, true
		}
	}
	return cluster.Member{}, false
}
