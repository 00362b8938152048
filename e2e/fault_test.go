package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/freeport"
	"github.com/drover-sched/drover/testkit/testcluster"
)

// TestFaultLeaderKills runs a 20,000-job batch on 3 servers and 2 workers,
// all separate processes, and kills the leader with SIGKILL twice while it
// runs. The batch must complete with every job succeeded exactly once, the
// batch counters must match a listing of every job, every acknowledged
// submission must be there exactly once, and every server's history must
// follow the state diagram and agree with the others.
func TestFaultLeaderKills(t *testing.T) {
	c := newCluster(t, 3)
	c.startWorker("w1", 16)
	c.startWorker("w2", 16)
	cl := c.client()
	ctx := context.Background()

	const groups, perGroup = 20, 1000
	var jobs []api.JobSpec
	for g := 0; g < groups; g++ {
		jobs = append(jobs, api.JobSpec{JobID: int64(g*perGroup + 1), Name: fmt.Sprint("g", g), Count: perGroup,
			Command: []string{"true"}, CPU: 0.25, Memory: 16 << 20})
	}
	res, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "big", IdempotencyKey: "big", Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	id := res.ID
	const total = groups * perGroup
	probe := startProber(c.client())

	victim := -1
	for round, frac := range []float64{0.25, 0.6} {
		waitBatch(t, cl, id, 3*time.Minute, fmt.Sprintf("%.0f%% of the batch", frac*100), func(b *api.Batch) bool {
			return float64(b.NCompleted) >= frac*total
		})
		leader := c.waitLeader(30 * time.Second)
		if victim < 0 {
			victim = leader
		} else if leader != victim {
			// Kill the same server again, so two servers see the whole
			// history from start to end for the checker to compare.
			tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			if _, err := cl.Operator().TransferLeader(tctx, c.Servers[victim].ID()); err != nil {
				t.Fatalf("transfer leadership to s%d: %v", victim, err)
			}
			cancel()
			if leader = c.waitLeader(30 * time.Second); leader != victim {
				t.Fatalf("s%d leads after a transfer to s%d", leader, victim)
			}
		}
		killed := time.Now()
		c.Servers[leader].Kill9()
		next := c.waitLeader(30 * time.Second)
		if next == leader {
			t.Fatal("the killed server is still the leader")
		}
		t.Logf("kill %d: leader s%d killed, s%d leads after %s", round+1, leader, next, time.Since(killed).Round(time.Millisecond))
		c.Servers[leader].Start()
		c.waitLeader(30 * time.Second)
	}
	b := waitBatch(t, cl, id, 5*time.Minute, "the batch to complete", func(b *api.Batch) bool { return b.State == api.BatchComplete })
	if b.NJobs != total || b.NSucceeded != total {
		t.Fatalf("batch %+v", b)
	}
	probe.finish(t)

	// Count from a listing of every job and compare with the counters.
	all, err := cl.AllJobs(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	rerun := 0
	for _, j := range all {
		counts[j.State]++
		ok := 0
		for _, a := range j.Attempts {
			if a.State == api.OutcomeSuccess {
				ok++
			}
		}
		if ok != 1 {
			t.Fatalf("job %d has %d successful attempts: %+v", j.JobID, ok, j.Attempts)
		}
		if len(j.Attempts) > 1 {
			rerun++
		}
	}
	if int64(len(all)) != b.NJobs || counts[api.JobSuccess] != b.NSucceeded {
		t.Fatalf("listing has %d jobs, %v; batch status says %d jobs, %d succeeded", len(all), counts, b.NJobs, b.NSucceeded)
	}
	t.Logf("%d jobs listed, all succeeded once; %d needed more than one attempt", len(all), rerun)

	// Every running server must have applied the same log before their
	// histories are compared.
	waitApplied(t, c)
	checkHistories(t, c, 2)
}

// waitApplied waits until every running server reports the same Raft
// applied index: each has been handed the same entries, though its FSM may
// still be applying the last of them (checkHistories waits for that).
func waitApplied(t *testing.T, c *testCluster) { waitAppliedAs(t, c, c.token()) }

func waitAppliedAs(t *testing.T, c *testCluster, token string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var idx []uint64
		for _, s := range c.Servers {
			if !s.Running() {
				continue
			}
			p, err := s.NewClient(token).Operator().Peers(context.Background())
			if err != nil {
				break
			}
			idx = append(idx, p.AppliedIndex)
		}
		same := len(idx) > 0
		for _, v := range idx {
			same = same && v == idx[0]
		}
		if same {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("servers did not converge on one applied index")
}

func createProbe(ctx context.Context, c *api.Client, key string) (*api.CreateBatchResponse, error) {
	return c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "write", IdempotencyKey: key,
		Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 0.1, Memory: 16 << 20}}})
}

