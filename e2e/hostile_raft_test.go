package e2e

// The hostile-tenant suite, item 1 of issue 25: no server accepts a Raft
// RPC, or a gossip member it would make a voter, from anyone who has not
// proven itself a server of the cluster.

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/testkit/raftattack"
	"github.com/drover-sched/drover/testkit/testcluster"
)

// TestHostileRaft runs issue 25's Raft attack against the dev agent, a
// server started without TLS flags and a 3-server TLS cluster, first from
// a real job (a process job of a tenant, on the deployment's own worker)
// and then from outside: the attacker sends to every TCP port the server
// processes listen on a term-0 AppendEntries to learn the term, then at
// term+1 an entry encoding state.CreateUser{Admin: true} and a garbage
// entry, in plain TCP and over TLS with a certificate of its own CA, and
// joins every gossip address as a server with a Raft address of its own.
// Every server must stay up, the state (users, batches, Raft peers) must
// not change beyond the attack's own batch, the forged admins' tokens
// must not work, no intruder may get a Raft RPC, and the data dirs must
// restart with their data.
func TestHostileRaft(t *testing.T) {
	attacker := buildJobProgram(t, "./testkit/raftattack/cmd/raftattack")
	t.Run("dev-agent", func(t *testing.T) {
		// It restarts on its address: one picked below the ephemeral
		// range, which no outgoing connection takes while it is down.
		httpAddr := freePort(t)
		a := startAgent(t, "", httpAddr, "-workers", "1")
		v := &raftVictim{
			admin: a.client(),
			pids:  func() []int { return []int{a.cmd.Process.Pid} },
			up:    func() bool { return a.running() },
			logs:  func() []string { return []string{a.logPath} },
			client: func(tok string) *api.Client {
				return api.NewClient(a.addr, tok)
			},
			restart: func() {
				a.stop()
				a = startAgent(t, a.dataDir, httpAddr, "-workers", "1")
			},
		}
		attackRaft(t, v, attacker)
	})
	t.Run("single-server", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "worker.secret"), []byte("single-server-secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		httpAddr, raftAddr, gossipAddr := freePort(t), freePort(t), freePort(t)
		start := func() *agent {
			// No -tls-cert, no -insecure, no gossip key: what issue 25
			// found listening in plain text.
			return startNode(t, dir, httpAddr, []string{"server", "-data-dir", dir, "-node-id", "s0", "-http-addr", httpAddr,
				"-raft-addr", raftAddr, "-gossip-addr", gossipAddr, "-bootstrap-expect", "1",
				"-worker-secret-file", filepath.Join(dir, "worker.secret"), "-log-level", "info"})
		}
		s := start()
		s.startWorker(t, "w1", 2)
		v := &raftVictim{
			admin:  s.client(),
			pids:   func() []int { return []int{s.cmd.Process.Pid} },
			up:     func() bool { return s.running() },
			gossip: []string{gossipAddr},
			logs:   func() []string { return []string{s.logPath} },
			client: func(tok string) *api.Client { return api.NewClient(s.addr, tok) },
			restart: func() {
				s.stop()
				s = start()
			},
		}
		attackRaft(t, v, attacker)
	})
	t.Run("tls-cluster", func(t *testing.T) {
		c := startCluster(t, testcluster.Options{Servers: 3, TLS: true})
		c.startWorker("w1", 2)
		var gossip []string
		for _, s := range c.Servers {
			gossip = append(gossip, s.Gossip)
		}
		v := &raftVictim{
			admin: c.client(),
			pids: func() []int {
				var out []int
				for _, s := range c.Servers {
					out = append(out, s.PID())
				}
				return out
			},
			up: func() bool {
				for _, s := range c.Servers {
					if !s.Running() {
						return false
					}
				}
				return true
			},
			gossip: gossip,
			logs:   c.Logs,
			client: func(tok string) *api.Client { return c.NewClient(c.HTTPAddrs(), tok) },
			restart: func() {
				for _, s := range c.Servers {
					s.Stop(15 * time.Second)
				}
				for _, s := range c.Servers {
					if err := s.Start(); err != nil {
						t.Fatal(err)
					}
				}
				c.waitLeader(60 * time.Second)
				waitApplied(t, c)
			},
		}
		attackRaft(t, v, attacker)
	})
}

