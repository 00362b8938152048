// Package cluster is server membership: servers find each other over
// gossip (hashicorp/memberlist), optionally through Consul, bootstrap Raft
// together once enough of them see each other, and, on the leader, keep the
// Raft configuration in line with who is alive (autopilot). It hands back a
// membership view; it knows the Raft node only through the Raft interface.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/version"
)

// Config configures membership. ID, GossipAddr, RaftAddr and HTTPAddr are
// required.
type Config struct {
	// ID is this server's Raft ID; RaftAddr and HTTPAddr are the addresses
	// other servers reach it at.
	ID       string
	RaftAddr string
	HTTPAddr string
	// GossipAddr is where memberlist listens; GossipAdvertise what others
	// use (default: GossipAddr).
	GossipAddr      string
	GossipAdvertise string
	// Join lists gossip addresses of other servers.
	Join []string
	// BootstrapExpect bootstraps Raft once this many servers without Raft
	// state see each other (0: never).
	BootstrapExpect int
	// ConsulAddr, when set, registers this server in Consul and joins the
	// servers registered there.
	ConsulAddr string
	// DeadServerGrace is how long autopilot waits before removing a server
	// gossip cannot reach from the Raft configuration.
	DeadServerGrace time.Duration
	// GossipInterval tunes failure detection (0: memberlist's LAN
	// defaults).
	GossipInterval time.Duration
	// GossipKeys encrypt and authenticate gossip (AES-GCM): the first
	// encrypts what this server sends, any of them opens what it
	// receives, and messages that none opens, plain ones included, are
	// dropped. A server without the key is never seen, so it never
	// becomes a member or a voter. Empty: plain gossip, which anyone who
	// reaches the port can join.
	GossipKeys [][]byte
	// VerifyRaft, when set, is asked before a member is made a voter at
	// addr (moved: its ID votes from another address now); an error
	// keeps it out.
	VerifyRaft func(id, addr string, moved bool) error
	// Decommissioned, when set, says a server was removed for good: it is
	// never made a voter again (until an operator readmits it).
	Decommissioned func(id string) bool
	// HTTPS: the API serves HTTPS (Consul's health check uses it).
	HTTPS bool
	// KeyringFile is where SetKeyring saves the keyring ("": not saved).
	KeyringFile string
	Logger      *slog.Logger
}

