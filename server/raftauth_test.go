package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/tlsutil"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/cluster"
	"github.com/drover-sched/drover/testkit/raftattack"
	"github.com/drover-sched/drover/testkit/testlog"
)

// userNames lists the users an admin sees, with their admin flag.
func userNames(t *testing.T, c *api.Client) []string {
	t.Helper()
	users, err := c.ListUsers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range users {
		name := u.Name
		if u.Admin {
			name += " (admin)"
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// TestRaftWithoutTLSFlagsNeedsProof: a server started with neither a
// certificate nor Insecure listens for Raft over mutual TLS with a CA it
// made in its data dir. issue 25's attack (a term-0 probe, then a
// CreateUser{Admin} entry and a garbage entry at term+1, in plain TCP and
// over TLS with a certificate of the attacker's own CA) gets no answer
// and changes nothing; a peer with a certificate of the data dir's CA is
// answered (the listener is real), and a restart reuses the CA.
func TestRaftWithoutTLSFlagsNeedsProof(t *testing.T) {
	dir := t.TempDir()
	tc := startServer(t, dir, nil)
	before := userNames(t, tc.admin)
	tok, _ := token.New()
	res, err := raftattack.Raft(tc.srv.RaftAddr(), raftattack.Options{User: "mallory", Token: tok, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("attack over %s: %+v", r.Via, r.Steps)
		if r.Reached() || r.Appended() {
			t.Fatalf("a stranger over %s was answered: %+v", r.Via, r.Steps)
		}
	}
	if len(res) != 2 {
		t.Fatalf("%d attacks, want plain TCP and TLS", len(res))
	}
	if after := userNames(t, tc.admin); !slices.Equal(before, after) {
		t.Fatalf("users %v became %v", before, after)
	}
	if _, err := api.NewClient(tc.url, tok).Whoami(context.Background()); err == nil {
		t.Fatal("the forged admin's token works")
	}
	if !tc.srv.IsLeader() {
		t.Fatal("the server lost its leadership to the attack")
	}

	// The files, the keys private.
	own := filepath.Join(dir, ownTLSDir)
	caCert, caKey := filepath.Join(own, tlsutil.CACertFile), filepath.Join(own, tlsutil.CAKeyFile)
	certName, keyName := tlsutil.CertFiles(tlsutil.RoleServer, tc.srv.ID())
	for _, f := range []string{caKey, filepath.Join(own, keyName)} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("key %s: %v %v", f, st.Mode(), err)
		}
	}
	if _, err := os.Stat(filepath.Join(own, certName)); err != nil {
		t.Fatal(err)
	}

	// A peer with a server certificate of the data dir's CA is answered.
	ca, err := loadCA(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := tlsutil.CreateCert(ca, tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: "s9", Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	peerDir := t.TempDir()
	peerCert, peerKey := filepath.Join(peerDir, "s9.pem"), filepath.Join(peerDir, "s9-key.pem")
	os.WriteFile(peerCert, peer.Cert, 0o600)
	os.WriteFile(peerKey, peer.Key, 0o600)
	listen, dial, err := tlsutil.RaftConfigs(caCert, peerCert, peerKey)
	if err != nil {
		t.Fatal(err)
	}
	trans, err := newTLSTransport("127.0.0.1:0", nil, &tlsSetup{raftListen: listen, raftDial: dial}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	var resp raft.AppendEntriesResponse
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("s9"), Addr: []byte(trans.LocalAddr())}}
	if err := trans.AppendEntries("s0", raft.ServerAddress(tc.srv.RaftAddr()), req, &resp); err != nil || resp.Term == 0 {
		t.Fatalf("a peer with the data dir CA's certificate: term %d, %v", resp.Term, err)
	}

	// A restart reuses the CA and keeps the state.
	caBefore, _ := os.ReadFile(caCert)
	tc.stop()
	tc = startServer(t, dir, nil)
	if caAfter, _ := os.ReadFile(caCert); !bytes.Equal(caBefore, caAfter) {
		t.Fatal("the restarted server made a new CA")
	}
	if after := userNames(t, tc.admin); !slices.Equal(before, after) {
		t.Fatalf("users %v became %v across the restart", before, after)
	}
}

// loadCA reads a CA's files.
func loadCA(certFile, keyFile string) (tlsutil.CA, error) {
	c, err := os.ReadFile(certFile)
	if err != nil {
		return tlsutil.CA{}, err
	}
	k, err := os.ReadFile(keyFile)
	return tlsutil.CA{Cert: c, Key: k}, err
}

// TestInsecureRaftIsOpenAndSaysSo: with Insecure, Raft listens in plain
// text, the server warns so naming the address, and the attack works:
// the forged entry makes its author an admin. This is what every server
// was before issue 25, and it shows the attack of the other tests is
// real.
func TestInsecureRaftIsOpenAndSaysSo(t *testing.T) {
	var logs testlog.Buffer
	tc := startServer(t, "", func(cfg *Config) {
		cfg.Insecure = true
		cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testlog.Writer(t)), &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	if l := logs.String(); !strings.Contains(l, "WARNING: Raft listens in plain text") || !strings.Contains(l, tc.srv.RaftAddr()) {
		t.Fatalf("no warning naming %s:\n%s", tc.srv.RaftAddr(), l)
	}
	tok, _ := token.New()
	res, err := raftattack.Raft(tc.srv.RaftAddr(), raftattack.Options{User: "mallory", Token: tok, Timeout: 2 * time.Second,
		Entries: []string{raftattack.EntryCreateUser}})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Appended() {
		t.Fatalf("the plain-text attack was refused: %+v", res[0].Steps)
	}
	waitFor(t, "the forged admin to exist", func() bool {
		u, ok := tc.srv.State().UserByTokenHash(token.Hash(tok))
		return ok && u.Admin && u.Name == "mallory"
	})
}

// TestServerWithoutRaftListener: an empty RaftAddr (the dev agent) runs
// Raft in memory: the server leads alone, a restart keeps its data, and a
// data dir a listening server made (its Raft configuration names a TCP
// address) starts this way too. Validate keeps it for a server alone for
// good.
func TestServerWithoutRaftListener(t *testing.T) {
	dir := t.TempDir()
	tc := startServer(t, dir, nil) // a data dir made by a server listening on TCP
	if _, err := tc.admin.CreateUser(context.Background(), &api.CreateUserRequest{Name: "before"}); err != nil {
		t.Fatal(err)
	}
	want := userNames(t, tc.admin)
	tc.stop()
	for round := range 2 {
		tc = startServer(t, dir, func(cfg *Config) { cfg.RaftAddr = "" })
		if _, ok := tc.srv.raft.transport.(*raft.InmemTransport); !ok || tc.srv.RaftAddr() != inmemRaftAddress {
			t.Fatalf("round %d: transport %T at %q", round, tc.srv.raft.transport, tc.srv.RaftAddr())
		}
		if got := userNames(t, tc.admin); !slices.Equal(got, want) {
			t.Fatalf("round %d: users %v, want %v", round, got, want)
		}
		if _, err := os.Stat(filepath.Join(dir, ownTLSDir, tlsutil.CACertFile)); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		tc.stop()
	}
	for name, tweak := range map[string]func(*Config){
		"not bootstrapping": func(c *Config) { c.Bootstrap = false },
		"with gossip":       func(c *Config) { c.GossipAddr = "127.0.0.1:0" },
		"with an advertise": func(c *Config) { c.RaftAdvertise = "10.0.0.1:4651" },
	} {
		cfg := TestConfig(t.TempDir(), testLogger(t))
		cfg.RaftAddr = ""
		tweak(cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "empty RaftAddr") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSingleServerGossip: a server expecting one server and holding no
// gossip key has no gossip listener (nobody can join it) and bootstraps
// alone; given a key, it gossips, and a node that has the key (leaked)
// and says it is a server is seen but never made a voter: autopilot asks
// its Raft endpoint to prove itself with a certificate of the server's
// CA, which it cannot.
func TestSingleServerGossip(t *testing.T) {
	alone := startServer(t, "", func(cfg *Config) {
		cfg.Bootstrap, cfg.BootstrapExpect, cfg.GossipAddr = false, 1, "127.0.0.1:0"
	})
	if alone.srv.cluster != nil || alone.srv.GossipAddr() != "" {
		t.Fatalf("a server alone without a key gossips at %q", alone.srv.GossipAddr())
	}
	alone.stop()

	keyText, _ := cluster.GenerateGossipKey()
	key, _ := cluster.ParseGossipKey(keyText)
	tc := startServer(t, "", func(cfg *Config) {
		cfg.Bootstrap, cfg.BootstrapExpect, cfg.GossipAddr = false, 1, "127.0.0.1:0"
		cfg.GossipKeys, cfg.GossipInterval = [][]byte{key}, 100*time.Millisecond
	})
	if tc.srv.GossipAddr() == "" || !tc.srv.cluster.Encrypted() {
		t.Fatal("a server with a gossip key does not gossip encrypted")
	}
	// The intruder's Raft address: a plain listener that counts what
	// reaches it.
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	var rpcs atomic.Int64
	go func() {
		for rpc := range trans.Consumer() {
			rpcs.Add(1)
			rpc.Respond(nil, io.EOF)
		}
	}()
	startIntruder(t, "mallory", "mallory", string(trans.LocalAddr()), key, []string{tc.srv.GossipAddr()})
	waitFor(t, "the intruder with the key to be seen", func() bool {
		m, ok := tc.srv.cluster.Member("mallory")
		return ok && m.Alive
	})
	time.Sleep(3 * time.Second) // autopilot looks every second and on every change
	p, err := tc.admin.Operator().Peers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Servers) != 1 || p.Servers[0].ID != tc.srv.ID() || rpcs.Load() != 0 {
		t.Fatalf("raft servers %+v, %d RPCs to the intruder: it was made a voter", p.Servers, rpcs.Load())
	}
	if _, err := tc.admin.CreateUser(context.Background(), &api.CreateUserRequest{Name: "still-writable"}); err != nil {
		t.Fatal(err)
	}
}
