package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
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
		p, err := cl.Operator().Peers(context.Background())
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
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "drover tls ca create") || strings.Contains(err.Error(), "keyring generate") {
		t.Fatalf("with a key and no TLS: %v", err)
	}
	cfg.TLSCert, cfg.TLSKey = "server.pem", "server-key.pem"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "-ca-file") {
		t.Fatalf("TLS without a CA: %v", err)
	}
	cfg.CAFile = "ca.pem"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("with a key and TLS: %v", err)
	}
}

// TestGossipKeyRotation: a new key is installed, used and the old one
// removed on a live 3-server cluster while a client keeps writing; no write
// fails or is lost, every server holds the new keyring (and saved it for
// its next start), and a node with only the old key is no longer seen.
func TestGossipKeyRotation(t *testing.T) {
	c := startTestCluster(t, 3, ClusterOptions{Gossip: true, Configure: func(_ int, cfg *Config) {
		cfg.GossipInterval = 100 * time.Millisecond
	}})
	oldKey := c.Servers[0].cfg.GossipKeys[0]
	oldB64 := base64.StdEncoding.EncodeToString(oldKey)
	newB64, _ := cluster.GenerateGossipKey()
	newKey, _ := cluster.ParseGossipKey(newB64)
	cl := api.NewClient(c.HTTPAddrs(), c.Token)
	ctx := context.Background()

	// A writer that runs through the whole rotation.
	stop := make(chan struct{})
	var accepted []string
	var writeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("during-rotation-%d", i)
			if _, err := cl.CreateUser(ctx, &api.CreateUserRequest{Name: name}); err != nil {
				writeErr = fmt.Errorf("write %d: %w", i, err)
				return
			}
			accepted = append(accepted, name)
			time.Sleep(10 * time.Millisecond)
		}
	}()

	holds := func(want ...[]byte) func() bool {
		return func() bool {
			for _, s := range c.Servers {
				got := s.cluster.Keyring()
				if len(got) != len(want) || !bytes.Equal(got[0], want[0]) {
					return false
				}
				for _, w := range want {
					if !slices.ContainsFunc(got, func(g []byte) bool { return bytes.Equal(g, w) }) {
						return false
					}
				}
			}
			return true
		}
	}
	if _, err := cl.Operator().ChangeGossipKeyring(ctx, "use", newB64); err == nil || !strings.Contains(err.Error(), "install it first") {
		t.Fatalf("using a key not installed: %v", err)
	}
	k, err := cl.Operator().ChangeGossipKeyring(ctx, "install", newB64)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Pending) != 0 || len(k.Keys) != 2 || k.Keys[1].Installed != 3 || k.Keys[1].Servers != 3 || !k.Keys[0].Primary {
		t.Fatalf("after install: %+v", k)
	}
	waitFor(t, "every server to hold both keys, the old one primary", holds(oldKey, newKey))
	if _, err := cl.Operator().ChangeGossipKeyring(ctx, "remove", oldB64); err == nil || !strings.Contains(err.Error(), "primary") {
		t.Fatalf("removing the primary key: %v", err)
	}
	if k, err = cl.Operator().ChangeGossipKeyring(ctx, "use", newB64); err != nil {
		t.Fatal(err)
	}
	if len(k.Pending) != 0 || k.Keys[0].Key != newB64 || !k.Keys[0].Primary {
		t.Fatalf("after use: %+v", k)
	}
	waitFor(t, "every server to encrypt with the new key", holds(newKey, oldKey))
	if k, err = cl.Operator().ChangeGossipKeyring(ctx, "remove", oldB64); err != nil {
		t.Fatal(err)
	}
	if len(k.Pending) != 0 || len(k.Keys) != 1 || k.Keys[0].Key != newB64 || k.Keys[0].Installed != 3 {
		t.Fatalf("after remove: %+v", k)
	}
	waitFor(t, "every server to hold only the new key", holds(newKey))
	for _, s := range c.Servers {
		saved, err := cluster.ReadGossipKeyFile(filepath.Join(s.cfg.DataDir, keyringFile))
		if err != nil || len(saved) != 1 || !bytes.Equal(saved[0], newKey) {
			t.Fatalf("server %s saved %d keys (%v), want the new one", s.ID(), len(saved), err)
		}
	}

	// Gossip goes on with the new key only.
	var join []string
	for _, s := range c.Servers {
		join = append(join, s.GossipAddr())
	}
	stale := startIntruder(t, "stale", "old-key-node", "", oldKey, join)
	fresh := startIntruder(t, "fresh", "new-key-node", "", newKey, join)
	waitFor(t, "a node with the new key to be seen by every server", func() bool {
		for _, s := range c.Servers {
			if m, ok := s.cluster.Member("new-key-node"); !ok || !m.Alive {
				return false
			}
		}
		return fresh.members() == 4
	})
	for _, s := range c.Servers {
		if _, ok := s.cluster.Member("old-key-node"); ok {
			t.Fatalf("server %s sees a node that has only the removed key", s.ID())
		}
		alive := 0
		for _, m := range s.cluster.Members() {
			if m.Alive && strings.HasPrefix(m.ID, "s") {
				alive++
			}
		}
		if alive != 3 {
			t.Fatalf("server %s sees %d servers alive after the rotation: %+v", s.ID(), alive, s.cluster.Members())
		}
	}
	if n := stale.members(); n != 1 {
		t.Fatalf("the node with the removed key sees %d members", n)
	}

	close(stop)
	<-done
	if writeErr != nil {
		t.Fatalf("a write failed during the rotation: %v", writeErr)
	}
	if len(accepted) < 5 {
		t.Fatalf("only %d writes during the rotation", len(accepted))
	}
	users, err := cl.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, u := range users {
		have[u.Name] = true
	}
	for _, name := range accepted {
		if !have[name] {
			t.Fatalf("user %s was accepted during the rotation and is gone", name)
		}
	}
	p, err := cl.Operator().Peers(ctx)
	if err != nil || len(p.Servers) != 3 {
		t.Fatalf("raft peers after the rotation: %+v, %v", p, err)
	}
}

