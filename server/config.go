// Package server is a drover control-plane server: a Raft node holding the
// replicated state, the HTTP API that users and workers talk to, and the
// loops that run on the leader (scheduler, instance liveness).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/httpapi"
)

// Config configures a server. Start from DefaultConfig and set what differs.
type Config struct {
	// NodeID names this server in the Raft configuration. Empty: read from
	// <DataDir>/node-id, or generated and saved there.
	NodeID string
	// DataDir holds the Raft log, snapshots, job logs and the root token.
	DataDir string
	// HTTPAddr is where the API listens.
	HTTPAddr string
	// RaftAddr is where Raft listens; RaftAdvertise is the address peers use
	// (defaults to RaftAddr). Raft listens over mutual TLS (TLSCert, or a
	// CA the server makes in DataDir/tls), in plain text only with
	// Insecure. Empty: no Raft listener at all, Raft runs in memory: a
	// server that bootstraps alone and never has peers (the dev agent).
	RaftAddr      string
	RaftAdvertise string
	// HTTPAdvertise is the address other servers forward requests to
	// (default: HTTPAddr, or the gossip advertise host with HTTPAddr's port
	// when HTTPAddr binds all interfaces).
	HTTPAdvertise string
	// Bootstrap makes a node with no Raft state start a single-server
	// cluster of itself (dev mode).
	Bootstrap bool
	// GossipAddr is where servers find each other (hashicorp/memberlist).
	// Empty: no gossip (a single dev server). Gossip runs only with
	// GossipKeys or Insecure (see gossips): a server that works alone and
	// has no key has no gossip listener, so nobody can join it.
	GossipAddr      string
	GossipAdvertise string
	// Join lists gossip addresses of other servers to join.
	Join []string
	// BootstrapExpect bootstraps Raft once this many servers (none with
	// Raft state) see each other over gossip.
	BootstrapExpect int
	// ConsulAddr, when set, registers this server as a drover-server service
	// in Consul and joins the servers registered there.
	ConsulAddr string
	// DeadServerGrace removes a server from the Raft configuration after it
	// has been unreachable over gossip this long.
	DeadServerGrace time.Duration
	// GossipInterval tunes memberlist's failure detection (0: LAN
	// defaults, a 1s probe interval).
	GossipInterval time.Duration
	// GossipKeys encrypt gossip: the first is used to send, all are
	// accepted (see cluster.Config.GossipKeys). A server that gossips with
	// others (BootstrapExpect above 1, Join or ConsulAddr) needs them
	// unless Insecure is set.
	GossipKeys [][]byte
	// SecretsKeyFile holds the keys that seal billing projects' storage
	// credentials in the state (internal/secrets: base64, one a line,
	// the first sealing). Every server of a cluster needs the same file.
	// Empty: a server that is alone (Bootstrap, or BootstrapExpect 1
	// with no Join) makes <DataDir>/secrets.key at its first start; one
	// of several keeps no credentials.
	SecretsKeyFile string
	// Insecure lets servers gossip, serve the API and talk Raft in the
	// clear, for a test or a network no one else reaches. Without TLSCert
	// it is the only way to a plain-text Raft listener, which any process
	// that reaches it can take over: the server warns at every start.
	Insecure bool
	// TLSCert and TLSKey are this server's certificate and key (PEM
	// files, `drover tls cert create -server`). With them the API serves
	// HTTPS and Raft runs over mutual TLS, which needs CAFile. A server
	// that gossips with others needs them unless Insecure is set. Without
	// them (and without Insecure) a server with a Raft listener makes a CA
	// and a certificate of its own in DataDir/tls and runs Raft over
	// mutual TLS with them; its API stays plain HTTP.
	TLSCert, TLSKey string
	// CAFile is the cluster CA: Raft peers and the servers this one
	// forwards requests to must have certificates it signed.
	CAFile string
	// DefaultTokenTTL is how long a token lives when its maker does not
	// say (a new user's first token too).
	DefaultTokenTTL time.Duration
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// CallbackAllow are the destinations batches' completion callbacks may
	// go to: URLs (http or https), each allowing its scheme and host and
	// the paths under its own (api.CallbackAllowed). None: batches may
	// not name a callback. The leader POSTs from the server, never from a
	// worker or a job's network.
	CallbackAllow []string
	// CallbackRetry is how long the leader waits before it POSTs a
	// completion again after a failure, doubling each time, for
	// CallbackAttempts attempts in all; then it records the failure.
	CallbackRetry    time.Duration
	CallbackAttempts int
	// PreemptInterval is how often the leader decides whether queues that
	// wait take capacity back (reclaim of guarantees, preemption for fair
	// share: scheduler.Preempt).
	PreemptInterval time.Duration
	// QueueSampleInterval is how often the leader records what each queue
	// in use holds in the history store (the data of drover queue
	// recommend).
	QueueSampleInterval time.Duration
	// SLOInterval is how often the leader reads the SLO report of the
	// last SLOWindow into the metrics drover_workflow_slo_ratio and
	// drover_tier_slo_successful_ratio.
	SLOInterval time.Duration
	SLOWindow   time.Duration
	// AutoApplyTick is how often the leader looks for queue trees whose
	// auto_apply is due.
	AutoApplyTick time.Duration
	// QueueUsageRetention is how long the history store keeps those
	// samples: the leader deletes older ones at the start of its
	// leadership and every hour after, and drover queue recommend and
	// queue slo look back no further (their -days is refused beyond it).
	// The default, 400 days, keeps the longest window they take (365
	// days) whole.
	QueueUsageRetention time.Duration
	// BillingInterval is how often the leader looks at every billing
	// project's spend regardless: it cancels a project's open batches at
	// the moment the project reaches its spend limit (runSpendLimits),
	// so this is only a backstop.
	BillingInterval time.Duration
	// HistoryDSN is the MySQL database finished batches and the billing
	// ledger go to (go-sql-driver/mysql's form:
	// user:password@tcp(host:3306)/drover). Empty: the embedded store in
	// DataDir, which serves a single server; with several servers and no
	// DSN, finished batches stay in memory.
	HistoryDSN string
	// Retention is how long a complete batch stays in memory once the
	// history store holds it, and a retired instance once it retired
	// (and no batch in memory, nor a machine, refers to it);
	// ExportInterval is how often the leader exports complete batches.
	Retention      time.Duration
	ExportInterval time.Duration
	// TLSClientCA, when set, makes the API require a client certificate
	// signed by it (or by CAFile) from every caller.
	TLSClientCA string
	// WorkerSecret is the join secret workers an operator starts present
	// to activate (they are refused when it is empty), and the key the
	// autoscaler's machines' one-time join tokens are derived from: it is
	// an operator credential that never leaves the servers and the
	// operator's own workers, and must never be put where a job can read
	// it.
	WorkerSecret string
	// LogStoreURL is where job logs go (a gocloud.dev/blob URL). Empty:
	// <DataDir>/logs on the local disk.
	LogStoreURL string
	// AdminName and DefaultBillingProject are created when the cluster is
	// first bootstrapped.
	AdminName             string
	DefaultBillingProject string

	// MaxPlacements bounds the jobs placed by one scheduling round (one
	// Raft entry).
	MaxPlacements int
	// ScheduleInterval is how often the scheduler runs when nothing
	// triggers it.
	ScheduleInterval time.Duration
	// LostTimeout retires an instance that has not synced for this long;
	// its running jobs are re-run elsewhere.
	LostTimeout time.Duration
	// MaxLostAttempts ends a job Error once it was lost with this many
	// instances (1 to 255; 0: no limit), so a job that takes its worker
	// down does not travel the whole fleet.
	MaxLostAttempts int
	// ClusterDownAfter: a cluster none of whose workers was heard from for
	// this long (or LostTimeout, when shorter) is down; placement avoids
	// it until one syncs again.
	ClusterDownAfter time.Duration
	// MaxSyncWait caps how long a worker's sync may be held open.
	MaxSyncWait time.Duration
	// UIStreamLife is how long a web UI page's live stream lasts before
	// the browser reconnects to it, resuming where it was (a reconnection
	// checks the session again).
	UIStreamLife time.Duration
	// ApplyTimeout bounds how long a write waits to be committed.
	ApplyTimeout time.Duration
	// MaxEventsPerEntry bounds worker events grouped into one Raft entry.
	MaxEventsPerEntry int

	// HTTP timeouts: reading a whole request (a bunch of jobs on a slow
	// link included), writing a response (held syncs and streamed logs
	// and snapshots lift it), and keeping an idle connection.
	HTTPReadTimeout  time.Duration
	HTTPWriteTimeout time.Duration
	HTTPIdleTimeout  time.Duration

	// MaxJobsPerBatch bounds the jobs one batch may hold (at most 2^31).
	MaxJobsPerBatch int64
	// MaxJobsPerUpdate bounds the jobs one update adds (a commit makes
	// them live in one Raft entry).
	MaxJobsPerUpdate int64
	// MaxQueuedJobsPerUser and MaxQueuedJobsPerBillingProject bound the
	// jobs a user, and a billing project, has that have not finished
	// (open updates' job IDs included); 0: no limit.
	MaxQueuedJobsPerUser           int64
	MaxQueuedJobsPerBillingProject int64
	// MaxBatchesPerUser bounds a user's live (not complete) batches; 0:
	// no limit.
	MaxBatchesPerUser int64
	// MaxOpenUpdatesPerUser bounds a user's updates neither committed nor
	// discarded; 0: no limit. UpdateIdleTimeout discards an open update
	// that has received nothing for this long.
	MaxOpenUpdatesPerUser int64
	UpdateIdleTimeout     time.Duration
	// UserRequestsPerSecond and WorkerRequestsPerSecond bound the requests
	// one user token, and one worker, may make to one server (a token
	// bucket holding two seconds' worth); beyond it the server answers 429
	// with Retry-After. 0: no limit.
	UserRequestsPerSecond   float64
	WorkerRequestsPerSecond float64
	// AnonymousRequestsPerSecond bounds, per client address (an IPv6
	// address by its /64), the requests that fail to authenticate; beyond
	// it the server answers 429. 0: no limit.
	AnonymousRequestsPerSecond float64
	// StateMemoryBudget bounds the estimated memory of the jobs the state
	// holds, finished batches included; submissions beyond it are refused
	// with 413. 0: no budget.
	StateMemoryBudget int64
	// MaxLogBytesPerAttempt bounds the log the servers keep for one
	// attempt; chunks beyond it are refused with 413.
	MaxLogBytesPerAttempt int64
	// MaxLogBytesPerBatch bounds the job logs one server keeps of one
	// batch; past it the logs are cut with a line saying why. Billing
	// projects have a quota of their own (drover billing-project
	// set-log-quota).
	MaxLogBytesPerBatch int64

	// Raft timing. Zero values take hashicorp/raft's defaults.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotInterval   time.Duration
	SnapshotThreshold  uint64
	TrailingLogs       uint64

	// TransitionLog, when set, gets one line per job state change
	// ("batch job from to"), flushed after every applied batch of log
	// entries. The fault tests check histories with it.
	TransitionLog string
	// DebugPprof serves net/http/pprof under /debug/pprof/ (no token: for
	// profiling on a trusted network only).
	DebugPprof bool

	// Raft plumbing, injectable so a whole cluster can run in one process
	// (raft.InmemTransport, raft.InmemStore; see NewTestCluster). Nil: a
	// TCP transport on RaftAddr, a BoltDB log and stable store and file
	// snapshots under DataDir/raft. The log and stable stores are given
	// together or not at all.
	RaftTransport   raft.Transport
	RaftLogStore    raft.LogStore
	RaftStableStore raft.StableStore
	RaftSnapshots   raft.SnapshotStore
	// Members is a fixed membership view for a server without gossip
	// (in-process clusters): it tells the API where the other servers'
	// APIs are, for forwarding to the leader. Ignored with GossipAddr.
	Members httpapi.Members

	// ExportHook, when set, is called at each ExportStage of the leader's
	// history export, and the exporter waits for it to return: a test
	// orders an outage of the history store against the export with it
	// (TestMySQLExportSurvivesOutage) instead of racing the exporter with
	// polls. A hook that blocks must return when ctx ends (the server
	// lost leadership or stops). Nil, the default, in production.
	ExportHook func(ctx context.Context, ev ExportEvent)

	// Autoscale connects the autoscaler to the providers that make
	// machines (nil: it does not run; declare it enabled in the
	// placement config too).
	Autoscale *AutoscaleConfig

	Logger *slog.Logger
}

