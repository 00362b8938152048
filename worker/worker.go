// Package worker is the drover worker agent: it activates with the control
// plane, long-polls sync for assignments and kills, runs jobs through an
// Executor (as processes by default), ships their logs, and reports when
// attempts start and end. It talks to servers only over the public HTTP
// protocol, so a worker on this machine and one in another region behave the
// same.
package worker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/version"
	"github.com/drover-sched/drover/worker/images"
)

// Config configures a worker.
type Config struct {
	// Servers are the control-plane addresses, tried in turn.
	Servers []string
	// Name labels the machine; several workers may share it. A worker is
	// identified by the node ID kept in DataDir: activating again with it
	// retires the previous incarnation (and re-runs what it was running).
	Name string
	// CPU (cores) and Memory (bytes) offered to jobs.
	CPU    float64
	Memory int64
	// DataDir holds the worker's node ID, its instance token, image cache
	// and container state. One worker process at a time may use it, and
	// it must be the worker's own: New refuses one that is a symlink, is
	// owned by another user or writable by others, or lies under a
	// directory another user owns or may write to without the sticky bit
	// (see openOwnDir). DefaultDataDir is the place for it when none is
	// given.
	DataDir string
	// Secret is the cluster's worker join secret: the credential of a
	// worker an operator starts. A worker on a machine the autoscaler
	// launched has JoinToken instead (and Machine).
	Secret string
	// JoinToken is the one-time token the autoscaler gave this machine: it
	// joins Machine once, within the machine's boot timeout. After that the
	// worker proves itself with the instance token kept in DataDir, so a
	// restarted worker rejoins; one that lost DataDir cannot, and the
	// autoscaler replaces its machine.
	JoinToken string
	// TLS verifies the servers (and carries this worker's certificate
	// when they ask for one); nil: plain HTTP. See api.TLSConfig.
	TLS *tls.Config
	// SyncWait is how long the server may hold a sync open.
	SyncWait time.Duration
	// LogFlushInterval is how often running jobs' output is shipped.
	LogFlushInterval time.Duration
	// MaxLogBytes caps one attempt's log; output beyond it is dropped.
	MaxLogBytes int64
	// KillGrace is how long a job gets between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// KeepWorkDirs keeps jobs' working directories after they end, in a
	// directory of the jobs dir that only the worker's user reaches
	// (kept/BATCH-JOB-ATTEMPT): a later job running as the same user ID
	// must not read them.
	KeepWorkDirs bool
	// Region, Cluster and Pool place the worker (empty: the servers'
	// "default"); Labels are free-form.
	Region  string
	Cluster string
	Pool    string
	Labels  map[string]string
	// GPUs of one type offered to jobs.
	GPUType string
	GPUs    int
	// Machine is the autoscaler's name for this machine (set by the
	// provider that launched it; empty for a worker started by hand).
	Machine string
	// Executor runs the jobs' commands; nil means a ProcessExecutor.
	Executor Executor
	Logger   *slog.Logger

	// Isolation says how jobs are kept apart from the worker and from
	// each other: IsolationFull runs each job as a user of its own
	// (leased from JobUIDFirst..JobUIDFirst+JobUIDCount-1), in a cgroup
	// that enforces its CPU, memory and processes and measures its use,
	// in a directory only that user can enter, and in a jail: a network
	// namespace of its own (see BridgeSubnets), a /proc that shows it
	// only its own processes, chrooted, under no_new_privs and a seccomp
	// filter; IsolationNone runs jobs as the worker's own user,
	// unlimited, in the worker's namespaces (for a worker that is not
	// root, such as a developer's). IsolationAuto (the default) is full
	// when the worker runs as root.
	Isolation string
	// JobsDir holds, in a directory of each worker's own, the attempts'
	// directories; it must be outside DataDir (and any server's data
	// dir): jobs can reach it, never those. Default: /var/lib/drover-jobs
	// as root, else under the system temp dir.
	JobsDir string
	// JobWritableDirs are host directories isolated jobs may write (a
	// shared scratch file system): an isolated job sees the host
	// read-only but for its own directory, its private /tmp, /var/tmp and
	// /dev/shm, and these. Every job of the host shares them, so what
	// one leaves there another can find: list only places meant for that.
	JobWritableDirs []string
	// JobUIDFirst and JobUIDCount are the user IDs jobs run as, shared
	// by every worker of the host through leases in UIDLeaseDir.
	JobUIDFirst int
	JobUIDCount int
	UIDLeaseDir string
	// CgroupParent is where the jobs' cgroups go, relative to each
	// hierarchy's root (v1) or the unified root (v2). Default
	// drover/NODE.
	CgroupParent string
	// MaxProcesses bounds a job's processes and threads when the job
	// names no max_processes (enforced with the pids controller when
	// isolating). Default 4096.
	MaxProcesses int64
	// BridgeSubnets are the addresses of the jobs on the bridges
	// (network "bridge") of all the host's workers: each worker leases a
	// block of prefix length BridgeBlock of them, host-wide, through
	// NetworkLeaseDir, skipping blocks that overlap a network of the
	// host. Default 172.23.0.0/16 in /22 blocks: up to 1,021 jobs at
	// once on each of 64 workers.
	BridgeSubnets   netip.Prefix
	BridgeBlock     int
	NetworkLeaseDir string
	// BridgeDeny are destinations jobs on the bridge may not reach,
	// besides every address of the host itself and the servers'
	// (Servers, resolved at start). Default 169.254.0.0/16, where clouds
	// serve their metadata (and the machine's credentials).
	BridgeDeny []netip.Prefix
	// JobResolvConf is the resolv.conf jobs see ("": the host's, or,
	// when that names only loopback servers, systemd-resolved's list of
	// upstream ones). Port 53 of its nameservers stays open to jobs on
	// the bridge even inside BridgeDeny.
	JobResolvConf string
	// Runc is the runc binary container jobs run with ("" or a name: found
	// in PATH); RuncRoot keeps runc's state (default /run/drover-runc/NODE).
	Runc     string
	RuncRoot string
	// ImageDir caches images' layers (default DataDir/images), up to
	// ImageCacheBytes; RegistryAuthFile is a Docker config.json with
	// registry credentials (empty: ~/.docker/config.json, DOCKER_CONFIG).
	ImageDir         string
	ImageCacheBytes  int64
	RegistryAuthFile string
	// InsecureRegistries are registry hosts pulled from over plain HTTP
	// (localhost and 127.0.0.1 always are); listing one also allows
	// pulls to reach it wherever it is (as RegistryAllow does).
	InsecureRegistries []string
	// RegistryAllow lists where pulls may connect although the rule
	// refuses it (the host's own, loopback and link-local addresses, the
	// servers', BridgeDeny): registry hosts by name (host or host:port
	// as references name them), addresses or CIDRs. A pull is the
	// worker's act for a reference a job chose; it reaches no more than
	// the job's network allows unless the operator says so here.
	RegistryAllow []string
	// PullTimeout bounds an image pull; its time is the attempt's (the
	// attempt is billed from its reservation).
	PullTimeout time.Duration
	// FileURLRoots are the directories file:// input and output URLs may
	// name; none: file:// URLs are refused.
	FileURLRoots []string
	// UsageReportInterval is how often a running attempt's usage is
	// reported (at most once a minute is what servers keep).
	UsageReportInterval time.Duration
	// SpotNoticeURL is polled for the cloud's notice that this machine is
	// about to be taken back (GCE's metadata server:
	// http://metadata.google.internal/computeMetadata/v1/instance/preempted).
	// On the notice, and on SIGTERM, the worker preempts its attempts: they
	// run again elsewhere, counted as neither failures nor retries.
	SpotNoticeURL string
}

