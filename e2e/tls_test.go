package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/tlsutil"
	"github.com/drover-sched/drover/testkit/freeport"
	"github.com/drover-sched/drover/testkit/testcluster"
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
	p, err := cl.Operator().Peers(ctx)
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
		p, err := cl.Operator().Peers(ctx)
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
		p, err := cl.Operator().Peers(ctx)
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

// TestTLSRotationWithoutRestart rotates the cluster's CA and every
// server's certificate with SIGHUP alone, as docs/operations.md says: the
// new CA goes beside the old one in -ca-file, each server gets a
// certificate from it, the old CA goes. Writes go on throughout; a server
// killed afterwards rejoins over Raft with the new certificates; a
// certificate from a CA not in -ca-file is refused on reload and the one
// in use stays; the expiry metric follows the certificate in use.
func TestTLSRotationWithoutRestart(t *testing.T) {
	c := startCluster(t, testcluster.Options{Servers: 3, TLS: true})
	ctx := context.Background()
	tok := c.token()
	oldCA, err := os.ReadFile(c.CA)
	if err != nil {
		t.Fatal(err)
	}
	clientFor := func(pem []byte) *api.Client {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		return api.NewTLSClient(c.HTTPAddrs(), tok, &tls.Config{RootCAs: pool, ServerName: api.TLSServerName})
	}
	write := func(cl *api.Client, key string) {
		t.Helper()
		if _, err := createProbe(ctx, cl, key); err != nil {
			t.Fatalf("write %s: %v", key, err)
		}
	}
	// issuer says which CA signed the certificate a server presents.
	issuer := func(s *testcluster.Server) string {
		conn, err := tls.Dial("tcp", s.HTTP, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return err.Error()
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Issuer.CommonName
	}
	ca2, err := tlsutil.CreateCA("drover test CA 2", 30)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.CA, append(append([]byte(nil), oldCA...), ca2.Cert...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Servers {
		s.Signal(syscall.SIGHUP)
	}
	both := clientFor(append(append([]byte(nil), oldCA...), ca2.Cert...))
	write(both, "bundle")
	// Each server's certificate is made in turn, seconds may tick between
	// them: the metric read below is s0's, so its own NotAfter is the one.
	notAfter := map[string]time.Time{}
	for _, s := range c.Servers {
		cert, err := tlsutil.CreateCert(ca2, tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: s.ID(), IPs: []net.IP{net.ParseIP(s.IP)}, Days: 20})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.Cert, cert.Cert, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.Key, cert.Key, 0o600); err != nil {
			t.Fatal(err)
		}
		s.Signal(syscall.SIGHUP)
		waitFor(t, s.ID()+" to serve its new certificate", 10*time.Second, func() bool { return issuer(s) == "drover test CA 2" })
		write(both, "rotated-"+s.ID())
		block, _ := pem.Decode(cert.Cert)
		leaf, _ := x509.ParseCertificate(block.Bytes)
		notAfter[s.ID()] = leaf.NotAfter
	}
	if err := os.WriteFile(c.CA, ca2.Cert, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Servers {
		s.Signal(syscall.SIGHUP)
	}
	only2 := clientFor(ca2.Cert)
	write(only2, "new-ca-only")
	if err := c.ReloadCA(); err != nil {
		t.Fatal(err)
	}
	// New Raft handshakes: a server killed and started again catches up.
	leader := c.waitLeader(30 * time.Second)
	f := c.Servers[(leader+1)%3]
	f.Kill9()
	write(only2, "one-down")
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	c.waitLeader(30 * time.Second)
	waitAppliedAs(t, c, tok)
	for _, s := range c.Servers {
		if got := issuer(s); got != "drover test CA 2" {
			t.Fatalf("%s presents a certificate from %q", s.ID(), got)
		}
	}

	// A certificate from a CA not in -ca-file is refused.
	ca3, err := tlsutil.CreateCA("drover test CA 3", 30)
	if err != nil {
		t.Fatal(err)
	}
	s0 := c.Servers[0]
	bad, err := tlsutil.CreateCert(ca3, tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: s0.ID(), IPs: []net.IP{net.ParseIP(s0.IP)}, Days: 5})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(s0.Cert, bad.Cert, 0o644)
	os.WriteFile(s0.Key, bad.Key, 0o600)
	s0.Signal(syscall.SIGHUP)
	waitFor(t, "the refusal in the log", 10*time.Second, func() bool {
		data, _ := os.ReadFile(s0.Log())
		return strings.Contains(string(data), "TLS reload refused") && strings.Contains(string(data), "does not chain to a CA of")
	})
	if got := issuer(s0); got != "drover test CA 2" {
		t.Fatalf("after a refused reload %s presents a certificate from %q", s0.ID(), got)
	}
	write(only2, "after-refusal")

	// The expiry metric is the certificate in use's.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: func() *x509.CertPool {
		p := x509.NewCertPool()
		p.AppendCertsFromPEM(ca2.Cert)
		return p
	}(), ServerName: api.TLSServerName}}}
	resp, err := hc.Get(s0.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`drover_tls_expiry_timestamp_seconds{certificate="server"} %s`, strconv.FormatFloat(float64(notAfter[s0.ID()].Unix()), 'g', -1, 64))
	if !strings.Contains(string(body), want) {
		t.Fatalf("metrics do not say %q:\n%s", want, grepLines(string(body), "drover_tls"))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