// Bounds on Config.QueueUsageRetention: a day is the shortest window
// drover queue recommend and queue slo take.
const (
	MinQueueUsageRetention = 24 * time.Hour
	MaxQueueUsageRetention = 3650 * 24 * time.Hour
)

// DefaultConfig returns a configuration for one server on loopback.
func DefaultConfig() *Config {
	return &Config{
		HTTPAddr:                       "127.0.0.1:4650",
		RaftAddr:                       "127.0.0.1:4651",
		AdminName:                      "root",
		DefaultTokenTTL:                30 * 24 * time.Hour,
		BillingInterval:                10 * time.Second,
		CallbackRetry:                  2 * time.Second,
		PreemptInterval:                time.Second,
		QueueSampleInterval:            time.Minute,
		SLOInterval:                    5 * time.Minute,
		AutoApplyTick:                  time.Minute,
		SLOWindow:                      30 * 24 * time.Hour,
		QueueUsageRetention:            400 * 24 * time.Hour,
		CallbackAttempts:               8,
		Retention:                      7 * 24 * time.Hour,
		ExportInterval:                 5 * time.Second,
		DefaultBillingProject:          "default",
		MaxPlacements:                  20000,
		ScheduleInterval:               time.Second,
		LostTimeout:                    60 * time.Second,
		MaxLostAttempts:                3,
		MaxSyncWait:                    30 * time.Second,
		UIStreamLife:                   10 * time.Minute,
		ClusterDownAfter:               10 * time.Second,
		ApplyTimeout:                   30 * time.Second,
		MaxEventsPerEntry:              8192,
		HTTPReadTimeout:                5 * time.Minute,
		HTTPWriteTimeout:               2 * time.Minute,
		HTTPIdleTimeout:                2 * time.Minute,
		MaxJobsPerBatch:                50_000_000,
		MaxJobsPerUpdate:               20_000_000,
		MaxQueuedJobsPerUser:           25_000_000,
		MaxBatchesPerUser:              10_000,
		MaxOpenUpdatesPerUser:          100,
		UpdateIdleTimeout:              time.Hour,
		UserRequestsPerSecond:          100,
		MaxQueuedJobsPerBillingProject: 100_000_000,
		WorkerRequestsPerSecond:        1000,
		AnonymousRequestsPerSecond:     10,
		StateMemoryBudget:              8 << 30,
		MaxLogBytesPerAttempt:          64 << 20,
		MaxLogBytesPerBatch:            16 << 30,
		DeadServerGrace:                2 * time.Minute,
		SnapshotInterval:               2 * time.Minute,
		SnapshotThreshold:              16384,
		TrailingLogs:                   10240,
	}
}