// Raft is what membership needs from the Raft node; *raft.Raft has it.
type Raft interface {
	LastIndex() uint64
	AppliedIndex() uint64
	BootstrapCluster(raft.Configuration) raft.Future
	GetConfiguration() raft.ConfigurationFuture
	AddVoter(id raft.ServerID, addr raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	RemoveServer(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
}

// Member is a server as gossip sees it.
type Member struct {
	ID     string
	Raft   string // Raft address
	HTTP   string // API address other servers forward to
	Gossip string // gossip address
	// HasState is true once the server has Raft state; a cluster is never
	// bootstrapped while any server already has some.
	HasState bool
	Alive    bool
	// Keys are the fingerprints of the gossip keys it holds, the one it
	// encrypts with first (see KeyFingerprint).
	Keys  []string
	Left  bool      // left on purpose (graceful)
	Since time.Time // when Alive last changed
	// Version and Applied are as its gossip last said (see nodeMeta).
	Version string
	Applied uint64
}

// nodeMeta is what a server tells the others about itself over gossip.
// Its JSON is the wire format between servers of different versions.
type nodeMeta struct {
	ID       string `json:"id"`
	Raft     string `json:"raft"`
	HTTP     string `json:"http"`
	HasState bool   `json:"has_state"`
	// Keys are the fingerprints of its gossip keys, primary first.
	Keys []string `json:"keys,omitempty"`
	// Version is its drover version; Applied the last Raft entry it had
	// applied when it last told (servers of before these send neither).
	Version string `json:"version,omitempty"`
	Applied uint64 `json:"applied,omitempty"`
}

// Cluster tracks the servers gossip knows about.
type Cluster struct {
	cfg  Config
	raft Raft
	log  *slog.Logger
	ml   *memberlist.Memberlist
	// undecryptable counts gossip messages none of this server's keys
	// decrypted (a server with a removed or wrong key is trying).
	undecryptable atomic.Int64
	gossip        string              // this server's gossip address, read once after memberlist started
	keyring       *memberlist.Keyring // nil: gossip in the clear
	consul        *consulDiscovery
	mu            sync.Mutex
	members       map[string]*Member // by server ID
	changed       chan struct{}
	// When the key-mismatch and lonely-join hints were last logged (under
	// hintMu: memberlist logs from its own goroutines).
	hintMu                sync.Mutex
	foreignHint, joinHint time.Time
	cancel                context.CancelFunc
	wg                    sync.WaitGroup
}

// Start starts gossip on cfg.GossipAddr, registers in Consul when
// configured, and keeps joining peers (and bootstrapping Raft with
// BootstrapExpect) in the background until Shutdown.
func Start(cfg Config, r Raft) (*Cluster, error) {
	if cfg.ID == "" || cfg.GossipAddr == "" || cfg.RaftAddr == "" || cfg.HTTPAddr == "" {
		return nil, errors.New("cluster: ID, GossipAddr, RaftAddr and HTTPAddr are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Cluster{cfg: cfg, raft: r, log: log, members: map[string]*Member{}, changed: make(chan struct{}, 1)}
	if err := c.setupGossip(); err != nil {
		return nil, err
	}
	if cfg.ConsulAddr != "" {
		d, err := newConsulDiscovery(cfg.ConsulAddr)
		if err == nil {
			err = d.register(cfg.ID, c.GossipAddr(), cfg.RaftAddr, cfg.HTTPAddr, cfg.HTTPS)
		}
		if err != nil {
			_ = c.ml.Shutdown()
			return nil, err
		}
		c.consul = d
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.runJoin(ctx) }()
	go func() { defer c.wg.Done(); c.runTellApplied(ctx) }()
	if cfg.BootstrapExpect > 0 {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.runBootstrap(ctx) }()
	}
	return c, nil
}

// joinHintAfter is how long joins fail before a server says why it may be
// alone; hintEvery spaces such hints.
var (
	joinHintAfter = 10 * time.Second
	hintEvery     = time.Minute
)

// hintDue reports whether a hint last given at *last may be given again
// (and notes now).
func (c *Cluster) hintDue(last *time.Time) bool {
	c.hintMu.Lock()
	defer c.hintMu.Unlock()
	if !last.IsZero() && time.Since(*last) < hintEvery {
		return false
	}
	*last = time.Now()
	return true
}

// tellAppliedEvery is how often a server tells the others the Raft index
// it has applied (when it changed): what list-peers shows for the others.
const tellAppliedEvery = 2 * time.Second

// runTellApplied re-sends this server's gossip meta when its applied
// index moved, so every server can say how far each one is behind.
func (c *Cluster) runTellApplied(ctx context.Context) {
	tick := time.NewTicker(tellAppliedEvery)
	defer tick.Stop()
	var told uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if a := c.raft.AppliedIndex(); a != told {
			if err := c.ml.UpdateNode(time.Second); err == nil {
				told = a
			}
		}
	}
}

// Shutdown deregisters from Consul and stops gossip. There is no gossip
// Leave: a server that stops is kept in the Raft configuration (it will
// likely come back) until it has been gone for DeadServerGrace, or an
// operator removes it.
func (c *Cluster) Shutdown() {
	if c.consul != nil {
		if err := c.consul.deregister(); err != nil {
			c.log.Warn("consul deregister", "err", err)
		}
	}
	_ = c.ml.Shutdown()
	c.cancel()
	c.wg.Wait()
}

func (c *Cluster) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// memberlist delegates.

type gossipDelegate struct{ c *Cluster }

func (d gossipDelegate) NodeMeta(limit int) []byte {
	c := d.c
	m := nodeMeta{ID: c.cfg.ID, Raft: c.cfg.RaftAddr, HTTP: c.cfg.HTTPAddr, HasState: c.hasRaftState(), Keys: c.fingerprints(),
		Version: version.Get(), Applied: c.raft.AppliedIndex()}
	b, _ := json.Marshal(m)
	if len(b) > limit {
		// Long addresses: tell who we are, not our keys.
		m.Keys = nil
		if b, _ = json.Marshal(m); len(b) > limit {
			return nil
		}
	}
	return b
}

func (gossipDelegate) NotifyMsg([]byte)                {}
func (gossipDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (gossipDelegate) LocalState(bool) []byte          { return nil }
func (gossipDelegate) MergeRemoteState([]byte, bool)   {}

type eventDelegate struct{ c *Cluster }

func (e eventDelegate) NotifyJoin(n *memberlist.Node)   { e.c.update(n, true) }
func (e eventDelegate) NotifyUpdate(n *memberlist.Node) { e.c.update(n, true) }
func (e eventDelegate) NotifyLeave(n *memberlist.Node)  { e.c.update(n, false) }

func (c *Cluster) update(n *memberlist.Node, alive bool) {
	var meta nodeMeta
	if err := json.Unmarshal(n.Meta, &meta); err != nil || meta.ID == "" {
		return // not a drover server
	}
	c.mu.Lock()
	m, ok := c.members[meta.ID]
	if !ok {
		m = &Member{}
		c.members[meta.ID] = m
	}
	if !ok || m.Alive != alive {
		m.Since = time.Now()
	}
	m.ID, m.Raft, m.HTTP, m.HasState, m.Keys = meta.ID, meta.Raft, meta.HTTP, meta.HasState, meta.Keys
	m.Version, m.Applied = meta.Version, meta.Applied
	m.Gossip = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	m.Alive = alive
	m.Left = !alive && n.State == memberlist.StateLeft
	left := m.Left
	c.mu.Unlock()
	c.log.Debug("server membership", "id", meta.ID, "alive", alive, "left", left)
	c.signal()
}

// Members returns the known servers sorted by ID.
func (c *Cluster) Members() []Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Member, 0, len(c.members))
	for _, m := range c.members {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Member returns one server by Raft ID.
func (c *Cluster) Member(id string) (Member, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.members[id]
	if !ok {
		return Member{}, false
	}
	return *m, true
}

// setupGossip starts memberlist on GossipAddr.
func (c *Cluster) setupGossip() error {
	cfg := &c.cfg
	host, portStr, err := net.SplitHostPort(cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("gossip address %q: %w", cfg.GossipAddr, err)
	}
	port, _ := strconv.Atoi(portStr)
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.ID
	mc.BindAddr = host
	mc.BindPort = port
	if cfg.GossipAdvertise != "" {
		ah, ap, err := net.SplitHostPort(cfg.GossipAdvertise)
		if err != nil {
			return fmt.Errorf("gossip advertise address %q: %w", cfg.GossipAdvertise, err)
		}
		mc.AdvertiseAddr = ah
		mc.AdvertisePort, _ = strconv.Atoi(ap)
	}
	if len(cfg.GossipKeys) > 0 {
		kr, err := memberlist.NewKeyring(cfg.GossipKeys, cfg.GossipKeys[0])
		if err != nil {
			return fmt.Errorf("gossip keys: %w", err)
		}
		mc.Keyring = kr
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
		c.keyring = kr
	}
	mc.Delegate = gossipDelegate{c}
	mc.Events = eventDelegate{c}
	mc.DeadNodeReclaimTime = 5 * time.Second
	mc.Logger = log.New(slogWriter{l: c.log.With("component", "gossip"), c: c}, "", 0)
	if cfg.GossipInterval > 0 {
		mc.ProbeInterval = cfg.GossipInterval
		mc.GossipInterval = cfg.GossipInterval / 5
		mc.PushPullInterval = 10 * cfg.GossipInterval
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("start gossip on %s: %w", cfg.GossipAddr, err)
	}
	c.ml = ml
	// Read the address now: the node LocalNode returns is memberlist's own
	// and changes under its lock (UpdateNode), so it is not read later.
	n := ml.LocalNode()
	c.gossip = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	return nil
}

// slogWriter turns memberlist's log lines into structured logs at a level
// read from the line's "[LEVEL]" prefix, and adds what to do to the one
// line an operator meets after a key rotation.
type slogWriter struct {
	l *slog.Logger
	c *Cluster
}

// Undecryptable counts the gossip messages none of this server's keys
// decrypted since it started.
func (c *Cluster) Undecryptable() int64 { return c.undecryptable.Load() }

// undecryptable is memberlist's line for a message none of this server's
// gossip keys decrypts.
const undecryptable = "No installed keys could decrypt the message"

func (w slogWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), undecryptable) && w.c != nil {
		w.c.undecryptable.Add(1)
	}
	if strings.Contains(string(p), undecryptable) && w.c != nil && w.c.hintDue(&w.c.foreignHint) {
		w.l.Warn("a server whose gossip key this server does not hold is trying to reach it; if it replaces a server after a key rotation, "+
			"start it with the current key file (drover operator gossip keyring list shows the installed keys' fingerprints)",
			"installed", strings.Join(w.c.fingerprints(), ","))
	}
	line := string(p)
	level := slog.LevelInfo
	for prefix, lv := range map[string]slog.Level{"[DEBUG]": slog.LevelDebug, "[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError, "[INFO]": slog.LevelInfo} {
		if i := strings.Index(line, prefix); i >= 0 {
			level = lv
			line = line[i+len(prefix):]
			break
		}
	}
	w.l.Log(context.Background(), level, strings.TrimSpace(line))
	return len(p), nil
}

// runJoin joins the -join peers (and those discovered through Consul) until
// at least one answers, then keeps retrying the ones not yet seen, so a
// cluster forms whatever order its servers start in.
func (c *Cluster) runJoin(ctx context.Context) {
	delay := 500 * time.Millisecond
	var failing time.Time // since when no join worked
	for {
		peers := append([]string(nil), c.cfg.Join...)
		if c.consul != nil {
			found, err := c.consul.discover(ctx)
			if err != nil {
				c.log.Warn("consul discovery failed", "err", err)
			}
			peers = append(peers, found...)
		}
		known := map[string]bool{}
		for _, m := range c.Members() {
			if m.Alive {
				known[m.Gossip] = true
			}
		}
		var todo []string
		for _, p := range peers {
			if !known[p] && p != c.GossipAddr() {
				todo = append(todo, p)
			}
		}
		if len(todo) > 0 {
			if n, err := c.ml.Join(todo); err != nil && n == 0 {
				c.log.Debug("gossip join", "peers", todo, "err", err)
				if failing.IsZero() {
					failing = time.Now()
				}
				if time.Since(failing) >= joinHintAfter && len(c.Members()) <= 1 && c.hintDue(&c.joinHint) {
					msg := "cannot join any server: check the -join addresses and that their gossip ports are reachable"
					args := []any{"peers", todo, "for", time.Since(failing).Round(time.Second), "err", err}
					if c.keyring != nil {
						msg += "; if the cluster rotated its gossip key, this server's key file may hold one it removed: " +
							"start it with the current one (drover operator gossip keyring list on a server shows the installed fingerprints)"
						args = append(args, "keys", strings.Join(c.fingerprints(), ","))
					}
					c.log.Warn(msg, args...)
				}
			} else {
				delay = 2 * time.Second
				failing = time.Time{}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
	}
}

// Encrypted reports whether gossip is encrypted.
func (c *Cluster) Encrypted() bool { return c.keyring != nil }

// GossipAddr is the gossip address other servers reach this one at.
func (c *Cluster) GossipAddr() string { return c.gossip }

func (c *Cluster) hasRaftState() bool { return c.raft.LastIndex() > 0 }

// runBootstrap bootstraps Raft once BootstrapExpect servers, none of which
// has Raft state, can see each other. Every one of them computes the same
// configuration from the same member list.
func (c *Cluster) runBootstrap(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.changed:
		case <-tick.C:
		}
		if c.hasRaftState() {
			// Tell the others, so none of them bootstraps on its own.
			_ = c.ml.UpdateNode(time.Second)
			return
		}
		var servers []raft.Server
		for _, m := range c.Members() {
			if !m.Alive {
				continue
			}
			if m.HasState {
				c.log.Info("a server already has Raft state; waiting to be added to its cluster", "server", m.ID)
				return
			}
			if c.cfg.VerifyRaft != nil && m.ID != c.cfg.ID {
				if err := c.cfg.VerifyRaft(m.ID, m.Raft, false); err != nil {
					c.log.Warn("not bootstrapping with a member whose raft endpoint did not prove it is a server", "server", m.ID, "raft", m.Raft, "err", err)
					continue
				}
			}
			servers = append(servers, raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Raft)})
		}
		if len(servers) < c.cfg.BootstrapExpect {
			continue
		}
		c.log.Info("bootstrapping the cluster", "servers", len(servers))
		if err := c.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			c.log.Warn("bootstrap", "err", err)
		}
		_ = c.ml.UpdateNode(time.Second)
		return
	}
}