// Isolation modes.
const (
	IsolationAuto = "auto"
	IsolationFull = "full"
	IsolationNone = "none"
)

// DefaultConfig returns defaults for a worker; set Servers, Name, CPU,
// Memory, DataDir and Secret (or Machine and JoinToken).
func DefaultConfig() *Config {
	return &Config{
		SyncWait:         20 * time.Second,
		LogFlushInterval: time.Second,
		MaxLogBytes:      64 << 20,
		KillGrace:        5 * time.Second,

		Isolation:           IsolationAuto,
		JobUIDFirst:         200_000,
		JobUIDCount:         65_536,
		UIDLeaseDir:         "/run/drover-uids",
		MaxProcesses:        4096,
		BridgeSubnets:       netip.MustParsePrefix("172.23.0.0/16"),
		BridgeBlock:         22,
		NetworkLeaseDir:     "/run/drover-net",
		BridgeDeny:          []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")},
		ImageCacheBytes:     20 << 30,
		PullTimeout:         10 * time.Minute,
		Runc:                "runc",
		UsageReportInterval: time.Minute,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("config field Servers: at least one server address is required"))
	}
	if c.Name == "" {
		errs = append(errs, errors.New("config field Name is required"))
	}
	if c.CPU <= 0 {
		errs = append(errs, fmt.Errorf("config field CPU is %g; it must be positive", c.CPU))
	}
	if c.Memory <= 0 {
		errs = append(errs, fmt.Errorf("config field Memory is %d; it must be positive", c.Memory))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("config field DataDir is required"))
	}
	switch {
	case c.Secret == "" && c.JoinToken == "":
		errs = append(errs, errors.New("config field Secret (the cluster's -worker-secret-file) or JoinToken (the machine's -join-token-file) is required"))
	case c.Secret != "" && c.JoinToken != "":
		errs = append(errs, errors.New("config fields Secret and JoinToken exclude each other: a worker joins with one"))
	case c.JoinToken != "" && c.Machine == "":
		errs = append(errs, errors.New("config field JoinToken needs Machine: a join token joins only the machine it was made for"))
	}
	if c.SyncWait < 0 || c.LogFlushInterval <= 0 || c.KillGrace < 0 || c.MaxLogBytes <= 0 || c.UsageReportInterval <= 0 {
		errs = append(errs, errors.New("config fields SyncWait, LogFlushInterval, KillGrace, MaxLogBytes and UsageReportInterval must be positive"))
	}
	switch c.Isolation {
	case IsolationAuto, IsolationFull, IsolationNone:
	default:
		errs = append(errs, fmt.Errorf("config field Isolation is %q; it is %q, %q or %q", c.Isolation, IsolationAuto, IsolationFull, IsolationNone))
	}
	if c.JobsDir != "" && c.DataDir != "" && (within(c.JobsDir, c.DataDir) || within(c.DataDir, c.JobsDir)) {
		errs = append(errs, fmt.Errorf("config fields JobsDir (%s) and DataDir (%s) overlap: jobs must not reach the worker's identity and tokens", c.JobsDir, c.DataDir))
	}
	for _, d := range c.JobWritableDirs {
		if !filepath.IsAbs(d) || (c.DataDir != "" && (within(d, c.DataDir) || within(c.DataDir, d))) {
			errs = append(errs, fmt.Errorf("config field JobWritableDirs: %q must be an absolute path outside DataDir (%s)", d, c.DataDir))
		}
	}
	if c.PullTimeout <= 0 {
		errs = append(errs, fmt.Errorf("config field PullTimeout is %v; it must be positive", c.PullTimeout))
	}
	for _, a := range c.RegistryAllow {
		if _, err := netip.ParsePrefix(a); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(a); err == nil {
			continue
		}
		if err := images.CheckRegistryHost(a); err != nil {
			errs = append(errs, fmt.Errorf("config field RegistryAllow: %q is not a CIDR, an address or a registry host: %w", a, err))
		}
	}
	if c.ImageCacheBytes <= 0 {
		errs = append(errs, fmt.Errorf("config field ImageCacheBytes is %d; it must be positive", c.ImageCacheBytes))
	}
	if c.MaxProcesses < api.MinJobProcesses || c.MaxProcesses > api.MaxJobProcesses {
		errs = append(errs, fmt.Errorf("config field MaxProcesses is %d; it must be between %d and %d", c.MaxProcesses, api.MinJobProcesses, api.MaxJobProcesses))
	}
	if !c.BridgeSubnets.IsValid() || !c.BridgeSubnets.Addr().Is4() || c.BridgeBlock < c.BridgeSubnets.Bits() || c.BridgeBlock > 30 {
		errs = append(errs, fmt.Errorf("config fields BridgeSubnets (%s) and BridgeBlock (%d): the subnets are IPv4, and a block is a part of them from /%d to /30", c.BridgeSubnets, c.BridgeBlock, c.BridgeSubnets.Bits()))
	}
	if c.NetworkLeaseDir == "" {
		errs = append(errs, errors.New("config field NetworkLeaseDir is required"))
	}
	return errors.Join(errs...)
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	p, d := filepath.Clean(path), filepath.Clean(dir)
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if abs, err := filepath.Abs(d); err == nil {
		d = abs
	}
	return p == d || strings.HasPrefix(p, d+string(filepath.Separator))
}

