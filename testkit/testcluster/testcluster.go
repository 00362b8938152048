// Package testcluster runs real drover clusters: every server and worker is a
// separate `drover` process on its own loopback address. The fault tests
// and `drover bench` use it.
package testcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/tlsutil"
	"github.com/drover-sched/drover/testkit/freeport"
)

// Options describes a cluster to launch.
type Options struct {
	// Binary is the drover executable.
	Binary string
	// Dir holds data dirs, logs and transition logs.
	Dir string
	// Servers is how many servers bootstrap together.
	Servers int
	// Net is the loopback prefix; server i listens on Net+(i+1), e.g.
	// "127.0.1." gives 127.0.1.1, 127.0.1.2, ...
	Net string
	// Args are extra flags for every server.
	Args []string
	// NoJoin leaves out -join (servers find each other another way).
	NoJoin bool
	// TransitionLogs makes servers write -debug-transition-log files.
	TransitionLogs bool
	// LogLevel for the processes (default warn).
	LogLevel string
	// TLS makes a CA and certificates for the cluster: servers serve
	// HTTPS and talk Raft over mutual TLS, workers and clients verify
	// them. Without it servers run with -insecure.
	TLS bool
	// IPs, when set, are the servers' addresses (instead of Net), and
	// Ports their HTTP, Raft and gossip ports (instead of free ports of
	// this namespace's: the addresses may be another's).
	IPs   []string
	Ports *[3]int
	// Wrap, when set, gives the command that runs server i's drover
	// (e.g. nsenter into its region's network namespace).
	Wrap func(i int) []string
}

// Cluster is a launched cluster.
type Cluster struct {
	opts   Options
	Secret string
	// GossipKey is the servers' -gossip-key-file, a key made for the
	// cluster.
	GossipKey string
	Servers   []*Server
	// CA is the cluster's CA certificate file, and ClientTLS what
	// clients verify the servers with (nil without Options.TLS).
	CA        string
	ClientTLS *tls.Config
	ca        tlsutil.CA

	mu         sync.Mutex
	workers    []*Process
	healthOnce sync.Once
	health     *http.Client
}

// Server is one server of a cluster, across restarts.
type Server struct {
	c                  *Cluster
	Index              int
	IP                 string
	HTTP, Raft, Gossip string
	DataDir            string
	Cert, Key          string // with Options.TLS
	// Gen counts the process lifetimes started so far.
	Gen  int
	proc *Process
	// NodeID overrides ID ("s<Index>"); Wrap runs the process (see
	// Options.Wrap); Join, when set, is its -join list.
	NodeID string
	Wrap   []string
	Join   []string
}

// Process is a running child process.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	Log  string
}

// FreePort is freeport.Addr (the one rule for ports a server binds
// later), kept under this name for testcluster's callers.
func FreePort(ip string) (string, error) { return freeport.Addr(ip) }

