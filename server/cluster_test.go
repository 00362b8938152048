package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/testkit/fakeconsul"
	"github.com/drover-sched/drover/testkit/simworker"
	"github.com/drover-sched/drover/version"
)

func startTestCluster(t *testing.T, n int, opts ClusterOptions) *TestCluster {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := NewTestCluster(ctx, t.TempDir(), n, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// follower returns a server that does not lead.
func follower(t *testing.T, c *TestCluster) *Server {
	t.Helper()
	for _, s := range c.Servers {
		if !s.IsLeader() {
			return s
		}
	}
	t.Fatal("every server leads")
	return nil
}

// runWorkers runs simulated workers against addrs until ctx ends.
func runWorkers(ctx context.Context, t *testing.T, addrs string, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	rec := simworker.NewRecorder()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := simworker.Run(ctx, simworker.Config{Servers: addrs, Secret: "test-secret", Name: fmt.Sprint("sim", i),
				Cores: 4, Memory: 16 << 30, SyncWait: 200 * time.Millisecond, Rec: rec})
			if err != nil && ctx.Err() == nil {
				t.Errorf("worker %d: %v", i, err)
			}
		}()
	}
	return &wg
}

func waitComplete(t *testing.T, cl *api.Client, id int64) *api.Batch {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := cl.GetBatch(context.Background(), id)
		if err == nil && b.State == "complete" {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %d not complete: %+v %v", id, b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInProcessClusterForwardsReplicatesAndMovesLeadership submits through a
// follower (forwarded to the leader), runs the jobs with workers that talk
// to followers, reads the result from every server, then moves leadership
// and does it again on the new leader.
func TestInProcessClusterForwardsReplicatesAndMovesLeadership(t *testing.T) {
	c := startTestCluster(t, 3, ClusterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := follower(t, c)
	cl := api.NewClient("http://"+f.HTTPAddr(), c.Token)
	wg := runWorkers(ctx, t, "http://"+f.HTTPAddr(), 2)
	defer wg.Wait()
	defer cancel()

	b, err := cl.Submit(ctx, &api.CreateBatchRequest{Name: "through-a-follower"},
		api.GeneratedJobs{N: 40, Make: func(i int) api.JobSpec { return job(int64(i+1), "j") }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := b.ID
	if b := waitComplete(t, cl, id); b.NSucceeded != 40 {
		t.Fatalf("batch %+v", b)
	}
	// Each server's own state catches up with the end of the batch.
	for _, s := range c.Servers {
		waitFor(t, "server "+s.ID()+" to apply the batch's end", func() bool {
			b, ok := s.State().Batch(uint64(id))
			return ok && b.Completed != 0
		})
	}

	// The leader that handles the transfer answers once it has heard from
	// its successor. (Compare with the server that answered, not with an
	// earlier c.Leader(): on a loaded machine an election may have moved
	// leadership in between.)
	before, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.Operator().TransferLeader(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaderID == "" || (st.LeaderID == before.LeaderID && st.Term == before.Term) {
		t.Fatalf("leadership did not move: %+v (was %+v)", st, before)
	}
	waitFor(t, "a leader running its loops", func() bool { return c.Leader() != nil })
	b2, err := api.NewClient(c.HTTPAddrs(), c.Token).Submit(ctx, &api.CreateBatchRequest{Name: "after-transfer"},
		api.Jobs{job(1, "a")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitComplete(t, cl, b2.ID)
	peers, err := cl.Operator().Peers(ctx)
	if err != nil || len(peers.Servers) != 3 {
		t.Fatalf("peers %+v %v", peers, err)
	}
	for _, p := range peers.Servers {
		if !p.Alive || p.HTTP == "" {
			t.Fatalf("peer %+v: want every server alive with its API address", p)
		}
	}
}

// TestTransferLeaderIsIdempotent: a transfer asked through a follower
// (whose forward is cut when leadership moves, so the client retries)
// moves leadership once; asked again from the same view it moves nothing;
// a transfer to the server that leads succeeds; each transfer is in the
// audit log.
func TestTransferLeaderIsIdempotent(t *testing.T) {
	c := startTestCluster(t, 3, ClusterOptions{})
	ctx := context.Background()
	f := follower(t, c)
	cl := api.NewClient("http://"+f.HTTPAddr(), c.Token)
	before, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.Operator().TransferLeader(ctx, "")
	if err != nil || st.LeaderID == before.LeaderID || st.LeaderID == "" {
		t.Fatalf("transfer: %+v (%v), leader before %s", st, err, before.LeaderID)
	}
	moved, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The same request again (a retry of the first): nothing moves.
	var again api.LeaderStatus
	if err := cl.Do(ctx, "POST", "/api/v1/operator/raft/transfer-leader", &api.TransferLeaderRequest{From: before.LeaderID}, &again); err != nil {
		t.Fatal(err)
	}
	if now, err := cl.Leader(ctx); err != nil || now.LeaderID != moved.LeaderID || now.Term != moved.Term {
		t.Fatalf("a retry moved leadership again: %+v (%v), was %+v", now, err, moved)
	}
	// To a named server, twice: the second finds it leading.
	target := before.LeaderID
	for i := range 2 {
		st, err := cl.Operator().TransferLeader(ctx, target)
		if err != nil || st.LeaderID != target {
			t.Fatalf("transfer %d to %s: %+v (%v)", i+1, target, st, err)
		}
	}
	var direct api.LeaderStatus
	if err := cl.Do(ctx, "POST", "/api/v1/operator/raft/transfer-leader", &api.TransferLeaderRequest{ID: target}, &direct); err != nil {
		t.Fatalf("a transfer to the leader itself: %v", err)
	}
	waitFor(t, "a leader running its loops", func() bool { return c.Leader() != nil })
	entries, err := api.NewClient(c.HTTPAddrs(), c.Token).Audit(ctx, "1h", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Message, "leadership transfer from ") {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d transfers in the audit log, want 2: %+v", n, entries)
	}
}

// TestSnapshotSaveRestoreIntoFreshCluster saves a server's state through the
// operator API and restores it into a new 3-server cluster: users, tokens,
// batches and jobs come back on every server.
func TestSnapshotSaveRestoreIntoFreshCluster(t *testing.T) {
	src := startServer(t, "", nil)
	ctx := context.Background()
	w := newSimWorker(t, src, "w", 4)
	b1, err := src.admin.Submit(ctx, &api.CreateBatchRequest{Name: "done"},
		api.Jobs{job(1, "a"), job(2, "b", 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.runUntil(20*time.Second, func() bool {
		b, err := src.admin.GetBatch(ctx, b1.ID)
		return err == nil && b.State == "complete"
	})
	src.user("alice")
	if _, err := src.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "open", NJobs: 10}); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if _, err := src.admin.Operator().SnapshotSave(ctx, &snap); err != nil {
		t.Fatal(err)
	}
	// The header says the audit log's share of the state that follows.
	parts := bytes.SplitN(snap.Bytes(), []byte("\n"), 3)
	var meta struct {
		AuditBytes int64 `json:"audit_bytes"`
	}
	if len(parts) != 3 || json.Unmarshal(parts[1], &meta) != nil || meta.AuditBytes <= 0 || meta.AuditBytes >= int64(len(parts[2])) {
		t.Fatalf("snapshot header %q: audit share %d of %d bytes", parts[min(1, len(parts)-1)], meta.AuditBytes, len(snap.Bytes()))
	}
	want := allState(t, src.admin)

	dst := startTestCluster(t, 3, ClusterOptions{})
	res, err := api.NewClient(dst.HTTPAddrs(), dst.Token).Operator().SnapshotRestore(ctx, snap.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if res.RestoredIndex == 0 || res.Users == 0 || res.Taken.IsZero() {
		t.Fatalf("the restore says %+v", res)
	}
	restored := api.NewClient(dst.HTTPAddrs(), src.admin.Token())
	if got := allState(t, restored); got != want {
		t.Fatalf("restored state differs:\n--- got\n%s\n--- want\n%s", got, want)
	}
	for _, s := range dst.Servers {
		waitFor(t, "server "+s.ID()+" to hold the restored batches", func() bool {
			req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+"/api/v1/batches?stale=true", nil)
			req.Header.Set("Authorization", "Bearer "+src.admin.Token())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var list api.BatchList
			return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&list) == nil && len(list.Batches) == 2
		})
	}
}

// TestConsulDiscovery forms a cluster whose servers find each other only
// through Consul (a fake speaking Consul's HTTP API), over real gossip,
// and bootstrap Raft once all three see each other.
func TestConsulDiscovery(t *testing.T) {
	fc := fakeconsul.New()
	defer fc.Close()
	c := startTestCluster(t, 3, ClusterOptions{Gossip: true, ConsulAddr: fc.Addr()})
	p, err := api.NewClient(c.HTTPAddrs(), c.Token).Operator().Peers(context.Background())
	if err != nil || len(p.Servers) != 3 {
		t.Fatalf("peers %+v %v", p, err)
	}
	if got := fc.Services(); len(got) != 3 {
		t.Fatalf("consul has %v", got)
	}
	// A write through a follower is forwarded to the leader, whose API
	// address the follower learnt over gossip.
	f := follower(t, c)
	if _, err := api.NewClient("http://"+f.HTTPAddr(), c.Token).CreateUser(context.Background(), &api.CreateUserRequest{Name: "bob"}); err != nil {
		t.Fatal(err)
	}
}

// TestGossipJoinAndAutopilot forms a cluster over gossip with -join
// addresses, then stops a server: autopilot removes it from the Raft
// configuration once it has been gone for DeadServerGrace.
func TestGossipJoinAndAutopilot(t *testing.T) {
	c := startTestCluster(t, 3, ClusterOptions{Gossip: true, Configure: func(_ int, cfg *Config) {
		cfg.DeadServerGrace = 0 // remove as soon as gossip declares it dead
		cfg.GossipInterval = 100 * time.Millisecond
	}})
	gone := follower(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gone.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var alive []*Server
	for _, s := range c.Servers {
		if s != gone {
			alive = append(alive, s)
		}
	}
	c.Servers = alive
	cl := api.NewClient(c.HTTPAddrs(), c.Token)
	waitFor(t, "autopilot to remove the stopped server", func() bool {
		p, err := cl.Operator().Peers(context.Background())
		if err != nil || len(p.Servers) != 2 {
			return false
		}
		for _, srv := range p.Servers {
			if srv.ID == gone.ID() {
				return false
			}
		}
		return true
	})
	if _, err := cl.CreateUser(context.Background(), &api.CreateUserRequest{Name: "carol"}); err != nil {
		t.Fatal(err)
	}
}

// TestPeersSayVersionAndAppliedIndex: every server's list-peers names
// each server's version and how far it has applied the log, the others'
// as their gossip says, caught up after a write.
func TestPeersSayVersionAndAppliedIndex(t *testing.T) {
	c := startTestCluster(t, 3, ClusterOptions{Gossip: true, Configure: func(_ int, cfg *Config) {
		cfg.GossipInterval = 100 * time.Millisecond
	}})
	cl := api.NewClient(c.HTTPAddrs(), c.Token)
	if _, err := cl.CreateUser(context.Background(), &api.CreateUserRequest{Name: "dave"}); err != nil {
		t.Fatal(err)
	}
	st, err := cl.Leader(context.Background())
	if err != nil || st.Version != version.Get() {
		t.Fatalf("status: %+v (%v), want version %s", st, err, version.Get())
	}
	written := st.AppliedIdx
	for _, s := range c.Servers {
		own := api.NewClient("http://"+s.HTTPAddr(), c.Token)
		waitFor(t, "server "+s.ID()+" to see every server caught up", func() bool {
			p, err := own.Operator().Peers(context.Background())
			if err != nil || len(p.Servers) != 3 {
				return false
			}
			for _, srv := range p.Servers {
				if srv.Version != version.Get() || srv.AppliedIndex < written {
					return false
				}
			}
			return true
		})
	}
}

// TestDecommissionedServerStaysOut: a server removed while it runs is
// made a voter again by autopilot (it gossips), unless it was removed
// with permanent: then it stays out, list-peers names it, and only
// readmitting it lets it back.
func TestDecommissionedServerStaysOut(t *testing.T) {
	c := startTestCluster(t, 3, ClusterOptions{Gossip: true, Configure: func(_ int, cfg *Config) {
		cfg.GossipInterval = 100 * time.Millisecond
	}})
	ctx := context.Background()
	cl := api.NewClient(c.HTTPAddrs(), c.Token)
	gone := follower(t, c).ID()
	voters := func() (n int, with bool) {
		p, err := cl.Operator().Peers(ctx)
		if err != nil {
			return -1, false
		}
		for _, srv := range p.Servers {
			with = with || srv.ID == gone
		}
		return len(p.Servers), with
	}
	// Removed, not for good: autopilot adds it back.
	if err := cl.Operator().RemovePeer(ctx, gone, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "autopilot to add the removed server back", func() bool { n, with := voters(); return n == 3 && with })
	// For good: it stays out while it runs and gossips.
	if err := cl.Operator().RemovePeer(ctx, gone, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to leave the configuration", func() bool { n, with := voters(); return n == 2 && !with })
	for range 30 { // 3 s: many autopilot rounds
		if n, with := voters(); n != 2 || with {
			t.Fatalf("a decommissioned server is a voter again (%d voters)", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p, err := cl.Operator().Peers(ctx); err != nil || len(p.Decommissioned) != 1 || p.Decommissioned[0].ID != gone || p.Decommissioned[0].By != "root" {
		t.Fatalf("list-peers: %+v (%v)", p, err)
	}
	if err := cl.Operator().ReadmitPeer(ctx, gone); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the readmitted server to be a voter again", func() bool { n, with := voters(); return n == 3 && with })
	if err := cl.Operator().ReadmitPeer(ctx, gone); !api.IsStatus(err, 404) {
		t.Fatalf("readmitting a server not decommissioned: %v", err)
	}
	// An ID past the bound is refused before the log, naming it.
	if err := cl.Operator().RemovePeer(ctx, strings.Repeat("x", 129), true); !api.IsStatus(err, 400) || !strings.Contains(err.Error(), "1 to 128 bytes") {
		t.Fatalf("decommissioning a 129-byte ID: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUntil(t, what, 30*time.Second, cond)
}

// waitUntil waits up to limit for cond.
func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// allState renders every batch and job the client can see, and the users.
func allState(t *testing.T, cl *api.Client) string {
	t.Helper()
	users, err := cl.ListUsers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(users)
	return dump(t, cl) + string(data)
}

// TestLeaderAndFollowersHoldTheSameState: the leader applies the command
// objects it encoded (it skips decoding its own entries), followers decode
// the log; after a mixed workload (bunches with dependencies, an inline
// array, a cancellation while jobs run, worker events, plans) every
// server's state is byte for byte the same.
func TestLeaderAndFollowersHoldTheSameState(t *testing.T) {
	c := startTestCluster(t, 3, ClusterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := api.NewClient(c.HTTPAddrs(), c.Token)
	wg := runWorkers(ctx, t, c.HTTPAddrs(), 3)
	defer wg.Wait()
	defer cancel()

	dag, err := cl.Submit(ctx, &api.CreateBatchRequest{Name: "dag", Attributes: map[string]string{"k": "v"}},
		api.GeneratedJobs{N: 1500, Make: func(i int) api.JobSpec {
			j := api.JobSpec{JobID: int64(i + 1), Name: fmt.Sprint("j", i), Command: []string{"true", fmt.Sprint(i)},
				CPU: 0.5, Memory: 1 << 20, Env: map[string]string{"I": fmt.Sprint(i)}, Attributes: map[string]string{"i": fmt.Sprint(i % 7)}}
			if i%10 != 0 {
				j.ParentIDs = []int64{int64(i - i%10 + 1)}
			}
			return j
		}}, &api.SubmitOptions{BunchSize: 300})
	if err != nil {
		t.Fatal(err)
	}
	arr, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "array", Jobs: []api.JobSpec{
		{JobID: 1, Name: "a", Count: 200, Command: []string{"true"}, CPU: 1, Retries: 2, TimeoutSeconds: 60},
		{JobID: 201, Name: "after", Command: []string{"true"}, ParentRanges: []api.IDRange{{1, 200}}, AlwaysRun: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	big, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "cancelled", Jobs: []api.JobSpec{{JobID: 1, Count: 5000, Command: []string{"true"}, CPU: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the big batch to start", func() bool {
		b, err := cl.GetBatch(ctx, big.ID)
		return err == nil && b.NSucceeded > 0
	})
	if err := cl.CancelBatch(ctx, big.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{dag.ID, arr.ID, big.ID} {
		waitComplete(t, cl, id)
	}
	cancel()
	wg.Wait()
	leader := c.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	// Quiesce: a last write, then every server applies up to it.
	if _, err := cl.CreateBatch(context.Background(), &api.CreateBatchRequest{Name: "last"}); err != nil {
		t.Fatal(err)
	}
	if err := leader.api.WaitAudit(context.Background()); err != nil { // the requests' audit entries are committed after them
		t.Fatal(err)
	}
	want := state.SnapshotBytes(t, leader.State())
	for _, s := range c.Servers {
		waitFor(t, "server "+s.ID()+" to apply the last entry", func() bool { return s.State().Index() == leader.State().Index() })
		if got := state.SnapshotBytes(t, s.State()); !bytes.Equal(got, want) {
			t.Fatalf("server %s (leader %v) holds a state that differs from the leader's", s.ID(), s == leader)
		}
	}
}

// TestWorkersSayTheirVersion: a worker's activation names its version,
// which the instance list shows (and snapshots keep); one longer than
// api.MaxVersion is refused with a 400 naming the limit.
func TestWorkersSayTheirVersion(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	c := api.NewClient(tc.url, "")
	if _, err := c.Workers().Activate(ctx, &api.ActivateRequest{Name: "w", CPU: 1, Memory: 1 << 30, Secret: "test-secret", Version: "v1.2.3"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Workers().Activate(ctx, &api.ActivateRequest{Name: "w2", CPU: 1, Memory: 1 << 30, Secret: "test-secret", Version: strings.Repeat("v", api.MaxVersion+1)})
	if ae, ok := err.(*api.Error); !ok || ae.StatusCode != 400 || !strings.Contains(ae.Message, "the limit is 64") {
		t.Fatalf("a 65-byte version: %v", err)
	}
	list, err := tc.admin.ListInstances(ctx)
	if err != nil || len(list) != 1 || list[0].Version != "v1.2.3" {
		t.Fatalf("instances: %+v, %v", list, err)
	}
	restored := state.New()
	if err := restored.Restore(bytes.NewReader(state.SnapshotBytes(t, tc.srv.State()))); err != nil {
		t.Fatal(err)
	}
	if got := restored.Instances(); len(got) != 1 || got[0].Version != "v1.2.3" {
		t.Fatalf("restored instances: %+v", got)
	}
}