// Worker runs jobs for the control plane.
type Worker struct {
	// leaving: the worker is going away with its machine (shutdown): the
	// attempts it preempts say so (api.AttemptEvent.WorkerLeaving).
	leaving atomic.Bool
	cfg     *Config
	log     *slog.Logger
	client  *api.Client
	exec    Executor
	id      *identity
	sandbox *sandbox
	files   *files
	// containers runs container jobs with images from the image store;
	// nil when this worker cannot (noContainers says why).
	containers   Executor
	images       *images.Store
	noContainers string

	mu       sync.Mutex
	tasks    map[api.AttemptRef]*task
	outbox   []api.AttemptEvent
	instance int64
	// The lease (see fence): lastOK is when the worker sent the last sync
	// that succeeded (or its activation), by the monotonic clock.
	lease, fenceGrace time.Duration
	lastOK            time.Time
	fenced            bool

	wake chan struct{}
	wg   sync.WaitGroup // attempts running
	runq chan *task     // to an idle runner
	// idleRunners ends the runners waiting for an attempt (shutdown).
	idleRunners     chan struct{}
	stopIdleRunners sync.Once
}

// New returns a worker; Run starts it.
func New(cfg *Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("worker config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ex := cfg.Executor
	if ex == nil {
		ex = &ProcessExecutor{}
	}
	// No job, process or container, gets what the worker was started with.
	if err := closeInherited(); err != nil {
		return nil, err
	}
	isolate := cfg.Isolation == IsolationFull || cfg.Isolation == IsolationAuto && os.Geteuid() == 0
	if isolate && os.Geteuid() != 0 {
		return nil, errors.New("isolation full needs the worker to run as root: it runs jobs as users of their own, in cgroups of their own (-isolation none runs them as this user, unlimited)")
	}
	// The data dir holds the worker's identity and instance token: it is
	// checked to be the worker's own, and made 0700, as it is claimed.
	id, err := claimIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		cfg:    cfg,
		id:     id,
		log:    log.With("worker", cfg.Name, "node", id.nodeID[:8]),
		client: api.NewTLSClient(strings.Join(cfg.Servers, ","), "", cfg.TLS),
		exec:   ex,
		tasks:  map[api.AttemptRef]*task{},
		runq:   make(chan *task),

		idleRunners: make(chan struct{}),
		wake:        make(chan struct{}, 1),
	}
	if err := w.openRuntime(isolate); err != nil {
		w.closeRuntime()
		id.release()
		return nil, err
	}
	if !isolate {
		w.log.Warn("jobs run as this worker's user, on the host's network, seeing its processes, with no CPU, memory or process limit and no usage measured (isolation none): every job's network setting is ignored; run the worker as root to isolate them")
	}
	return w, nil
}