// Start launches the servers (without waiting for a leader).
func Start(opts Options) (*Cluster, error) {
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	if opts.Net == "" {
		opts.Net = "127.0.1."
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, Secret: filepath.Join(opts.Dir, "worker.secret")}
	if err := os.WriteFile(c.Secret, []byte("cluster-secret\n"), 0o600); err != nil {
		return nil, err
	}
	// The gossip key as an operator makes one.
	key, err := exec.Command(opts.Binary, "operator", "gossip", "keyring", "generate").Output()
	if err != nil {
		return nil, fmt.Errorf("drover operator gossip keyring generate: %w", err)
	}
	c.GossipKey = filepath.Join(opts.Dir, "gossip.key")
	if err := os.WriteFile(c.GossipKey, key, 0o600); err != nil {
		return nil, err
	}
	var ca tlsutil.CA
	if opts.TLS {
		if ca, err = tlsutil.CreateCA("drover test CA", 30); err != nil {
			return nil, err
		}
		c.ca = ca
		c.CA = filepath.Join(opts.Dir, "ca.pem")
		if err := os.WriteFile(c.CA, ca.Cert, 0o644); err != nil {
			return nil, err
		}
		if c.ClientTLS, err = api.TLSConfig(c.CA, "", ""); err != nil {
			return nil, err
		}
	}
	for i := 0; i < opts.Servers; i++ {
		ip := fmt.Sprintf("%s%d", opts.Net, i+1)
		if len(opts.IPs) > i {
			ip = opts.IPs[i]
		}
		s := &Server{c: c, Index: i, IP: ip, DataDir: filepath.Join(opts.Dir, fmt.Sprintf("s%d", i))}
		if opts.Wrap != nil {
			s.Wrap = opts.Wrap(i)
		}
		if opts.TLS {
			cert, err := tlsutil.CreateCert(ca, tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: s.ID(), IPs: []net.IP{net.ParseIP(ip)}, Days: 30})
			if err != nil {
				return nil, err
			}
			s.Cert, s.Key = filepath.Join(opts.Dir, s.ID()+".pem"), filepath.Join(opts.Dir, s.ID()+"-key.pem")
			if err := os.WriteFile(s.Cert, cert.Cert, 0o644); err != nil {
				return nil, err
			}
			if err := os.WriteFile(s.Key, cert.Key, 0o600); err != nil {
				return nil, err
			}
		}
		if err := c.pickPorts(s); err != nil {
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	for _, s := range c.Servers {
		if err := s.Start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) pickPorts(s *Server) error {
	for k, p := range []*string{&s.HTTP, &s.Raft, &s.Gossip} {
		if c.opts.Ports != nil {
			*p = net.JoinHostPort(s.IP, fmt.Sprint(c.opts.Ports[k]))
			continue
		}
		addr, err := FreePort(s.IP)
		if err != nil {
			return err
		}
		*p = addr
	}
	return nil
}

// AddServer starts one more server (an empty data dir) with node ID id
// at ip, run through wrap, joining join (gossip addresses): a
// replacement. It does not bootstrap: it joins the cluster there is.
func (c *Cluster) AddServer(id, ip string, wrap, join []string) (*Server, error) {
	s := &Server{c: c, Index: len(c.Servers), IP: ip, NodeID: id, Wrap: wrap, Join: join,
		DataDir: filepath.Join(c.opts.Dir, id)}
	if c.opts.TLS {
		cert, key, err := c.ServerCert(id, id, ip)
		if err != nil {
			return nil, err
		}
		s.Cert, s.Key = cert, key
	}
	if err := c.pickPorts(s); err != nil {
		return nil, err
	}
	c.Servers = append(c.Servers, s)
	return s, s.Start()
}

func (c *Cluster) join(sep string, f func(*Server) string) string {
	var out []string
	for _, s := range c.Servers {
		out = append(out, f(s))
	}
	return strings.Join(out, sep)
}

// HTTPAddrs is the DROVER_ADDR for the cluster.
func (c *Cluster) HTTPAddrs() string {
	return c.join(",", func(s *Server) string { return s.URL() })
}

// ServerCert makes one more server certificate from the cluster's CA
// (with Options.TLS), naming server ID id ("": none), valid for ip, and
// returns its files.
func (c *Cluster) ServerCert(name, id, ip string) (certFile, keyFile string, err error) {
	if c.CA == "" {
		return "", "", errors.New("the cluster runs without TLS")
	}
	cert, err := tlsutil.CreateCert(c.ca, tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: id, IPs: []net.IP{net.ParseIP(ip)}, Days: 30})
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(c.opts.Dir, name+".pem"), filepath.Join(c.opts.Dir, name+"-key.pem")
	if err := os.WriteFile(certFile, cert.Cert, 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, cert.Key, 0o600)
}

// URL is the server's API base URL (https:// with Options.TLS).
func (s *Server) URL() string {
	if s.c.opts.TLS {
		return "https://" + s.HTTP
	}
	return "http://" + s.HTTP
}

// ReloadCA reads the CA file again for the clients it makes (and its own
// health checks): after a test rotated the cluster's CA.
func (c *Cluster) ReloadCA() error {
	conf, err := api.TLSConfig(c.CA, "", "")
	if err != nil {
		return err
	}
	c.ClientTLS = conf
	c.healthOnce.Do(func() {})
	c.health = c.HTTPClient(time.Second)
	return nil
}

// NewClient is an API client for addrs that verifies the servers when the
// cluster runs TLS.
func (c *Cluster) NewClient(addrs, token string) *api.Client {
	return api.NewTLSClient(addrs, token, c.ClientTLS)
}

// NewClient is an API client for this server alone.
func (s *Server) NewClient(token string) *api.Client { return s.c.NewClient(s.URL(), token) }

// HTTPClient is a plain HTTP client that trusts the cluster's CA.
func (s *Server) HTTPClient(timeout time.Duration) *http.Client { return s.c.HTTPClient(timeout) }

// HTTPClient is a plain HTTP client that trusts the cluster's CA.
func (c *Cluster) HTTPClient(timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = c.ClientTLS
	return &http.Client{Timeout: timeout, Transport: t}
}

// ID is the server's node ID.
func (s *Server) ID() string {
	if s.NodeID != "" {
		return s.NodeID
	}
	return fmt.Sprintf("s%d", s.Index)
}

// TransitionLog is the transition log of lifetime gen.
func (s *Server) TransitionLog(gen int) string {
	return filepath.Join(s.c.opts.Dir, fmt.Sprintf("transitions-s%d-%d.log", s.Index, gen))
}

// Start starts a new lifetime of the server (on the same data dir).
func (s *Server) Start() error {
	args := []string{"server",
		"-data-dir", s.DataDir, "-node-id", s.ID(),
		"-http-addr", s.HTTP, "-raft-addr", s.Raft, "-gossip-addr", s.Gossip,
		"-bootstrap-expect", fmt.Sprint(len(s.c.Servers)),
		"-worker-secret-file", s.c.Secret, "-gossip-key-file", s.c.GossipKey, "-gossip-interval", "200ms", "-log-level", s.c.opts.LogLevel,
	}
	if s.c.opts.TLS {
		args = append(args, "-tls-cert", s.Cert, "-tls-key", s.Key, "-ca-file", s.c.CA)
	} else {
		args = append(args, "-insecure")
	}
	if s.c.opts.TransitionLogs {
		args = append(args, "-debug-transition-log", s.TransitionLog(s.Gen))
	}
	switch {
	case len(s.Join) > 0:
		args = append(args, "-join", strings.Join(s.Join, ","))
	case !s.c.opts.NoJoin:
		args = append(args, "-join", s.c.join(",", func(o *Server) string { return o.Gossip }))
	}
	args = append(args, s.c.opts.Args...)
	p, err := s.c.spawnWrapped(s.Wrap, fmt.Sprintf("server-%d-%d.log", s.Index, s.Gen), args)
	if err != nil {
		return err
	}
	s.proc = p
	s.Gen++
	return nil
}

// spawnWrapped runs drover with args, through wrap when given (wrap's
// program execs drover, so the process is drover's).
func (c *Cluster) spawnWrapped(wrap []string, logName string, args []string) (*Process, error) {
	logPath := filepath.Join(c.opts.Dir, logName)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	argv := append(append(append([]string(nil), wrap...), c.opts.Binary), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Children die with the launcher.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", args[0], err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), Log: logPath}
	go func() { _ = cmd.Wait(); logFile.Close(); close(p.done) }()
	return p, nil
}

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill9 kills the process with SIGKILL and waits for it.
func (p *Process) Kill9() {
	if p.Running() {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Signal sends a signal.
func (p *Process) Signal(sig syscall.Signal) {
	if p.Running() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Stop sends SIGTERM (SIGCONT first, in case it is stopped) and waits, then
// SIGKILL after the limit.
func (p *Process) Stop(limit time.Duration) {
	if !p.Running() {
		return
	}
	p.Signal(syscall.SIGCONT)
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(limit):
		p.Kill9()
	}
}

// PID is the server's current process ID.
func (s *Server) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// PID is the process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Running reports whether the server's current process is alive.
func (s *Server) Running() bool { return s.proc.Running() }

// Kill9 kills the server's process.
func (s *Server) Kill9() { s.proc.Kill9() }

// Stop stops the server's current process: SIGTERM, SIGKILL after limit.
func (s *Server) Stop(limit time.Duration) {
	if s.proc != nil {
		s.proc.Stop(limit)
	}
}

// Signal signals the server's process.
func (s *Server) Signal(sig syscall.Signal) { s.proc.Signal(sig) }

// Log is the current lifetime's log file.
func (s *Server) Log() string {
	if s.proc == nil {
		return ""
	}
	return s.proc.Log
}

// Health is what GET /api/v1/health says.
type Health struct {
	Ready    bool   `json:"ready"`
	ServerID string `json:"server_id"`
	LeaderID string `json:"leader_id"`
}

// Health asks the server (no token needed; a second at most).
func (s *Server) Health() (Health, error) {
	var h Health
	s.c.healthOnce.Do(func() { s.c.health = s.c.HTTPClient(time.Second) })
	resp, err := s.c.health.Get(s.URL() + "/api/v1/health")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, err
}

// IsReadyLeader reports whether the server says it leads and is ready.
func (s *Server) IsReadyLeader() bool {
	h, err := s.Health()
	return err == nil && h.Ready && h.LeaderID != "" && h.LeaderID == h.ServerID
}

// WaitLeader waits until every running server agrees on a leader that is
// running and ready, and returns its index.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	for {
		if i, ok := c.agreedLeader(); ok {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("no leader: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Cluster) agreedLeader() (int, bool) {
	leader := ""
	for _, s := range c.Servers {
		if !s.Running() {
			continue
		}
		h, err := s.Health()
		if err != nil || h.LeaderID == "" || (leader != "" && h.LeaderID != leader) {
			return -1, false
		}
		leader = h.LeaderID
	}
	for _, s := range c.Servers {
		if s.ID() == leader && s.Running() && s.IsReadyLeader() {
			return s.Index, true
		}
	}
	return -1, false
}

// Token reads the admin token written by whichever server bootstrapped.
func (c *Cluster) Token() (string, error) {
	for _, s := range c.Servers {
		if b, err := os.ReadFile(filepath.Join(s.DataDir, "root.token")); err == nil {
			return strings.TrimSpace(string(b)), nil
		}
	}
	return "", errors.New("no server has written root.token yet")
}

// WaitToken waits until the admin token exists and every running server
// accepts it, and returns it. Followers apply the admin's creation a little
// after the leader, and requests a server answers on its own (its memory,
// peers, leader status) check the token against that server's state: asked
// too early, a follower answers 401.
func (c *Cluster) WaitToken(ctx context.Context) (string, error) {
	for {
		tok, err := c.Token()
		if err == nil && c.everyoneKnows(ctx, tok) {
			return tok, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("not every server knows the admin yet")
			}
			return "", fmt.Errorf("admin token: %v: %w", err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Cluster) everyoneKnows(ctx context.Context, tok string) bool {
	for _, s := range c.Servers {
		if !s.Running() {
			continue
		}
		one := c.NewClient(s.URL(), tok)
		one.RetryUnavailable, one.RetryUnreachable = 0, 0
		if _, err := one.Leader(ctx); err != nil {
			return false
		}
	}
	return true
}

// Client returns an admin client that knows every server.
func (c *Cluster) Client() (*api.Client, error) {
	tok, err := c.Token()
	if err != nil {
		return nil, err
	}
	return c.NewClient(c.HTTPAddrs(), tok), nil
}

// StartWorker starts a worker process that knows every server.
func (c *Cluster) StartWorker(name string, cores float64, memory string, args ...string) (*Process, error) {
	return c.StartWorkerIn(nil, name, cores, memory, args...)
}

// StartWorkerIn starts a worker process through wrap (see Options.Wrap).
func (c *Cluster) StartWorkerIn(wrap []string, name string, cores float64, memory string, args ...string) (*Process, error) {
	flags := []string{"worker", "-servers", c.HTTPAddrs(), "-worker-secret-file", c.Secret,
		"-name", name, "-cores", fmt.Sprint(cores), "-memory", memory, "-data-dir", filepath.Join(c.opts.Dir, "w-"+name),
		"-log-level", c.opts.LogLevel}
	if c.CA != "" {
		flags = append(flags, "-ca-file", c.CA)
	}
	p, err := c.spawnWrapped(wrap, "worker-"+name+".log", append(flags, args...))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.workers = append(c.workers, p)
	c.mu.Unlock()
	return p, nil
}

// Stop stops workers, then servers.
func (c *Cluster) Stop() {
	c.mu.Lock()
	workers := c.workers
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.Stop(15 * time.Second) }()
	}
	wg.Wait()
	for _, s := range c.Servers {
		if s.proc != nil {
			wg.Add(1)
			go func() { defer wg.Done(); s.proc.Stop(15 * time.Second) }()
		}
	}
	wg.Wait()
}

// Logs lists the log files of every process launched, oldest first.
func (c *Cluster) Logs() []string {
	files, _ := filepath.Glob(filepath.Join(c.opts.Dir, "*.log"))
	var out []string
	for _, f := range files {
		if !strings.Contains(filepath.Base(f), "transitions") {
			out = append(out, f)
		}
	}
	return out
}