// leaderSeenBy asks a server whom it follows, giving up after a second (a
// frozen server does not answer).
func leaderSeenBy(s *testcluster.Server) string {
	h, err := s.Health()
	if err != nil {
		return ""
	}
	return h.LeaderID
}

// TestFaultFrozenLeader freezes the leader with SIGSTOP for 10 s (longer
// on a loaded machine, until the others have acknowledged 20 writes). The
// others elect a new leader and keep accepting writes; the frozen one
// accepts none; resumed, it steps down; no acknowledged write is lost.
func TestFaultFrozenLeader(t *testing.T) {
	c := newCluster(t, 3)
	probe := startProber(c.client())
	time.Sleep(time.Second)
	leader := c.waitLeader(30 * time.Second)
	old := c.Servers[leader]
	oldID := fmt.Sprintf("s%d", leader)
	token := c.token()

	old.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	probe.mu.Lock()
	ackedBefore := len(probe.acked)
	probe.mu.Unlock()

	// A client that knows only the frozen leader gets nothing acknowledged.
	direct := old.NewClient(token)
	direct.RetryUnavailable, direct.RetryUnreachable = 0, 0
	directErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := createProbe(ctx, direct, "direct-to-frozen")
		directErr <- err
	}()

	var newLeader string
	for deadline := time.Now().Add(time.Minute); newLeader == "" || newLeader == oldID; {
		if time.Now().After(deadline) {
			t.Fatal("no new leader within a minute while the old one was frozen")
		}
		for _, s := range c.Servers {
			if s != old {
				if id := leaderSeenBy(s); id != "" && id != oldID {
					newLeader = id
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("s%d frozen; %s leads after %s", leader, newLeader, time.Since(frozen).Round(time.Millisecond))
	if err := <-directErr; err == nil {
		t.Fatal("a write sent only to the frozen leader was acknowledged while it was frozen")
	}
	// The others keep accepting writes: 20 of them, however slow the
	// machine (the limit only bounds a cluster that stopped).
	time.Sleep(time.Until(frozen.Add(10 * time.Second)))
	ackedDuring := 0
	for limit := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		probe.mu.Lock()
		ackedDuring = len(probe.acked) - ackedBefore
		probe.mu.Unlock()
		if ackedDuring >= 20 {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("only %d writes acknowledged in the %s the old leader was frozen", ackedDuring, time.Since(frozen).Round(time.Second))
		}
	}

	old.Signal(syscall.SIGCONT)
	resumed := time.Now()
	for {
		h, err := old.Health()
		if err == nil && h.LeaderID != "" && h.LeaderID != oldID {
			break
		}
		if time.Since(resumed) > time.Minute {
			t.Fatalf("the resumed leader did not step down within a minute: %+v %v", h, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("resumed s%d stepped down after %s; %d writes acknowledged meanwhile", leader, time.Since(resumed).Round(time.Millisecond), ackedDuring)
	// Through the old leader, writes now reach the new one.
	direct.RetryUnavailable = 10 * time.Second
	if _, err := createProbe(context.Background(), direct, "via-old-leader"); err != nil {
		t.Fatalf("write through the resumed server: %v", err)
	}
	probe.finish(t)
	waitApplied(t, c)
	checkHistories(t, c, 2)
}

// TestFaultQuorumLoss: with 5 servers, losing 2 leaves a working cluster;
// losing 3 makes writes fail with a clear "no quorum" error (stale reads
// still work); bringing one back makes writes succeed again.
func TestFaultQuorumLoss(t *testing.T) {
	c := newCluster(t, 5)
	ctx := context.Background()
	cl := c.client()
	begin := time.Now()
	step := func(what string) { t.Logf("%6s %s", time.Since(begin).Round(100*time.Millisecond), what) }
	if _, err := createProbe(ctx, cl, "before"); err != nil {
		t.Fatal(err)
	}
	leader := c.waitLeader(30 * time.Second)
	killed := []int{leader, (leader + 1) % 5}
	for _, i := range killed {
		c.Servers[i].Kill9()
	}
	c.waitLeader(30 * time.Second)
	step("two servers down, leader elected")
	if _, err := createProbe(ctx, cl, "two-down"); err != nil {
		t.Fatalf("write with 3 of 5 servers: %v", err)
	}
	step("write with two down")
	third := (leader + 2) % 5
	c.Servers[third].Kill9()
	killed = append(killed, third)
	short := c.client()
	short.RetryUnavailable = 5 * time.Second
	_, err := createProbe(ctx, short, "three-down")
	if err == nil {
		t.Fatal("a write succeeded with 2 of 5 servers")
	}
	if !api.IsStatus(err, 503) || !(strings.Contains(err.Error(), "no quorum") || strings.Contains(err.Error(), "no cluster leader")) {
		t.Fatalf("write without quorum failed unclearly: %v", err)
	}
	step("write refused without quorum: " + err.Error())
	var survivor *testcluster.Server
	for _, s := range c.Servers {
		if s.Running() {
			survivor = s
		}
	}
	one := survivor.NewClient(c.token())
	one.RetryUnavailable = 0
	stale, err := one.ListBatches(ctx, "", 0)
	if err == nil {
		t.Fatalf("consistent read without quorum answered: %+v", stale)
	}
	req, _ := http.NewRequest("GET", "http://"+survivor.HTTP+"/api/v1/batches?stale=true", nil)
	req.Header.Set("Authorization", "Bearer "+c.token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stale read without quorum: %v %v", resp, err)
	}
	resp.Body.Close()
	// The same through the CLI's -stale.
	env := []string{"DROVER_ADDR=http://" + survivor.HTTP, "DROVER_TOKEN=" + c.token()}
	if r := runCLI(t, env, "-stale", "batch", "list"); r.code != 0 || !strings.Contains(r.stdout, "write") {
		t.Fatalf("drover -stale batch list without quorum: %+v", r)
	}

	c.Servers[killed[0]].Start()
	c.waitLeader(60 * time.Second)
	step("one server back, leader elected")
	res, err := createProbe(ctx, cl, "one-back")
	if err != nil {
		t.Fatalf("write after a server came back: %v", err)
	}
	step("write after recovery")
	list, err := cl.ListBatches(ctx, "name=write", 0)
	if err != nil || len(list.Batches) < 3 || list.Batches[0].ID != res.ID {
		t.Fatalf("batches after recovery: %+v %v", list, err)
	}
}

// TestFaultAutopilot: a server gone longer than the grace period is removed
// from the Raft configuration; restarted, it is added back and catches up
// from its log; a replacement with an empty data dir catches up from a
// snapshot plus log.
func TestFaultAutopilot(t *testing.T) {
	c := newCluster(t, 3, "-dead-server-grace", "2s", "-raft-snapshot-threshold", "64", "-raft-trailing-logs", "16", "-raft-snapshot-interval", "500ms")
	ctx := context.Background()
	cl := c.client()
	write := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			if _, err := createProbe(ctx, cl, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	peers := func() []api.Peer {
		p, err := cl.Operator().Peers(ctx)
		if err != nil {
			return nil
		}
		return p.Servers
	}
	waitPeers := func(n int, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ps := peers()
			alive := 0
			for _, p := range ps {
				if p.Alive {
					alive++
				}
			}
			if len(ps) == n && alive == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: peers %+v", what, ps)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	write("a", 20)
	leader := c.waitLeader(30 * time.Second)
	f := c.Servers[(leader+1)%3]
	f.Kill9()
	waitPeers(2, "dead server removed")
	write("b", 100) // the leader snapshots and compacts its log meanwhile
	f.Start()
	waitPeers(3, "restarted server added back")
	waitApplied(t, c)

	// Replace a server with one that has an empty data dir.
	g := c.Servers[(leader+2)%3]
	g.Kill9()
	waitPeers(2, "second dead server removed")
	write("c", 100)
	if err := os.RemoveAll(g.DataDir); err != nil {
		t.Fatal(err)
	}
	g.Start()
	waitPeers(3, "replacement added")
	waitApplied(t, c)
	data, err := os.ReadFile(g.TransitionLog(g.Gen - 1))
	if err != nil || !strings.HasPrefix(string(data), "restore") {
		t.Fatalf("the replacement did not start from a snapshot: %q %v", firstLine(data), err)
	}
	// It serves the whole state (stale read from its own copy) once it
	// says it caught up: a follower checks that it has applied what the
	// leader committed every 200 ms, so it may still answer 503 for a
	// moment after the applied indexes met.
	var resp *http.Response
	for deadline := time.Now().Add(30 * time.Second); ; {
		req, _ := http.NewRequest("GET", "http://"+g.HTTP+"/api/v1/batches?stale=true&q=name%3Dwrite", nil)
		req.Header.Set("Authorization", "Bearer "+c.token())
		if resp, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		resp.Body.Close()
		time.Sleep(100 * time.Millisecond)
	}
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		health := "(no answer)"
		if hr, err := http.Get("http://" + g.HTTP + "/api/v1/health"); err == nil {
			b, _ := io.ReadAll(hr.Body)
			hr.Body.Close()
			health = string(b)
		}
		t.Fatalf("read from the replacement: %d %s; its health: %s", resp.StatusCode, body, health)
	}
	var list api.BatchList
	_ = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Batches) != 50 || list.Batches[0].Attributes != nil && list.Batches[0].Name != "write" {
		t.Fatalf("the replacement serves %d batches on its first page", len(list.Batches))
	}
	// Two of three servers were killed; the replacement's history is
	// compared from its snapshot's index on.
	checkHistories(t, c, 1)
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// TestServerConfigFile starts a single server from an HCL config file, with
// one flag on the command line winning over the file.
func TestServerConfigFile(t *testing.T) {
	dir := t.TempDir()
	port := func() string {
		addr, err := freeport.Addr("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		return addr
	}
	httpAddr := port()
	cfg := filepath.Join(dir, "server.hcl")
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("s\n"), 0o600)
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
data_dir           = %q
http_addr          = "127.0.0.1:1"   # overridden on the command line
raft_addr          = %q
gossip_addr        = %q
bootstrap_expect   = 1
worker_secret_file = %q
log_level          = "warn"
`, filepath.Join(dir, "data"), port(), port(), secret)), 0o644)
	cmd := exec.Command(droverBin, "server", "-config", cfg, "-http-addr", httpAddr)
	out, _ := os.Create(filepath.Join(dir, "out.log"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	waitFor(t, "the server to bootstrap from its config file", 30*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "data", "root.token"))
		if err != nil {
			return false
		}
		_, err = api.NewClient("http://"+httpAddr, strings.TrimSpace(string(b))).ListBatches(context.Background(), "", 0)
		return err == nil
	})
	bad := filepath.Join(dir, "bad.hcl")
	os.WriteFile(bad, []byte("data_dir = \"/tmp/x\"\nbootstrap = 3\n"), 0o644)
	r := runCLI(t, nil, "server", "-config", bad).must(t, 1)
	if !strings.Contains(r.stderr, "bad.hcl:2:1") || !strings.Contains(r.stderr, `"bootstrap" is not a flag`) {
		t.Fatalf("bad config: %s", r.stderr)
	}
}
