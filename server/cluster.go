package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// nodeMeta is what a server tells the others about itself over gossip.
type nodeMeta struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	HTTP string `json:"http"`
	// HasState is true once the server has Raft state; a cluster is never
	// bootstrapped while any server already has some.
	HasState bool `json:"has_state"`
}

// memberStatus is a server as gossip sees it.
type memberStatus struct {
	meta   nodeMeta
	gossip string // gossip address
	alive  bool
	left   bool      // left on purpose (graceful)
	since  time.Time // when alive last changed
}

// cluster tracks the servers gossip knows about.
type cluster struct {
	s       *Server
	ml      *memberlist.Memberlist
	mu      sync.Mutex
	members map[string]*memberStatus // by server ID
	changed chan struct{}
}

func (c *cluster) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// memberlist delegates.

type gossipDelegate struct{ c *cluster }

func (d gossipDelegate) NodeMeta(limit int) []byte {
	s := d.c.s
	m := nodeMeta{ID: s.id, Raft: s.RaftAddr(), HTTP: s.httpAdvertise, HasState: s.hasRaftState()}
	b, _ := json.Marshal(m)
	if len(b) > limit {
		return nil
	}
	return b
}

func (gossipDelegate) NotifyMsg([]byte)                {}
func (gossipDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (gossipDelegate) LocalState(bool) []byte          { return nil }
func (gossipDelegate) MergeRemoteState([]byte, bool)   {}

type eventDelegate struct{ c *cluster }

func (e eventDelegate) NotifyJoin(n *memberlist.Node)   { e.c.update(n, true) }
func (e eventDelegate) NotifyUpdate(n *memberlist.Node) { e.c.update(n, true) }
func (e eventDelegate) NotifyLeave(n *memberlist.Node)  { e.c.update(n, false) }

func (c *cluster) update(n *memberlist.Node, alive bool) {
	var meta nodeMeta
	if err := json.Unmarshal(n.Meta, &meta); err != nil || meta.ID == "" {
		return // not a drover server
	}
	c.mu.Lock()
	m, ok := c.members[meta.ID]
	if !ok {
		m = &memberStatus{}
		c.members[meta.ID] = m
	}
	if !ok || m.alive != alive {
		m.since = time.Now()
	}
	m.meta = meta
	m.gossip = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	m.alive = alive
	m.left = !alive && n.State == memberlist.StateLeft
	c.mu.Unlock()
	c.s.log.Debug("server membership", "id", meta.ID, "alive", alive, "left", m.left)
	c.signal()
}

// snapshot returns the known servers sorted by ID.
func (c *cluster) snapshot() []memberStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]memberStatus, 0, len(c.members))
	for _, m := range c.members {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].meta.ID < out[j].meta.ID })
	return out
}

func (c *cluster) member(id string) (memberStatus, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.members[id]
	if !ok {
		return memberStatus{}, false
	}
	return *m, true
}

// setupGossip starts memberlist on GossipAddr and joins the given peers.
func (s *Server) setupGossip() error {
	host, portStr, err := net.SplitHostPort(s.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("gossip address %q: %w", s.cfg.GossipAddr, err)
	}
	port, _ := strconv.Atoi(portStr)
	c := &cluster{s: s, members: map[string]*memberStatus{}, changed: make(chan struct{}, 1)}
	mc := memberlist.DefaultLANConfig()
	mc.Name = s.id
	mc.BindAddr = host
	mc.BindPort = port
	if s.cfg.GossipAdvertise != "" {
		ah, ap, err := net.SplitHostPort(s.cfg.GossipAdvertise)
		if err != nil {
			return fmt.Errorf("gossip advertise address %q: %w", s.cfg.GossipAdvertise, err)
		}
		mc.AdvertiseAddr = ah
		mc.AdvertisePort, _ = strconv.Atoi(ap)
	}
	mc.Delegate = gossipDelegate{c}
	mc.Events = eventDelegate{c}
	mc.DeadNodeReclaimTime = 5 * time.Second
	mc.Logger = log.New(slogWriter{s.log.With("component", "gossip")}, "", 0)
	if s.cfg.GossipInterval > 0 {
		mc.ProbeInterval = s.cfg.GossipInterval
		mc.GossipInterval = s.cfg.GossipInterval / 5
		mc.PushPullInterval = 10 * s.cfg.GossipInterval
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("start gossip on %s: %w", s.cfg.GossipAddr, err)
	}
	c.ml = ml
	s.cluster = c
	return nil
}