// TestSavedKeyringWinsAtStart: a server that rotated keys starts again
// with the keyring it saved, not the key file it was first given.
func TestSavedKeyringWinsAtStart(t *testing.T) {
	dir := t.TempDir()
	a, _ := cluster.GenerateGossipKey()
	b, _ := cluster.GenerateGossipKey()
	keyA, _ := cluster.ParseGossipKey(a)
	keyB, _ := cluster.ParseGossipKey(b)
	if err := os.WriteFile(filepath.Join(dir, keyringFile), []byte("# saved\n"+b+"\n"+a+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := TestConfig(dir, testLogger(t))
	cfg.GossipAddr = "127.0.0.1:0"
	cfg.GossipKeys = [][]byte{keyA}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	got := s.cluster.Keyring()
	if len(got) != 2 || !bytes.Equal(got[0], keyB) {
		t.Fatalf("started with %d keys, primary %x; want the saved keyring with %x first", len(got), got[0], keyB)
	}
	if err := os.WriteFile(filepath.Join(dir, keyringFile), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg2 := TestConfig(t.TempDir(), testLogger(t))
	cfg2.DataDir = dir
	cfg2.GossipAddr = "127.0.0.1:0"
	if _, err := New(cfg2); err == nil || !strings.Contains(err.Error(), keyringFile+":1") {
		t.Fatalf("a corrupt saved keyring: %v", err)
	}
}

// TestRestoreKeepsTheKeyringAndTheAuditLog: restoring a snapshot taken
// before a key rotation brings back its state but not its keyring (which
// holds keys removed since, perhaps because they leaked), and keeps the
// audit entries made since the snapshot; the answer says both.
func TestRestoreKeepsTheKeyringAndTheAuditLog(t *testing.T) {
	c := startTestCluster(t, 3, ClusterOptions{Gossip: true, Configure: func(_ int, cfg *Config) {
		cfg.GossipInterval = 100 * time.Millisecond
	}})
	cl := api.NewClient(c.HTTPAddrs(), c.Token)
	ctx := context.Background()
	oldB64 := base64.StdEncoding.EncodeToString(c.Servers[0].cfg.GossipKeys[0])
	k2, _ := cluster.GenerateGossipKey()
	k3, _ := cluster.GenerateGossipKey()
	k3Key, _ := cluster.ParseGossipKey(k3)
	step := func(op, key string) {
		t.Helper()
		if _, err := cl.Operator().ChangeGossipKeyring(ctx, op, key); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	step("install", k2)
	step("use", k2)
	var snap bytes.Buffer
	if _, err := cl.Operator().SnapshotSave(ctx, &snap); err != nil {
		t.Fatal(err)
	}
	step("install", k3)
	step("use", k3)
	step("remove", oldB64)
	step("remove", k2)
	if _, err := cl.CreateUser(ctx, &api.CreateUserRequest{Name: "after-the-snapshot"}); err != nil {
		t.Fatal(err)
	}
	// Every server's queued audit entries committed (the rotation's four
	// and the user's): what a restore finds in the log to keep.
	for _, s := range c.Servers {
		if err := s.api.WaitAudit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := cl.Operator().SnapshotRestore(ctx, snap.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !res.KeyringKept || res.AuditKept < 5 {
		t.Fatalf("the restore says %+v; want the keyring kept and the rotation's and the user's audit entries", res)
	}
	waitFor(t, "every server to hold only the key in use before the restore", func() bool {
		for _, s := range c.Servers {
			if got := s.cluster.Keyring(); len(got) != 1 || !bytes.Equal(got[0], k3Key) {
				return false
			}
		}
		return true
	})
	users, err := cl.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(users, func(u api.User) bool { return u.Name == "after-the-snapshot" }) {
		t.Fatal("a user made after the snapshot survived its restore")
	}
	var entries []api.AuditEntry
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(entries, func(e api.AuditEntry) bool { return e.Route == "POST /api/v1/users" && e.Status == 201 }) {
		if time.Now().After(deadline) {
			t.Fatalf("the audit entry of the user made after the snapshot is gone: %+v", entries)
		}
		time.Sleep(50 * time.Millisecond)
		entries, _ = cl.Audit(ctx, "1h", "", 0)
	}
}