// openRuntime sets up what jobs run in: their sandboxes, file copies and,
// on an isolating worker with runc, containers.
func (w *Worker) openRuntime(isolate bool) error {
	var err error
	if w.sandbox, err = openSandbox(w.cfg, w.id.nodeID, isolate, w.log); err != nil {
		return err
	}
	if w.files, err = newFiles(w.cfg.FileURLRoots); err != nil {
		return err
	}
	if !isolate {
		w.noContainers = "it runs without root (isolation none), and containers need it"
		return nil
	}
	runc, err := exec.LookPath(w.cfg.Runc)
	if err != nil {
		w.noContainers = fmt.Sprintf("runc is not installed (%v)", err)
		w.log.Warn("container jobs will end in error on this worker", "reason", w.noContainers)
		return nil
	}
	imageDir := w.cfg.ImageDir
	if imageDir == "" {
		imageDir = filepath.Join(w.cfg.DataDir, "images")
	}
	if w.images, err = images.New(images.Config{Dir: imageDir, MaxBytes: w.cfg.ImageCacheBytes, AuthFile: w.cfg.RegistryAuthFile,
		Insecure: w.cfg.InsecureRegistries, Egress: pullEgress(w.cfg, w.log), PullTimeout: w.cfg.PullTimeout,
		UserAgent: "drover-worker/" + w.cfg.Name, Logger: w.log}); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	root := w.cfg.RuncRoot
	if root == "" {
		root = filepath.Join("/run/drover-runc", w.id.nodeID[:12])
	}
	ce, err := newContainerExecutor(runc, root, filepath.Join(w.cfg.DataDir, "containers"), w.sandbox.jails.fs.resolv, w.images, w.log)
	if err != nil {
		return err
	}
	w.containers = ce
	return nil
}

