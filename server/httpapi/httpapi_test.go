package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/cluster"
	"github.com/drover-sched/drover/server/joblogs"
	"github.com/drover-sched/drover/server/state"
)

// These tests drive the API through its interfaces alone, with fakes for
// the node, Raft and membership: the seam the server wires up.

const rootToken = "root-token"

type fakeNode struct {
	mu       sync.Mutex
	st       *state.State
	leader   bool
	ready    bool
	leaderID string
	verify   error
	applied  []state.Command
	moved    chan struct{}
	logs     *joblogs.Store
}

func (n *fakeNode) Apply(c state.Command) (any, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.leader {
		return nil, ErrNotLeader
	}
	n.applied = append(n.applied, c)
	res := n.st.Apply(uint64(len(n.applied)+10), c)
	if ae, ok := res.(*state.ApplyError); ok {
		return nil, ae
	}
	return res, nil
}
func (n *fakeNode) IsLeader() bool { n.mu.Lock(); defer n.mu.Unlock(); return n.leader }
func (n *fakeNode) Ready() bool    { n.mu.Lock(); defer n.mu.Unlock(); return n.ready }
func (n *fakeNode) Leader() (string, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.leaderID == "" {
		return "", ""
	}
	return "raft-" + n.leaderID, n.leaderID
}
func (n *fakeNode) VerifyLeader(context.Context) error { return n.verify }
func (n *fakeNode) LeaderMoved() <-chan struct{}       { return n.moved }
func (n *fakeNode) Unreachable() []string              { return nil }

// fakeRaft knows a three-server configuration and nothing else.
type fakeRaft struct{ node *fakeNode }

type confFuture struct{ conf raft.Configuration }

func (f confFuture) Error() error                      { return nil }
func (f confFuture) Index() uint64                     { return 1 }
func (f confFuture) Configuration() raft.Configuration { return f.conf }

func (r fakeRaft) GetConfiguration() raft.ConfigurationFuture {
	var conf raft.Configuration
	for _, id := range []string{"s0", "s1", "s2"} {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress("raft-" + id), Suffrage: raft.Voter})
	}
	return confFuture{conf}
}
func (r fakeRaft) LeaderWithID() (raft.ServerAddress, raft.ServerID) {
	a, id := r.node.Leader()
	return raft.ServerAddress(a), raft.ServerID(id)
}
func (fakeRaft) Stats() map[string]string { return map[string]string{"commit_index": "11"} }
func (fakeRaft) CurrentTerm() uint64      { return 3 }
func (fakeRaft) LastIndex() uint64        { return 12 }
func (fakeRaft) AppliedIndex() uint64     { return 11 }
func (fakeRaft) RemoveServer(raft.ServerID, uint64, time.Duration) raft.IndexFuture {
	panic("not used")
}
func (fakeRaft) LeadershipTransfer() raft.Future { panic("not used") }
func (fakeRaft) LeadershipTransferToServer(raft.ServerID, raft.ServerAddress) raft.Future {
	panic("not used")
}
func (fakeRaft) Restore(*raft.SnapshotMeta, io.Reader, time.Duration) error { panic("not used") }

type fakeMembers map[string]cluster.Member

func (m fakeMembers) Member(id string) (cluster.Member, bool) { mb, ok := m[id]; return mb, ok }
func (m fakeMembers) Members() []cluster.Member {
	var out []cluster.Member
	for _, mb := range m {
		out = append(out, mb)
	}
	return out
}

type noWorkers struct{}

func (noWorkers) Touch(uint32)                                { panic("not used") }
func (noWorkers) HoldSync(uint32) func()                      { panic("not used") }
func (noWorkers) Heard(uint32) (time.Time, bool)              { panic("not used") }
func (noWorkers) Wait(uint32) <-chan struct{}                 { panic("not used") }
func (noWorkers) Submit(context.Context, []state.Event) error { panic("not used") }

// newAPI serves an API as server s1 whose state has the admin.
func newAPI(t testing.TB, node *fakeNode, members Members) *httptest.Server {
	return newAPIWith(t, node, members, nil)
}

// newAPIWith is newAPI with its dependencies changed by tweak.
func newAPIWith(t testing.TB, node *fakeNode, members Members, tweak func(*Deps)) *httptest.Server {
	t.Helper()
	node.st = state.New()
	node.st.Apply(1, &state.Bootstrap{Now: 1, Admin: "root", TokenHash: token.Hash(rootToken), DefaultProject: "default"})
	if node.moved == nil {
		node.moved = make(chan struct{})
	}
	logs, err := joblogs.Open(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	node.logs = logs
	cfg := Config{ID: "s1", Advertise: "127.0.0.1:1", DataDir: t.TempDir(), WorkerSecret: "x", DefaultBillingProject: "default",
		ApplyTimeout: time.Second, MaxSyncWait: time.Second}
	deps := Deps{
		Config: cfg,
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)), State: node.st, Logs: logs, Node: node, Raft: fakeRaft{node},
		Members: members, Liveness: noWorkers{}, Notifier: noWorkers{}, Events: noWorkers{}, Metrics: prometheus.NewRegistry(),
	}
	if tweak != nil {
		tweak(&deps)
	}
	a, err := New(deps)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+rootToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e api.ErrorResponse
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return resp.StatusCode, e.Error
	}
	return resp.StatusCode, string(data)
}