// Validate checks the configuration and names the first bad field.
func (c *Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("DataDir is required"))
	}
	if c.Autoscale != nil {
		if err := c.Autoscale.validate(); err != nil {
			errs = append(errs, err)
		}
		if c.WorkerSecret == "" && c.Autoscale.runs() {
			errs = append(errs, errors.New("the autoscaler derives its machines' one-time join tokens from WorkerSecret (-worker-secret-file): set it, the same on every server"))
		}
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("HTTPAddr %q: %w", c.HTTPAddr, err))
	}
	switch {
	case c.RaftTransport != nil:
	case c.RaftAddr == "":
		if !c.Bootstrap || c.GossipAddr != "" || c.RaftAdvertise != "" {
			errs = append(errs, errors.New("an empty RaftAddr runs Raft in memory, with no listener, for a server that is alone for good: "+
				"it needs Bootstrap and excludes GossipAddr and RaftAdvertise (a server that may get peers listens on a RaftAddr)"))
		}
	default:
		if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
			errs = append(errs, fmt.Errorf("RaftAddr %q: %w", c.RaftAddr, err))
		}
	}
	if (c.RaftLogStore == nil) != (c.RaftStableStore == nil) {
		errs = append(errs, errors.New("config fields RaftLogStore and RaftStableStore are given together or not at all"))
	}
	if c.RaftAdvertise != "" {
		if host, _, err := net.SplitHostPort(c.RaftAdvertise); err != nil || host == "" || net.ParseIP(host).IsUnspecified() {
			errs = append(errs, fmt.Errorf("RaftAdvertise %q must be a host:port other servers can reach", c.RaftAdvertise))
		}
	}
	if c.GossipAddr != "" {
		if _, _, err := net.SplitHostPort(c.GossipAddr); err != nil {
			errs = append(errs, fmt.Errorf("GossipAddr %q: %w", c.GossipAddr, err))
		}
	}
	if c.BootstrapExpect < 0 {
		errs = append(errs, fmt.Errorf("BootstrapExpect is %d; it must be 0 or more", c.BootstrapExpect))
	}
	if c.BootstrapExpect > 0 && c.Bootstrap {
		errs = append(errs, errors.New("config fields Bootstrap (single server) and BootstrapExpect exclude each other"))
	}
	if (c.BootstrapExpect > 0 || len(c.Join) > 0 || c.ConsulAddr != "") && c.GossipAddr == "" {
		errs = append(errs, errors.New("config fields BootstrapExpect, Join and ConsulAddr need GossipAddr"))
	}
	if c.GossipAddr != "" && c.worksWithOthers() && len(c.GossipKeys) == 0 && !c.Insecure {
		errs = append(errs, errors.New("gossip between servers would be unencrypted, and anyone who reaches the gossip port could join the cluster and become a voter: "+
			"make a key with `drover operator gossip keyring generate > gossip.key` and give every server that file with -gossip-key-file, "+
			"or pass -insecure to gossip in the clear on a network no one else reaches"))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("config field Retention is %v; it must not be negative", c.Retention))
	}
	if c.ExportInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("ExportInterval is %v; it must be at least 10ms", c.ExportInterval))
	}
	if _, err := api.ParseCallbackAllow(c.CallbackAllow); err != nil {
		errs = append(errs, fmt.Errorf("CallbackAllow: %w", err))
	}
	if c.SLOInterval < time.Millisecond || c.SLOInterval > 24*time.Hour {
		errs = append(errs, fmt.Errorf("SLOInterval is %v; it must be between 1ms and 24h", c.SLOInterval))
	}
	if c.AutoApplyTick < time.Millisecond || c.AutoApplyTick > time.Hour {
		errs = append(errs, fmt.Errorf("AutoApplyTick is %v; it must be between 1ms and 1h", c.AutoApplyTick))
	}
	if c.SLOWindow < time.Hour || c.SLOWindow > 365*24*time.Hour {
		errs = append(errs, fmt.Errorf("SLOWindow is %v; it must be between 1h and 365 days", c.SLOWindow))
	}
	if c.QueueSampleInterval < time.Millisecond || c.QueueSampleInterval > time.Hour {
		errs = append(errs, fmt.Errorf("QueueSampleInterval is %v; it must be between 1ms and 1h", c.QueueSampleInterval))
	}
	if c.QueueUsageRetention < MinQueueUsageRetention || c.QueueUsageRetention > MaxQueueUsageRetention {
		errs = append(errs, fmt.Errorf("QueueUsageRetention (-queue-usage-retention) is %v; it must be between 24h (a day) and 87600h (ten years)", c.QueueUsageRetention))
	}
	if c.PreemptInterval < time.Millisecond || c.PreemptInterval > time.Hour {
		errs = append(errs, fmt.Errorf("PreemptInterval is %v; it must be between 1ms and 1h", c.PreemptInterval))
	}
	if c.CallbackRetry < time.Millisecond || c.CallbackRetry > time.Hour {
		errs = append(errs, fmt.Errorf("CallbackRetry is %v; it must be between 1ms and 1h", c.CallbackRetry))
	}
	if c.CallbackAttempts < 1 || c.CallbackAttempts > 20 {
		errs = append(errs, fmt.Errorf("CallbackAttempts is %d; it must be between 1 and 20", c.CallbackAttempts))
	}
	if c.BillingInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("BillingInterval is %v; it must be at least 10ms", c.BillingInterval))
	}
	if c.DefaultTokenTTL < time.Minute || c.DefaultTokenTTL > 10*365*24*time.Hour {
		errs = append(errs, fmt.Errorf("DefaultTokenTTL is %v; it must be between 1m and 87600h", c.DefaultTokenTTL))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("-tls-cert and -tls-key go together"))
	}
	if c.TLSCert != "" && c.CAFile == "" {
		errs = append(errs, errors.New("TLS needs -ca-file, the CA that signed the servers' certificates: Raft peers are verified against it"))
	}
	if c.TLSCert == "" && (c.CAFile != "" || c.TLSClientCA != "") {
		errs = append(errs, errors.New("-ca-file and -tls-ca need -tls-cert and -tls-key"))
	}
	if c.GossipAddr != "" && c.worksWithOthers() && c.TLSCert == "" && !c.Insecure {
		errs = append(errs, errors.New("servers that work together need the operator's CA: without -tls-cert a server runs Raft over mutual TLS with a CA of its own, which no other server's certificate comes from, "+
			"and serves its API in plain text, tokens and every job's command and environment readable on the wire: "+
			"make a CA with `drover tls ca create` (or sign with the one a server that ran alone made: run the next command in its <data-dir>/tls), "+
			"a certificate for each server with `drover tls cert create -server -id ID`, and start each server with -tls-cert, -tls-key and -ca-file, "+
			"or pass -insecure on a network no one else reaches (docs/operations.md, \"From one server to several\")"))
	}
	for i, k := range c.GossipKeys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			errs = append(errs, fmt.Errorf("GossipKeys[%d] is %d bytes; a gossip key is 16, 24 or 32", i, n))
		}
	}
	if c.DeadServerGrace < 0 {
		errs = append(errs, fmt.Errorf("DeadServerGrace is %v; it must not be negative", c.DeadServerGrace))
	}
	if c.AdminName == "" {
		errs = append(errs, errors.New("AdminName is required"))
	}
	if c.MaxPlacements <= 0 {
		errs = append(errs, fmt.Errorf("MaxPlacements is %d; it must be positive", c.MaxPlacements))
	}
	if c.ScheduleInterval <= 0 {
		errs = append(errs, fmt.Errorf("ScheduleInterval is %v; it must be positive", c.ScheduleInterval))
	}
	if c.MaxLostAttempts < 0 || c.MaxLostAttempts > 255 {
		errs = append(errs, fmt.Errorf("MaxLostAttempts is %d; it must be between 0 (no limit) and 255", c.MaxLostAttempts))
	}
	if c.LostTimeout < time.Second {
		errs = append(errs, fmt.Errorf("LostTimeout is %v; it must be at least 1s", c.LostTimeout))
	}
	if c.ClusterDownAfter <= 0 {
		errs = append(errs, fmt.Errorf("ClusterDownAfter is %v; it must be positive", c.ClusterDownAfter))
	}
	if c.UIStreamLife < time.Second {
		errs = append(errs, fmt.Errorf("UIStreamLife (%v) must be at least 1s", c.UIStreamLife))
	}
	if c.MaxSyncWait <= 0 || c.ApplyTimeout <= 0 {
		errs = append(errs, fmt.Errorf("MaxSyncWait (%v) and ApplyTimeout (%v) must be positive", c.MaxSyncWait, c.ApplyTimeout))
	}
	if c.HTTPReadTimeout <= 0 || c.HTTPIdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("HTTPReadTimeout (%v) and HTTPIdleTimeout (%v) must be positive", c.HTTPReadTimeout, c.HTTPIdleTimeout))
	}
	if c.HTTPWriteTimeout <= c.MaxSyncWait {
		errs = append(errs, fmt.Errorf("HTTPWriteTimeout (%v) must be longer than MaxSyncWait (%v), or held syncs would be cut off", c.HTTPWriteTimeout, c.MaxSyncWait))
	}
	if c.MaxJobsPerBatch < 1 || c.MaxJobsPerBatch > api.MaxJobsPerBatch {
		errs = append(errs, fmt.Errorf("MaxJobsPerBatch is %d; it must be between 1 and %d", c.MaxJobsPerBatch, int64(api.MaxJobsPerBatch)))
	}
	if c.MaxJobsPerUpdate < 1 || c.MaxJobsPerUpdate > api.MaxJobsPerBatch {
		errs = append(errs, fmt.Errorf("MaxJobsPerUpdate is %d; it must be between 1 and %d", c.MaxJobsPerUpdate, int64(api.MaxJobsPerBatch)))
	}
	if c.MaxQueuedJobsPerUser < 0 || c.MaxQueuedJobsPerBillingProject < 0 || c.MaxBatchesPerUser < 0 || c.MaxOpenUpdatesPerUser < 0 {
		errs = append(errs, fmt.Errorf("MaxQueuedJobsPerUser (%d), MaxQueuedJobsPerBillingProject (%d), MaxBatchesPerUser (%d) and MaxOpenUpdatesPerUser (%d) must not be negative (0: no limit)",
			c.MaxQueuedJobsPerUser, c.MaxQueuedJobsPerBillingProject, c.MaxBatchesPerUser, c.MaxOpenUpdatesPerUser))
	}
	if c.UpdateIdleTimeout < time.Second {
		errs = append(errs, fmt.Errorf("UpdateIdleTimeout is %v; it must be at least 1s", c.UpdateIdleTimeout))
	}
	if c.UserRequestsPerSecond < 0 || c.WorkerRequestsPerSecond < 0 || c.AnonymousRequestsPerSecond < 0 {
		errs = append(errs, fmt.Errorf("UserRequestsPerSecond (%g), WorkerRequestsPerSecond (%g) and AnonymousRequestsPerSecond (%g) must not be negative (0: no limit)",
			c.UserRequestsPerSecond, c.WorkerRequestsPerSecond, c.AnonymousRequestsPerSecond))
	}
	if c.MaxLogBytesPerAttempt < 1 {
		errs = append(errs, fmt.Errorf("MaxLogBytesPerAttempt is %d; it must be positive", c.MaxLogBytesPerAttempt))
	}
	if c.MaxLogBytesPerBatch < 0 {
		errs = append(errs, fmt.Errorf("MaxLogBytesPerBatch is %d; it must not be negative (0: no limit)", c.MaxLogBytesPerBatch))
	}
	if c.StateMemoryBudget < 0 {
		errs = append(errs, fmt.Errorf("StateMemoryBudget is %d; it must not be negative (0: no budget)", c.StateMemoryBudget))
	}
	if c.MaxEventsPerEntry <= 0 {
		errs = append(errs, fmt.Errorf("MaxEventsPerEntry is %d; it must be positive", c.MaxEventsPerEntry))
	}
	return errors.Join(errs...)
}

// worksWithOthers reports whether the server is configured to find other
// servers (a multi-server bootstrap, -join or Consul): Validate then
// demands a gossip key and TLS, or Insecure.
func (c *Config) worksWithOthers() bool {
	return c.BootstrapExpect > 1 || len(c.Join) > 0 || c.ConsulAddr != ""
}

// gossips reports whether the server listens for gossip: with a key, or
// with Insecure. Plain gossip lets anyone who reaches the port pose as a
// server, so a server that works alone and has no key does without it:
// nobody can join it, and -bootstrap-expect 1 bootstraps it on its own.
func (c *Config) gossips() bool {
	return c.GossipAddr != "" && (len(c.GossipKeys) > 0 || c.Insecure)
}

// bootstrapsAlone reports whether the server, with no Raft state yet,
// makes a single-server cluster of itself at start: asked to (Bootstrap),
// or expecting one server with no gossip to find it by.
func (c *Config) bootstrapsAlone() bool {
	return c.Bootstrap || (c.BootstrapExpect == 1 && !c.gossips())
}