// closeRuntime kills what jobs left and releases the runtime.
func (w *Worker) closeRuntime() {
	if w.sandbox != nil {
		w.sandbox.close()
	}
	if w.files != nil {
		w.files.close()
	}
	if w.images != nil {
		if err := w.images.Close(); err != nil {
			w.log.Warn("close image cache", "err", err)
		}
	}
}

// Run activates and syncs until ctx ends (or the cloud gives notice that
// the machine is going away). On the way out it preempts its running jobs,
// reports them with what they used, and deactivates, so the control plane
// runs them again elsewhere at once, counting neither a failure nor a
// retry.
func (w *Worker) Run(ctx context.Context) error {
	ctx, leave := context.WithCancel(ctx)
	defer leave()
	if w.cfg.SpotNoticeURL != "" {
		go func() {
			if watchSpotNotice(ctx, w.cfg.SpotNoticeURL, w.log) {
				w.log.Warn("the cloud is taking this machine back: preempting its jobs")
				leave()
			}
		}()
	}
	defer w.shutdown()
	go w.watchLease(ctx)
	for ctx.Err() == nil {
		if err := w.activate(ctx); err != nil {
			return err
		}
		w.syncLoop(ctx)
	}
	return nil
}

// Bounds on the lease a server gives: a number from the network is
// checked like any other.
const (
	minLease = time.Second
	maxLease = 24 * time.Hour
)

// setLease keeps the lease of an activation's answer (none from a server
// that sets none) and starts it at sent.
func (w *Worker) setLease(res *api.ActivateResponse, sent time.Time) {
	lease := time.Duration(res.FenceAfterMillis) * time.Millisecond
	grace := time.Duration(res.FenceGraceMillis) * time.Millisecond
	if lease > 0 {
		lease = min(max(lease, minLease), maxLease)
		grace = min(max(grace, 100*time.Millisecond), w.cfg.KillGrace, lease)
	}
	w.mu.Lock()
	w.lease, w.fenceGrace, w.lastOK, w.fenced = lease, grace, sent, false
	w.mu.Unlock()
}

// synced records a sync sent at sent that succeeded.
func (w *Worker) synced(sent time.Time) {
	w.mu.Lock()
	if sent.After(w.lastOK) {
		w.lastOK = sent
	}
	if w.fenced {
		w.fenced = false
		w.log.Info("in touch with the servers again; taking work")
	}
	w.mu.Unlock()
}