func TestLeaderWritesThroughNode(t *testing.T) {
	node := &fakeNode{leader: true, ready: true, leaderID: "s1"}
	srv := newAPI(t, node, nil)
	code, body := call(t, "POST", srv.URL+"/api/v1/users", `{"name":"alice"}`)
	if code != http.StatusCreated {
		t.Fatalf("create user: %d %s", code, body)
	}
	var u api.User
	_ = json.Unmarshal([]byte(body), &u)
	cu, ok := node.applied[0].(*state.CreateUser)
	if !ok || cu.Name != "alice" || cu.TokenHash != token.Hash(u.Token) || u.Token == "" {
		t.Fatalf("applied %+v for user %+v: want CreateUser with the hash of the returned token", node.applied, u)
	}
	// A consistent read asks the node to verify its leadership first.
	node.verify = errors.New("lost the lease")
	if code, msg := call(t, "GET", srv.URL+"/api/v1/users", ""); code != http.StatusServiceUnavailable || !strings.Contains(msg, "lost the lease") {
		t.Fatalf("read on a deposed leader: %d %s", code, msg)
	}
	if code, _ := call(t, "GET", srv.URL+"/api/v1/users?stale=true", ""); code != http.StatusOK {
		t.Fatalf("stale read: %d", code)
	}
}

func TestNotReadyAnswers503(t *testing.T) {
	srv := newAPI(t, &fakeNode{leader: true, ready: false, leaderID: "s1"}, nil)
	if code, msg := call(t, "GET", srv.URL+"/api/v1/whoami", ""); code != http.StatusServiceUnavailable || !strings.Contains(msg, "catching up") {
		t.Fatalf("whoami while starting: %d %s", code, msg)
	}
	if code, _ := call(t, "GET", srv.URL+"/api/v1/health", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("health while starting: %d", code)
	}
}

func TestFollowerForwardsToTheLeaderMembershipNames(t *testing.T) {
	var got http.Header
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		writeJSON(w, http.StatusOK, map[string]string{"answered_by": "s0", "path": r.URL.Path})
	}))
	defer leader.Close()
	node := &fakeNode{ready: true, leaderID: "s0"}
	srv := newAPI(t, node, fakeMembers{"s0": {ID: "s0", HTTP: strings.TrimPrefix(leader.URL, "http://"), Alive: true}})
	code, body := call(t, "POST", srv.URL+"/api/v1/batches/7/cancel", `{}`)
	if code != http.StatusOK || !strings.Contains(body, `"answered_by":"s0"`) || got.Get(forwardedHeader) != "s1" {
		t.Fatalf("forwarded write: %d %s, leader saw %v", code, body, got)
	}
	if len(node.applied) != 0 {
		t.Fatal("a follower applied a write itself")
	}
	// A request another server already forwarded is not passed on again.
	code, msg := call(t, "POST", srv.URL+"/api/v1/batches/7/cancel", `{}`, forwardedHeader, "s2")
	if code != http.StatusServiceUnavailable || !strings.Contains(msg, "leadership moved while s2 forwarded") {
		t.Fatalf("second hop: %d %s", code, msg)
	}
}

func TestFollowerWithoutLeaderExplainsQuorum(t *testing.T) {
	srv := newAPI(t, &fakeNode{ready: true}, fakeMembers{"s0": {ID: "s0", Alive: false}, "s2": {ID: "s2", Alive: false}})
	code, msg := call(t, "GET", srv.URL+"/api/v1/batches", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(msg, "no quorum: only 1 of 3 servers are reachable and 2 are needed") {
		t.Fatalf("read without a leader: %d %s", code, msg)
	}
}

// TestAnonymousLearnsNoRaftAddress: a request without a token that finds
// leadership gone is answered before authentication; the answer names
// the leader by ID, never by its Raft address (nor does health).
func TestAnonymousLearnsNoRaftAddress(t *testing.T) {
	node := &fakeNode{leader: true, ready: true, leaderID: "s1", verify: errors.New("lost the lease")}
	srv := newAPI(t, node, nil)
	for _, path := range []string{"/api/v1/users", "/api/v1/health"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "raft-s1") || !strings.Contains(string(body), "s1") {
			t.Errorf("%s without a token: %d %s", path, resp.StatusCode, body)
		}
	}
}

// TestUnknownRoutesAnswerInJSON: a method a path is not served with gets
// 405 naming the allowed ones (and an Allow header), an unknown path 404,
// both as JSON like every other error.
func TestUnknownRoutesAnswerInJSON(t *testing.T) {
	srv := newAPI(t, &fakeNode{leader: true, ready: true}, nil)
	for _, c := range []struct {
		method, path string
		code         int
		allow, msg   string
	}{
		{"DELETE", "/api/v1/health", 405, "GET, HEAD", "DELETE is not allowed on /api/v1/health; allowed: GET, HEAD"},
		{"GET", "/api/v1/nothing", 404, "", "no such endpoint: GET /api/v1/nothing"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != c.code || resp.Header.Get("Allow") != c.allow || !strings.Contains(body.Error, c.msg) {
			t.Errorf("%s %s: %d, Allow %q, %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), body.Error)
		}
	}
}
