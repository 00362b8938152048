package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// testCluster is a real multi-server drover cluster: every server and worker
// is a separate `drover` process on its own loopback address.
type testCluster struct {
	t       *testing.T
	dir     string
	secret  string
	servers []*serverProc
	workers []*workerProc
	args    []string // extra server flags
	noJoin  bool     // find peers some other way than -join (Consul)
	mu      sync.Mutex
}

type serverProc struct {
	c                  *testCluster
	i                  int
	ip                 string
	http, raft, gossip string
	dataDir            string
	gen                int // process lifetimes so far
	cmd                *exec.Cmd
	done               chan struct{}
	logPath            string
}

type workerProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func freePortOn(t *testing.T, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// newCluster starts n servers on 127.0.1.1..n that bootstrap together.
func newCluster(t *testing.T, n int, args ...string) *testCluster {
	t.Helper()
	return startCluster(t, &testCluster{t: t, dir: t.TempDir(), args: args}, n)
}

func startCluster(t *testing.T, c *testCluster, n int) *testCluster {
	t.Helper()
	c.secret = filepath.Join(c.dir, "worker.secret")
	if err := os.WriteFile(c.secret, []byte("cluster-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		ip := fmt.Sprintf("127.0.1.%d", i+1)
		c.servers = append(c.servers, &serverProc{
			c: c, i: i, ip: ip,
			http: freePortOn(t, ip), raft: freePortOn(t, ip), gossip: freePortOn(t, ip),
			dataDir: filepath.Join(c.dir, fmt.Sprintf("s%d", i)),
		})
	}
	t.Cleanup(c.shutdown)
	for _, s := range c.servers {
		s.start()
	}
	c.waitLeader(60 * time.Second)
	return c
}

func (c *testCluster) gossipAddrs() string {
	var out []string
	for _, s := range c.servers {
		out = append(out, s.gossip)
	}
	return strings.Join(out, ",")
}

func (c *testCluster) httpAddrs() string {
	var out []string
	for _, s := range c.servers {
		out = append(out, "http://"+s.http)
	}
	return strings.Join(out, ",")
}

func (s *serverProc) transitionLog(gen int) string {
	return filepath.Join(s.c.dir, fmt.Sprintf("transitions-s%d-%d.log", s.i, gen))
}

func (s *serverProc) start() {
	t := s.c.t
	logFile, err := os.Create(filepath.Join(s.c.dir, fmt.Sprintf("server-%d-%d.log", s.i, s.gen)))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"server",
		"-data-dir", s.dataDir, "-node-id", fmt.Sprintf("s%d", s.i),
		"-http-addr", s.http, "-raft-addr", s.raft, "-gossip-addr", s.gossip,
		"-bootstrap-expect", fmt.Sprint(len(s.c.servers)),
		"-worker-secret-file", s.c.secret, "-debug-transition-log", s.transitionLog(s.gen),
		"-gossip-interval", "200ms", "-log-level", "warn",
	}
	if !s.c.noJoin {
		args = append(args, "-join", s.c.gossipAddrs())
	}
	args = append(args, s.c.args...)
	s.cmd = exec.Command(droverBin, args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.logPath = logFile.Name()
	s.done = make(chan struct{})
	done := s.done
	cmd := s.cmd
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	s.gen++
}

func (s *serverProc) running() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

func (s *serverProc) kill9() {
	if s.running() {
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func (s *serverProc) signal(sig syscall.Signal) { _ = s.cmd.Process.Signal(sig) }

// health is what /api/v1/health says (no token needed).
type health struct {
	Ready    bool   `json:"ready"`
	ServerID string `json:"server_id"`
	LeaderID string `json:"leader_id"`
}

func (s *serverProc) health() (health, error) {
	var h health
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + s.http + "/api/v1/health")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, err
}

// waitLeader waits until a running server is leader, is ready, and every
// running server agrees; it returns the leader's index.
func (c *testCluster) waitLeader(limit time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		leader := -1
		agree := true
		for _, s := range c.servers {
			if !s.running() {
				continue
			}
			h, err := s.health()
			if err != nil || h.LeaderID == "" {
				agree = false
				break
			}
			var idx int
			if _, err := fmt.Sscanf(h.LeaderID, "s%d", &idx); err != nil {
				agree = false
				break
			}
			if leader == -1 {
				leader = idx
			} else if leader != idx {
				agree = false
			}
		}
		if agree && leader >= 0 && c.servers[leader].running() {
			if h, err := c.servers[leader].health(); err == nil && h.Ready && h.ServerID == h.LeaderID {
				return leader
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.dumpLogs()
	c.t.Fatalf("no leader within %s", limit)
	return -1
}

func (c *testCluster) token() string {
	c.t.Helper()
	for _, s := range c.servers {
		if b, err := os.ReadFile(filepath.Join(s.dataDir, "root.token")); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	c.t.Fatal("no server wrote root.token")
	return ""
}

// client talks to every server, as a user would configure DROVER_ADDR.
func (c *testCluster) client() *api.Client { return api.NewClient(c.httpAddrs(), c.token()) }

func (c *testCluster) startWorker(name string, cores int) {
	c.t.Helper()
	logFile, err := os.Create(filepath.Join(c.dir, "worker-"+name+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(droverBin, "worker", "-servers", c.httpAddrs(), "-worker-secret-file", c.secret,
		"-name", name, "-cores", fmt.Sprint(cores), "-memory", "16GiB", "-data-dir", filepath.Join(c.dir, "w-"+name),
		"-log-level", "warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	w := &workerProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(w.done) }()
	c.workers = append(c.workers, w)
}

func (c *testCluster) shutdown() {
	for _, w := range c.workers {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, w := range c.workers {
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			_ = w.cmd.Process.Kill()
		}
	}
	for _, s := range c.servers {
		if s.running() {
			s.signal(syscall.SIGCONT)
			s.signal(syscall.SIGTERM)
		}
	}
	for _, s := range c.servers {
		if s.done == nil {
			continue
		}
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
		}
	}
	if c.t.Failed() {
		c.dumpLogs()
	}
}

func (c *testCluster) dumpLogs() {
	files, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	for _, f := range files {
		if strings.Contains(f, "transitions") {
			continue
		}
		data, _ := os.ReadFile(f)
		if len(data) > 20000 {
			data = data[len(data)-20000:]
		}
		c.t.Logf("==> %s\n%s", filepath.Base(f), data)
	}
}

// waitBatch waits until a batch satisfies cond, failing after limit.
func waitBatch(t *testing.T, c *api.Client, id int64, limit time.Duration, what string, cond func(*api.Batch) bool) *api.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		b, err := c.GetBatch(ctx, id)
		if err == nil && cond(b) {
			return b
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s (last: %+v, %v)", what, b, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