// watchLease fences the worker: when no sync has succeeded for its lease,
// it stops every attempt it runs (SIGTERM, then SIGKILL after the fence
// grace), and reports them preempted if it reconnects. The servers give a
// silent worker's attempts up as lost only after -lost-timeout, counted
// from no earlier than when the worker sent that sync; the lease is three
// quarters of it and the grace at most half the rest, so an attempt they
// run elsewhere has stopped here first: a job's attempts do not overlap.
func (w *Worker) watchLease(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		silent := time.Since(w.lastOK)
		if w.lease <= 0 || w.fenced || w.lastOK.IsZero() || silent < w.lease || len(w.tasks) == 0 {
			w.mu.Unlock()
			continue
		}
		w.fenced = true
		tasks := make([]*task, 0, len(w.tasks))
		for _, t := range w.tasks {
			tasks = append(tasks, t)
		}
		lease, grace := w.lease, w.fenceGrace
		w.mu.Unlock()
		w.log.Warn("fenced: no sync with the servers succeeded within the lease; stopping every attempt before the servers run them elsewhere",
			"silent", silent.Round(time.Millisecond), "lease", lease, "attempts", len(tasks))
		for _, t := range tasks {
			t.preemptFor(fmt.Sprintf("fenced: the worker had no contact with the servers for %s (its lease)", lease), grace)
		}
	}
}

