package server

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/cluster"
)

// intruder is a memberlist node that says it is a drover server.
type intruder struct {
	ml   *memberlist.Memberlist
	meta []byte
}

func (d *intruder) NodeMeta(int) []byte             { return d.meta }
func (d *intruder) NotifyMsg([]byte)                {}
func (d *intruder) GetBroadcasts(int, int) [][]byte { return nil }
func (d *intruder) LocalState(bool) []byte          { return nil }
func (d *intruder) MergeRemoteState([]byte, bool)   {}
func (d *intruder) members() int                    { return d.ml.NumMembers() }
func (d *intruder) leave()                          { _ = d.ml.Shutdown() }

func startIntruder(t *testing.T, name, id, raftAddr string, key []byte, join []string) *intruder {
	t.Helper()
	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	mc.BindAddr, mc.BindPort = "127.0.0.1", 0
	mc.ProbeInterval, mc.GossipInterval, mc.PushPullInterval = 100*time.Millisecond, 20*time.Millisecond, time.Second
	mc.Logger = log.New(io.Discard, "", 0)
	if key != nil {
		kr, err := memberlist.NewKeyring(nil, key)
		if err != nil {
			t.Fatal(err)
		}
		mc.Keyring = kr
	}
	meta, _ := json.Marshal(map[string]any{"id": id, "raft": raftAddr, "http": "127.0.0.1:1"})
	d := &intruder{meta: meta}
	mc.Delegate = d
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	d.ml = ml
	t.Cleanup(d.leave)
	_, _ = ml.Join(join) // the keyless ones fail, and keep trying through gossip if not
	return d
}

// TestGossipWithoutTheKeyIsNeverSeen: servers gossip encrypted; nodes
// without the key, or with another key, are never seen by any server, so
// they never become members or voters, not even one claiming an existing
// server's ID with a new Raft address. A node with the key is seen (the
// test can tell).
func TestGossipWithoutTheKeyIsNeverSeen(t *testing.T) {
	c := startTestCluster(t, 3, ClusterOptions{Gossip: true, Configure: func(_ int, cfg *Config) {
		cfg.GossipInterval = 100 * time.Millisecond
	}})
	var join []string
	for _, s := range c.Servers {
		if !s.cluster.Encrypted() {
			t.Fatalf("server %s gossips in the clear", s.ID())
		}
		join = append(join, s.GossipAddr())
	}
	other, _ := cluster.GenerateGossipKey()
	otherKey, _ := cluster.ParseGossipKey(other)
	plain := startIntruder(t, "plain", "intruder-plain", "127.0.0.1:9", nil, join)
	wrong := startIntruder(t, "wrong", "intruder-wrong", "127.0.0.1:9", otherKey, join)
	// A server's ID with a new Raft address: were it seen, autopilot
	// would move s1's vote to an address where nothing listens.
	thief := startIntruder(t, "thief", c.Servers[1].ID(), "127.0.0.1:9", nil, join)
	// The control: the cluster's key, no Raft address (so autopilot
	// leaves it out of Raft).
	keyed := startIntruder(t, "keyed", "keyed-observer", "", c.Servers[0].cfg.GossipKeys[0], join)

	cl := api.NewClient(c.HTTPAddrs(), c.Token)
	waitFor(t, "the node with the key to be seen by every server", func() bool {
		for _, s := range c.Servers {
			if m, ok := s.cluster.Member("keyed-observer"); !ok || !m.Alive {
				return false
			}
		}
		return true
	})
	// Several push-pull rounds later, still nothing of the others.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range c.Servers {
			for _, m := range s.cluster.Members() {
				if strings.HasPrefix(m.ID, "intruder") || m.Raft == "127.0.0.1:9" {
					t.Fatalf("server %s sees %+v, a node without the key", s.ID(), m)
				}
			}
		}
		if n := keyed.members(); n != 4 {
			t.Fatalf("the node with the key sees %d members, not the 3 servers and itself: nodes without the key got in", n)
		}
		for name, d := range map[string]*intruder{"plain": plain, "wrong": wrong, "thief": thief} {
			if n := d.members(); n != 1 {
				t.Fatalf("the %s node sees %d members, itself and servers it should not reach", name, n)
			}
		}
		p, err := cl.Peers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Servers) != 3 {
			t.Fatalf("raft has %d servers, want the 3: %+v", len(p.Servers), p.Servers)
		}
		for i, srv := range p.Servers {
			if strings.HasSuffix(srv.Address, ":9") || !strings.HasPrefix(srv.ID, "s") {
				t.Fatalf("raft peer %d is %+v", i, srv)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := cl.CreateUser(context.Background(), &api.CreateUserRequest{Name: "still-writable"}); err != nil {
		t.Fatal(err)
	}
}

func TestGossipKeyRequired(t *testing.T) {
	cfg := TestConfig(t.TempDir(), testLogger(t))
	cfg.Bootstrap = false
	cfg.GossipAddr = "127.0.0.1:0"
	cfg.BootstrapExpect = 3
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "drover operator gossip keyring generate") || !strings.Contains(err.Error(), "-insecure") {
		t.Fatalf("a 3-server config without a gossip key: %v", err)
	}
	cfg.Insecure = true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("with Insecure: %v", err)
	}
	cfg.Insecure = false
	cfg.GossipKeys = [][]byte{make([]byte, 20)}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "20 bytes") {
		t.Fatalf("a 20-byte key: %v", err)
	}
	key, err := cluster.GenerateGossipKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := cluster.ParseGossipKey(key)
	if err != nil || len(k) != cluster.GossipKeySize {
		t.Fatalf("generated key %q: %d bytes, %v", key, len(k), err)
	}
	cfg.GossipKeys = [][]byte{k}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("with a key: %v", err)
	}
}