// raftVictim is a deployment under attack.
type raftVictim struct {
	admin   *api.Client                  // an admin's client
	client  func(tok string) *api.Client // a client of the deployment with another token
	pids    func() []int                 // the server processes
	up      func() bool                  // every server process runs
	gossip  []string                     // the gossip addresses, listening or not
	logs    func() []string              // the servers' log files
	restart func()                       // stop every server and start it again on its data dir, ready
}

// raftState is what the attack must not change: users (with their admin
// flag), batches and Raft voters.
type raftState struct {
	Users, Batches, Peers []string
}

func readRaftState(t *testing.T, c *api.Client) raftState {
	t.Helper()
	ctx := context.Background()
	var st raftState
	users, err := c.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		st.Users = append(st.Users, fmt.Sprintf("%s admin=%v", u.Name, u.Admin))
	}
	batches, err := c.ListBatches(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches.Batches {
		st.Batches = append(st.Batches, fmt.Sprintf("%d %s by %s", b.ID, b.Name, b.User))
	}
	peers, err := c.Operator().Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range peers.Servers {
		st.Peers = append(st.Peers, fmt.Sprintf("%s %s voter=%v", p.ID, p.Address, p.Voter))
	}
	slices.Sort(st.Users)
	slices.Sort(st.Batches)
	slices.Sort(st.Peers)
	return st
}