// slogWriter turns memberlist's log lines into structured logs at a level
// read from the line's "[LEVEL]" prefix.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
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
func (s *Server) runJoin(ctx context.Context) {
	delay := 500 * time.Millisecond
	for {
		peers := append([]string(nil), s.cfg.Join...)
		if s.consul != nil {
			found, err := s.consul.discover(ctx)
			if err != nil {
				s.log.Warn("consul discovery failed", "err", err)
			}
			peers = append(peers, found...)
		}
		known := map[string]bool{}
		for _, m := range s.cluster.snapshot() {
			if m.alive {
				known[m.gossip] = true
			}
		}
		var todo []string
		for _, p := range peers {
			if !known[p] && p != s.gossipAdvertise() {
				todo = append(todo, p)
			}
		}
		if len(todo) > 0 {
			if n, err := s.cluster.ml.Join(todo); err != nil && n == 0 {
				s.log.Debug("gossip join", "peers", todo, "err", err)
			} else {
				delay = 2 * time.Second
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

func (s *Server) gossipAdvertise() string {
	if s.cluster == nil {
		return ""
	}
	n := s.cluster.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

func (s *Server) hasRaftState() bool {
	if s.raft == nil || s.raft.raft == nil {
		return false
	}
	return s.raft.raft.LastIndex() > 0
}

// runBootstrap bootstraps Raft once BootstrapExpect servers, none of which
// has Raft state, can see each other. Every one of them computes the same
// configuration from the same member list.
func (s *Server) runBootstrap(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.cluster.changed:
		case <-tick.C:
		}
		if s.hasRaftState() {
			// Tell the others, so none of them bootstraps on its own.
			_ = s.cluster.ml.UpdateNode(time.Second)
			return
		}
		var servers []raft.Server
		for _, m := range s.cluster.snapshot() {
			if !m.alive {
				continue
			}
			if m.meta.HasState {
				s.log.Info("a server already has Raft state; waiting to be added to its cluster", "server", m.meta.ID)
				return
			}
			servers = append(servers, raft.Server{ID: raft.ServerID(m.meta.ID), Address: raft.ServerAddress(m.meta.Raft)})
		}
		if len(servers) < s.cfg.BootstrapExpect {
			continue
		}
		s.log.Info("bootstrapping the cluster", "servers", len(servers))
		if err := s.raft.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			s.log.Warn("bootstrap", "err", err)
		}
		_ = s.cluster.ml.UpdateNode(time.Second)
		return
	}
}

// runAutopilot keeps the Raft configuration in line with gossip, on the
// leader: servers that are alive but not voters are added; servers gone for
// longer than DeadServerGrace (or that left) are removed, one at a time and
// only while the servers still alive would make a quorum of what is left.
func (s *Server) runAutopilot(ctx context.Context) {
	if s.cluster == nil {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	downSince := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.cluster.changed:
		case <-tick.C:
		}
		f := s.raft.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			continue
		}
		conf := f.Configuration()
		inConf := map[string]raft.Server{}
		for _, srv := range conf.Servers {
			inConf[string(srv.ID)] = srv
		}
		members := map[string]memberStatus{}
		for _, m := range s.cluster.snapshot() {
			members[m.meta.ID] = m
		}
		// Add alive servers that are not voters (new or restarted after
		// removal), or whose Raft address changed.
		for id, m := range members {
			if !m.alive || m.meta.Raft == "" {
				continue
			}
			if srv, ok := inConf[id]; ok && string(srv.Address) == m.meta.Raft {
				continue
			}
			if err := s.raft.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(m.meta.Raft), 0, 10*time.Second).Error(); err != nil {
				s.log.Warn("add server to raft", "server", id, "err", err)
			} else {
				s.log.Info("added server to the raft configuration", "server", id, "raft", m.meta.Raft)
			}
		}
		// Remove dead ones.
		now := time.Now()
		alive := 0
		for id := range inConf {
			m, ok := members[id]
			if id == s.id || (ok && m.alive) {
				alive++
				delete(downSince, id)
			} else if _, seen := downSince[id]; !seen {
				downSince[id] = now
				if ok {
					downSince[id] = m.since
				}
			}
		}
		for id, since := range downSince {
			if _, ok := inConf[id]; !ok {
				delete(downSince, id)
				continue
			}
			m := members[id]
			if !m.left && now.Sub(since) < s.cfg.DeadServerGrace {
				continue
			}
			remaining := len(inConf) - 1
			if alive < remaining/2+1 {
				s.log.Warn("not removing a dead server: the rest would not make a quorum", "server", id, "alive", alive, "voters", len(inConf))
				continue
			}
			if err := s.raft.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error(); err != nil {
				s.log.Warn("remove dead server", "server", id, "err", err)
				continue
			}
			s.log.Warn("removed dead server from the raft configuration", "server", id, "down_for", now.Sub(since).Round(time.Second))
			delete(downSince, id)
			break // one at a time; the next round re-reads the configuration
		}
	}
}