// activate registers with the control plane, retrying until it works or the
// credential is refused. It sends the instance token of its last
// activation too: a worker restarted on its machine after the join token
// was spent rejoins with it.
func (w *Worker) activate(ctx context.Context) error {
	backoff := 200 * time.Millisecond
	// One token for every try: a retry whose first try was applied finds
	// the instance that try made.
	req := &api.ActivateRequest{
		Name: w.cfg.Name, NodeID: w.id.nodeID, PreviousToken: w.id.previousToken(), Token: api.NewToken(),
		CPU: w.cfg.CPU, Memory: w.cfg.Memory, Secret: w.cfg.Secret, JoinToken: w.cfg.JoinToken,
		Region: w.cfg.Region, Cluster: w.cfg.Cluster, Pool: w.cfg.Pool, Labels: w.cfg.Labels,
		GPUType: w.cfg.GPUType, GPUs: w.cfg.GPUs, Machine: w.cfg.Machine, Version: version.Get(),
	}
	for {
		w.client.SetToken("")
		sent := time.Now()
		res, err := w.client.Workers().Activate(ctx, req)
		if err == nil {
			w.setLease(res, sent)
			if err := w.id.keepToken(res.Token); err != nil {
				w.log.Warn("cannot keep the instance token; a quick restart may be refused as a duplicate", "err", err)
			}
			w.client.SetToken(res.Token)
			w.mu.Lock()
			w.instance = res.InstanceID
			w.mu.Unlock()
			w.log.Info("activated", "instance", res.InstanceID, "cpu", w.cfg.CPU, "memory", w.cfg.Memory)
			return nil
		}
		if api.IsStatus(err, http.StatusUnauthorized) || api.IsStatus(err, http.StatusForbidden) ||
			api.IsStatus(err, http.StatusConflict) || api.IsStatus(err, http.StatusBadRequest) {
			return fmt.Errorf("activation refused: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		w.log.Warn("activation failed; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// syncLoop syncs until ctx ends or the instance is retired.
func (w *Worker) syncLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		req, covered := w.report()
		if len(req.Events) == 0 {
			req.WaitMillis = w.cfg.SyncWait.Milliseconds()
		}
		sent := time.Now()
		res, err := w.syncOnce(ctx, req)
		switch {
		case err == nil:
			backoff = 100 * time.Millisecond
			w.synced(sent)
		case ctx.Err() != nil:
			return
		case errors.Is(err, errInterrupted):
			continue
		case api.IsStatus(err, http.StatusGone), api.IsStatus(err, http.StatusUnauthorized):
			w.log.Warn("control plane no longer knows this instance; killing its jobs and activating again", "err", err)
			w.abandonAll("instance retired by the control plane")
			return
		default:
			w.log.Warn("sync failed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		if res.Retired {
			w.log.Warn("instance retired by the control plane; activating again")
			w.abandonAll("instance retired by the control plane")
			return
		}
		if res.Acked == len(req.Events) {
			w.ack(covered)
		}
		for _, k := range res.Kill {
			w.kill(k, "killed by the control plane")
		}
		for _, p := range res.Preempt {
			w.preempt(p)
		}
		for _, a := range res.Assign {
			w.start(a)
		}
	}
}

var errInterrupted = errors.New("sync interrupted by a new event")

// syncOnce sends one sync. A long-polling sync is cut short when a task
// produces an event, so completions are reported at once.
func (w *Worker) syncOnce(ctx context.Context, req *api.SyncRequest) (*api.SyncResponse, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interrupted := make(chan struct{})
	if req.WaitMillis > 0 {
		go func() {
			select {
			case <-w.wake:
				close(interrupted)
				cancel()
			case <-rctx.Done():
			}
		}()
	}
	res, err := w.client.Workers().Sync(rctx, req)
	if err != nil {
		select {
		case <-interrupted:
			return nil, errInterrupted
		default:
		}
		return nil, err
	}
	return res, nil
}

// report builds a sync request: queued events, usage samples of running
// attempts not reported for UsageReportInterval, and every attempt the
// worker holds (running, or finished with an event not yet
// acknowledged). It also returns how many queued events the request
// covers; the samples follow them.
func (w *Worker) report() (*api.SyncRequest, int) {
	samples := w.usageSamples()
	w.mu.Lock()
	defer w.mu.Unlock()
	// Drain a stale wake-up: the events it announced are in this report.
	select {
	case <-w.wake:
	default:
	}
	// A started event whose attempt has already completed adds nothing: the
	// completed event carries the start time.
	completed := map[api.AttemptRef]bool{}
	for _, e := range w.outbox {
		if e.Kind == api.EventCompleted {
			completed[e.AttemptRef] = true
		}
	}
	req := &api.SyncRequest{Events: make([]api.AttemptEvent, 0, len(w.outbox))}
	for _, e := range w.outbox {
		if e.Kind == api.EventStarted && completed[e.AttemptRef] {
			continue
		}
		req.Events = append(req.Events, e)
	}
	for _, e := range samples {
		if !completed[e.AttemptRef] {
			req.Events = append(req.Events, e)
		}
	}
	for ref, t := range w.tasks {
		req.Known = append(req.Known, ref)
		if t.stopping() {
			req.Stopping = append(req.Stopping, ref)
		}
	}
	return req, len(w.outbox)
}

// usageSamples samples the running attempts whose usage is due.
func (w *Worker) usageSamples() []api.AttemptEvent {
	now := time.Now()
	w.mu.Lock()
	var due []*task
	for _, t := range w.tasks {
		t.mu.Lock()
		if now.Sub(t.reported) >= w.cfg.UsageReportInterval && !t.started.IsZero() {
			due = append(due, t)
			// Sent or not, the next sample is an interval away: a sync that
			// fails is retried with fresh events, and samples are not worth
			// a faster retry.
			t.reported = now
		}
		t.mu.Unlock()
	}
	w.mu.Unlock()
	var out []api.AttemptEvent
	for _, t := range due {
		u := t.sample()
		if u == nil {
			continue
		}
		t.mu.Lock()
		started := t.started
		t.mu.Unlock()
		clampUsage(u, w.cfg.CPU, w.cfg.Memory, now.Sub(started))
		out = append(out, api.AttemptEvent{AttemptRef: t.a.AttemptRef, Kind: api.EventUsage, StartTime: started, Usage: u})
	}
	return out
}

// ack drops the first n queued events (the server committed the request
// that covered them) and forgets tasks whose completion is now recorded.
func (w *Worker) ack(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.outbox[:n] {
		if e.Kind == api.EventCompleted {
			delete(w.tasks, e.AttemptRef)
		}
	}
	w.outbox = append(w.outbox[:0], w.outbox[n:]...)
}

// emit queues an event and wakes the sync loop.
func (w *Worker) emit(e api.AttemptEvent) {
	w.mu.Lock()
	w.outbox = append(w.outbox, e)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) start(a api.Assignment) {
	w.mu.Lock()
	if _, ok := w.tasks[a.AttemptRef]; ok {
		w.mu.Unlock()
		return
	}
	t := newTask(w, a)
	w.tasks[a.AttemptRef] = t
	w.mu.Unlock()
	w.wg.Add(1)
	select {
	case w.runq <- t: // a runner that is idle takes it
	default:
		go w.runner(t)
	}
}

// runnerIdle is how long a goroutine that ran an attempt waits for the
// next before it ends.
const runnerIdle = time.Minute

// runner runs t, then the attempts handed to it while it waits, until it
// has waited runnerIdle for one. Attempts run on goroutines that ran one
// before: an attempt's calls grow a goroutine's stack to some tens of KiB,
// and a new goroutine for each copied its stack two or three times.
func (w *Worker) runner(t *task) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		t.run()
		w.wg.Done()
		idle.Reset(runnerIdle)
		select {
		case t = <-w.runq:
		case <-idle.C:
			return
		case <-w.idleRunners:
			return
		}
	}
}

func (w *Worker) kill(ref api.AttemptRef, reason string) {
	w.mu.Lock()
	t := w.tasks[ref]
	w.mu.Unlock()
	if t != nil {
		t.kill(reason)
	}
}

// preempt stops an attempt the control plane preempts, with the grace it
// gives (a grace out of bounds reads as the default).
func (w *Worker) preempt(p api.Preemption) {
	w.mu.Lock()
	t := w.tasks[p.AttemptRef]
	w.mu.Unlock()
	if t == nil {
		return
	}
	g := p.GraceSeconds
	if g <= 0 || g > api.MaxPreemptionGraceSeconds || g != g {
		g = api.DefaultPreemptionGraceSeconds
	}
	w.log.Info("preempting an attempt", "attempt", p.AttemptRef.String(), "grace", time.Duration(g*float64(time.Second)), "reason", p.Reason)
	t.preemptFor("preempted: "+p.Reason, time.Duration(g*float64(time.Second)))
}

// abandonAll kills every task and forgets them and their events: the
// control plane has already given up on these attempts.
func (w *Worker) abandonAll(reason string) {
	w.mu.Lock()
	tasks := make([]*task, 0, len(w.tasks))
	for _, t := range w.tasks {
		tasks = append(tasks, t)
	}
	w.mu.Unlock()
	for _, t := range tasks {
		t.abandon(reason)
	}
	w.wg.Wait()
	w.mu.Lock()
	w.tasks = map[api.AttemptRef]*task{}
	w.outbox = nil
	w.mu.Unlock()
}

// shutdown preempts what runs, reports it and deactivates: the machine is
// going away (or the worker is stopped), and its jobs run again elsewhere.
func (w *Worker) shutdown() {
	defer w.id.release()
	defer w.closeRuntime()
	defer w.stopIdleRunners.Do(func() { close(w.idleRunners) })
	w.mu.Lock()
	active := w.instance != 0
	tasks := make([]*task, 0, len(w.tasks))
	for _, t := range w.tasks {
		tasks = append(tasks, t)
	}
	w.mu.Unlock()
	if !active {
		w.abandonAll("worker shutting down")
		return
	}
	w.leaving.Store(true)
	for _, t := range tasks {
		t.preempt(fmt.Sprintf("preempted: worker %s is going away", w.cfg.Name))
	}
	w.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	w.flush(ctx)
	if err := w.client.Workers().Deactivate(ctx, true); err != nil && !api.IsStatus(err, http.StatusGone) {
		w.log.Warn("deactivate", "err", err)
	} else {
		w.log.Info("deactivated", "preempted", len(tasks))
	}
}

// flush sends the queued events (the preempted attempts, with what they
// used) until they are acknowledged or ctx ends.
func (w *Worker) flush(ctx context.Context) {
	for ctx.Err() == nil {
		req, covered := w.report()
		if covered == 0 {
			return
		}
		res, err := w.client.Workers().Sync(ctx, req)
		if err == nil && res.Acked == len(req.Events) {
			w.ack(covered)
			return
		}
		if err != nil && (api.IsStatus(err, http.StatusGone) || api.IsStatus(err, http.StatusUnauthorized)) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Running returns the attempts the worker is running (tests).
func (w *Worker) Running() []api.AttemptRef {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []api.AttemptRef
	for ref, t := range w.tasks {
		if !t.finished() {
			out = append(out, ref)
		}
	}
	return out
}
