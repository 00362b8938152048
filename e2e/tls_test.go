package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/freeport"
	"github.com/drover-sched/drover/internal/testcluster"
)

// TestTLSClusterFailover: a 3-server cluster with TLS on every hop (HTTPS
// API, Raft over mutual TLS, workers verifying the servers) and 2 workers
// runs a batch through the kill of its leader; every job succeeds once.
// Clients that do not trust the cluster's CA get nothing.
func TestTLSClusterFailover(t *testing.T) {
	c := startCluster(t, testcluster.Options{Servers: 3, TLS: true})
	c.startWorker("w1", 8)
	c.startWorker("w2", 8)
	cl := c.client()
	ctx := context.Background()

	const total = 3000
	res, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "tls", IdempotencyKey: "tls", Jobs: []api.JobSpec{
		{JobID: 1, Name: "j", Count: total, Command: []string{"true"}, CPU: 0.25, Memory: 16 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	probe := startProber(c.client())
	waitBatch(t, cl, res.ID, 3*time.Minute, "a third of the batch", func(b *api.Batch) bool { return b.NCompleted >= total/3 })
	leader := c.waitLeader(30 * time.Second)
	c.Servers[leader].Kill9()
	next := c.waitLeader(30 * time.Second)
	if next == leader {
		t.Fatal("the killed server still leads")
	}
	t.Logf("s%d killed, s%d leads", leader, next)
	if err := c.Servers[leader].Start(); err != nil {
		t.Fatal(err)
	}
	b := waitBatch(t, cl, res.ID, 5*time.Minute, "the batch to complete", func(b *api.Batch) bool { return b.State == api.BatchComplete })
	if b.NSucceeded != total {
		t.Fatalf("batch %+v", b)
	}
	probe.finish(t)
	all, err := cl.AllJobs(ctx, res.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range all {
		ok := 0
		for _, a := range j.Attempts {
			if a.State == api.OutcomeSuccess {
				ok++
			}
		}
		if ok != 1 {
			t.Fatalf("job %d has %d successful attempts", j.JobID, ok)
		}
	}
	waitApplied(t, c)
	p, err := cl.Peers(ctx)
	if err != nil || len(p.Servers) != 3 {
		t.Fatalf("peers: %+v, %v", p, err)
	}

	// Without the CA: nothing.
	_, err = api.NewClient(c.HTTPAddrs(), c.token()).ListBatches(ctx, "", 0)
	if err == nil {
		t.Fatal("a plain-HTTP client got an answer")
	}
	bare := api.NewTLSClient(strings.ReplaceAll(c.HTTPAddrs(), "https://", ""), c.token(), &tls.Config{ServerName: api.TLSServerName})
	var te *api.TLSError
	if _, err := bare.ListBatches(ctx, "", 0); !errors.As(err, &te) {
		t.Fatalf("a client without the cluster's CA: %v", err)
	}
	if _, err := http.Get(c.Servers[next].URL() + "/api/v1/health"); err == nil {
		t.Fatal("an HTTPS GET without the CA succeeded")
	}
	// The CLI reads the CA from DROVER_CACERT, and says what is missing
	// without it.
	env := []string{"DROVER_ADDR=" + c.HTTPAddrs(), "DROVER_TOKEN=" + c.token()}
	runCLI(t, append(env, "DROVER_CACERT="+c.CA), "batch", "status", fmt.Sprint(res.ID)).must(t, 0)
	r := runCLI(t, env, "batch", "list").must(t, 1)
	if !strings.Contains(r.stderr, "DROVER_CACERT") {
		t.Fatalf("the CLI without DROVER_CACERT: %s", r.stderr)
	}
	// The servers log no plain connection: workers and forwarding spoke TLS.
	for _, f := range c.Logs() {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), "HTTP request to an HTTPS server") {
			t.Fatalf("%s: a plain HTTP request reached a server", filepath.Base(f))
		}
	}
}

// TestTLSAutopilotMovesOnlyProvenServers: a server that comes back on a
// new Raft address keeps its vote at the old one while the certificate it
// presents there names another server ID, and gets it moved once its
// certificate names its own. The cluster keeps taking writes throughout.
func TestTLSAutopilotMovesOnlyProvenServers(t *testing.T) {
	c := startCluster(t, testcluster.Options{Servers: 3, TLS: true})
	cl := c.client()
	ctx := context.Background()
	leader := c.waitLeader(30 * time.Second)
	victim := c.Servers[(leader+1)%3]
	oldRaft := victim.Raft
	raftOf := func() string {
		p, err := cl.Peers(ctx)
		if err != nil {
			return ""
		}
		for _, s := range p.Servers {
			if s.ID == victim.ID() {
				return s.Address
			}
		}
		return "gone"
	}
	if got := raftOf(); got != oldRaft {
		t.Fatalf("%s votes from %q, want %q", victim.ID(), got, oldRaft)
	}
	restart := func(certName, certID string) {
		t.Helper()
		victim.Kill9()
		addr, err := freeport.Addr(victim.IP)
		if err != nil {
			t.Fatal(err)
		}
		victim.Raft = addr
		if victim.Cert, victim.Key, err = c.ServerCert(certName, certID, victim.IP); err != nil {
			t.Fatal(err)
		}
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
	}
	// Its certificate names another server: the vote stays where it was.
	restart("impostor", "s9")
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if got := raftOf(); got != oldRaft && got != "" {
			t.Fatalf("autopilot moved %s's vote to %s, shown a certificate that names s9", victim.ID(), got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := createProbe(ctx, cl, "during-impostor"); err != nil {
		t.Fatalf("a write while the impostor runs: %v", err)
	}
	// Its own certificate: the vote moves.
	restart("proven", victim.ID())
	deadline = time.Now().Add(30 * time.Second)
	for raftOf() != victim.Raft {
		if time.Now().After(deadline) {
			t.Fatalf("autopilot did not move %s's vote to %s (it shows %s)", victim.ID(), victim.Raft, raftOf())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := createProbe(ctx, cl, "after-move"); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, c)
	logs := ""
	for _, f := range c.Logs() {
		b, _ := os.ReadFile(f)
		logs += string(b)
	}
	if !strings.Contains(logs, "did not prove it is that server") {
		t.Error("no server logged why it refused the impostor's address")
	}
}

// TestSingleServerGrowsIntoTLSCluster follows docs/operations.md, "From one
// server to several": a server started alone without TLS flags (Raft over
// mutual TLS with the CA it made in its data dir) signs two more servers'
// certificates with that CA (`drover tls cert create` in <data-dir>/tls),
// restarts with them and a gossip key, and the two join it: autopilot makes
// them voters, and the data written while it was alone is on all three.
func TestSingleServerGrowsIntoTLSCluster(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "worker.secret")
	os.WriteFile(secret, []byte("grow-secret\n"), 0o600)
	type node struct{ id, data, http, raft, gossip string }
	var nodes []*node
	for i := range 3 {
		ip := fmt.Sprintf("127.0.2.%d", i+1)
		n := &node{id: fmt.Sprintf("s%d", i+1), data: filepath.Join(dir, fmt.Sprintf("s%d", i+1))}
		for _, p := range []*string{&n.http, &n.raft, &n.gossip} {
			addr, err := freeport.Addr(ip)
			if err != nil {
				t.Fatal(err)
			}
			*p = addr
		}
		nodes = append(nodes, n)
	}
	run := func(n *node, extra ...string) *exec.Cmd {
		args := append([]string{"server", "-data-dir", n.data, "-node-id", n.id, "-http-addr", n.http, "-raft-addr", n.raft,
			"-gossip-addr", n.gossip, "-gossip-interval", "200ms", "-worker-secret-file", secret, "-log-level", "info"}, extra...)
		cmd := exec.Command(droverBin, args...)
		logFile, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.log", n.id, time.Now().UnixNano())))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			logFile.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logFile.Name())
				t.Logf("==> %s\n%s", filepath.Base(logFile.Name()), b)
			}
		})
		return cmd
	}
	ctx := context.Background()
	first := nodes[0]
	alone := run(first, "-bootstrap-expect", "1")
	var tok string
	waitFor(t, "the server alone to bootstrap", 30*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(first.data, "root.token"))
		if err != nil {
			return false
		}
		tok = strings.TrimSpace(string(b))
		_, err = api.NewClient("http://"+first.http, tok).CreateUser(ctx, &api.CreateUserRequest{Name: "written-alone"})
		return err == nil
	})
	own := filepath.Join(first.data, "tls")
	for _, n := range nodes[1:] {
		ip, _, _ := strings.Cut(n.raft, ":")
		r := runCLI(t, nil, "tls", "cert", "create", "-server", "-id", n.id, "-additional-ipaddress", ip,
			"-ca", filepath.Join(own, "drover-agent-ca.pem"), "-key", filepath.Join(own, "drover-agent-ca-key.pem"), "-dir", own)
		r.must(t, 0)
	}
	keyFile := filepath.Join(dir, "gossip.key")
	os.WriteFile(keyFile, []byte(runCLI(t, nil, "operator", "gossip", "keyring", "generate").must(t, 0).stdout), 0o600)
	_ = alone.Process.Signal(syscall.SIGTERM)
	_ = alone.Wait()
	tlsFlags := func(n *node) []string {
		return []string{"-gossip-key-file", keyFile, "-ca-file", filepath.Join(own, "drover-agent-ca.pem"),
			"-tls-cert", filepath.Join(own, "drover-server-"+n.id+".pem"), "-tls-key", filepath.Join(own, "drover-server-"+n.id+"-key.pem")}
	}
	run(first, append([]string{"-bootstrap-expect", "1"}, tlsFlags(first)...)...)
	for _, n := range nodes[1:] {
		run(n, append([]string{"-join", first.gossip}, tlsFlags(n)...)...)
	}
	clientTLS, err := api.TLSConfig(filepath.Join(own, "drover-agent-ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	cl := api.NewTLSClient("https://"+first.http, tok, clientTLS)
	waitFor(t, "autopilot to make the two new servers voters", time.Minute, func() bool {
		p, err := cl.Peers(ctx)
		if err != nil || len(p.Servers) != 3 {
			return false
		}
		for _, s := range p.Servers {
			if !s.Voter {
				return false
			}
		}
		return true
	})
	// Each server's own copy of the state (a stale read is not passed to
	// the leader).
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS}}
	for _, n := range nodes {
		waitFor(t, n.id+" to hold the data written alone", 30*time.Second, func() bool {
			req, _ := http.NewRequest(http.MethodGet, "https://"+n.http+"/api/v1/users?stale=true", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := hc.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var users []api.User
			return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&users) == nil &&
				slices.ContainsFunc(users, func(u api.User) bool { return u.Name == "written-alone" })
		})
	}
}