func attackRaft(t *testing.T, v *raftVictim, attacker string) {
	ctx := context.Background()
	// A tenant: a member of the default billing project, no admin.
	tenant, err := v.admin.CreateUser(ctx, &api.CreateUserRequest{Name: "tenant"})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.admin.AddMember(ctx, "default", "tenant"); err != nil {
		t.Fatal(err)
	}
	before := readRaftState(t, v.admin)
	var targets []string
	for _, pid := range v.pids() {
		targets = append(targets, tcpListeners(t, pid)...)
	}
	slices.Sort(targets)
	t.Logf("the servers listen on %v; gossip addresses %v", targets, v.gossip)
	if len(targets) < len(v.pids()) {
		t.Fatalf("found %d listeners for %d servers; each serves its API at least", len(targets), len(v.pids()))
	}
	forged := map[string]string{} // forged admin -> its token
	for _, who := range []string{"mallory-job", "mallory-outside"} {
		forged[who], _ = token.New()
	}

	// From a real job of the tenant.
	tc := v.client(tenant.Token)
	res, err := tc.CreateBatch(ctx, &api.CreateBatchRequest{Name: "raftattack", Jobs: []api.JobSpec{{
		JobID: 1, Name: "raftattack", CPU: 0.25, Memory: 256 << 20,
		Command: []string{attacker, "-raft", strings.Join(targets, ","), "-gossip", strings.Join(v.gossip, ","),
			"-user", "mallory-job", "-token", forged["mallory-job"], "-timeout", "2s", "-dwell", "4s"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var job *api.Job
	waitFor(t, "the attack job to end", 3*time.Minute, func() bool {
		if !v.up() {
			t.Fatal("a server died under the job's attack")
		}
		job, err = tc.GetJob(ctx, res.ID, 1)
		return err == nil && (job.State == api.JobSuccess || job.State == api.JobFailed || job.State == api.JobError)
	})
	log, err := tc.JobLog(ctx, res.ID, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != api.JobSuccess {
		t.Fatalf("the attack job: %s %q\n%s", job.State, job.Message, log)
	}
	checkAttackReport(t, "the job", string(log), len(targets), len(v.gossip))

	// From outside, with the same program's code.
	var outside strings.Builder
	for _, addr := range targets {
		rs, err := raftattack.Raft(addr, raftattack.Options{User: "mallory-outside", Token: forged["mallory-outside"], Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			line, _ := json.Marshal(map[string]any{"raft": r})
			fmt.Fprintln(&outside, string(line))
		}
		if !v.up() {
			t.Fatalf("a server died under the attack on %s from outside", addr)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, addr := range v.gossip {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := raftattack.Gossip(addr, raftattack.Options{Timeout: 2 * time.Second, Dwell: 4 * time.Second})
			if err != nil {
				t.Error(err)
				return
			}
			line, _ := json.Marshal(map[string]any{"gossip": g})
			mu.Lock()
			fmt.Fprintln(&outside, string(line))
			mu.Unlock()
		}()
	}
	wg.Wait()
	checkAttackReport(t, "outside", outside.String(), len(targets), len(v.gossip))

	// The verdict is the state.
	check := func(when string) {
		t.Helper()
		if !v.up() {
			t.Fatalf("%s: a server is down", when)
		}
		after := readRaftState(t, v.admin)
		want := before
		want.Batches = append(slices.Clone(before.Batches), fmt.Sprintf("%d raftattack by tenant", res.ID))
		slices.Sort(want.Batches)
		if !slices.Equal(after.Users, want.Users) || !slices.Equal(after.Batches, want.Batches) || !slices.Equal(after.Peers, want.Peers) {
			t.Fatalf("%s: the state changed:\nbefore %+v\nafter  %+v", when, want, after)
		}
		for who, tok := range forged {
			if u, err := v.client(tok).Whoami(ctx); err == nil {
				t.Fatalf("%s: the token forged for %s works: %+v", when, who, u)
			}
		}
		for _, f := range v.logs() {
			data, _ := os.ReadFile(f)
			for _, bad := range []string{"unknown command type", "panic:"} {
				if strings.Contains(string(data), bad) {
					t.Fatalf("%s: %s says %q", when, filepath.Base(f), bad)
				}
			}
		}
	}
	check("after the attacks")
	v.restart()
	check("after a restart")
}

// checkAttackReport reads the attacker's JSON lines: one Raft result per
// target and way of connecting, one gossip result per address; nothing
// appended and no Raft RPC to an intruder (the state is checked apart).
func checkAttackReport(t *testing.T, from, report string, targets, gossip int) {
	t.Helper()
	var nRaft, nGossip int
	sc := bufio.NewScanner(strings.NewReader(report))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Raft   *raftattack.RaftResult   `json:"raft"`
			Gossip *raftattack.GossipResult `json:"gossip"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue // the job's log may hold other lines
		}
		switch {
		case line.Raft != nil:
			nRaft++
			t.Logf("%s: raft %s over %s: %+v", from, line.Raft.Addr, line.Raft.Via, line.Raft.Steps)
			if line.Raft.Appended() {
				t.Errorf("%s: %s over %s took a forged entry: %+v", from, line.Raft.Addr, line.Raft.Via, line.Raft.Steps)
			}
		case line.Gossip != nil:
			nGossip++
			t.Logf("%s: gossip %+v", from, *line.Gossip)
			if line.Gossip.RaftRPCs > 0 {
				t.Errorf("%s: the intruder at %s got %d Raft RPCs: it was made a voter", from, line.Gossip.Addr, line.Gossip.RaftRPCs)
			}
		}
	}
	if nRaft != 2*targets || nGossip != gossip {
		t.Fatalf("%s: %d Raft results for %d targets (want 2 each), %d gossip results for %d addresses:\n%s", from, nRaft, targets, nGossip, gossip, report)
	}
}

// tcpListeners returns the addresses process pid listens on for TCP: its
// sockets (/proc/PID/fd) in the LISTEN state (/proc/PID/net/tcp, tcp6).
// A wildcard address is given as loopback, where a local attacker reaches
// it.
func tcpListeners(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var out []string
	for _, file := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			hexIP, hexPort, _ := strings.Cut(f[1], ":")
			raw, err1 := hex.DecodeString(hexIP)
			port, err2 := strconv.ParseUint(hexPort, 16, 16)
			if err1 != nil || err2 != nil || len(raw)%4 != 0 {
				t.Fatalf("%s: cannot read %q", file, f[1])
			}
			for i := 0; i < len(raw); i += 4 { // each 32-bit word is in host (little-endian) order
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			ip := net.IP(raw)
			if ip.IsUnspecified() {
				ip = net.IPv4(127, 0, 0, 1)
			}
			out = append(out, net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10)))
		}
	}
	return out
}
