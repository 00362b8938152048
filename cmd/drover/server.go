package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/server/cluster"
)

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (m opsCmds) runServer(ctx context.Context, args []string) error {
	fs := m.newFlags("server", "[flags]")
	cfgFile := configFlag(fs)
	def := server.DefaultConfig()
	dataDir := fs.String("data-dir", "", "directory for the Raft log, snapshots, job logs, root.token and, without -tls-cert, tls/ (the CA and certificate the server makes for Raft's mutual TLS) (required)")
	nodeID := fs.String("node-id", "", "this server's Raft ID (default: generated once and kept in <data-dir>/node-id)")
	httpAddr := fs.String("http-addr", def.HTTPAddr, "address of the HTTP API")
	httpAdv := fs.String("http-advertise", "", "HTTP address other servers forward to (default: -http-addr)")
	raftAddr := fs.String("raft-addr", def.RaftAddr, "address Raft listens on, over mutual TLS (-tls-cert, or a CA the server makes in <data-dir>/tls); in plain text only with -insecure")
	raftAdv := fs.String("raft-advertise", "", "Raft address other servers dial (default: -raft-addr)")
	gossipAddr := fs.String("gossip-addr", "127.0.0.1:4652", "address for server gossip (hashicorp/memberlist); a server that works alone listens there only with -gossip-key-file or -insecure")
	gossipAdv := fs.String("gossip-advertise", "", "gossip address other servers use (default: -gossip-addr)")
	expect := fs.Int("bootstrap-expect", 0, "bootstrap a new cluster once this many servers see each other (3 or 5; 1 for a single server)")
	join := fs.String("join", "", "comma-separated gossip addresses of servers to join")
	consulAddr := fs.String("consul-addr", "", "Consul agent address: register as drover-server and join the servers found there")
	secretFile := fs.String("worker-secret-file", "", "file with the worker join secret: workers started by hand present it, and the autoscaler's machines' one-time join tokens are derived from it (required with -autoscale; workers with a secret are refused without one)")
	logStore := fs.String("log-store", "", "gocloud.dev/blob URL for job logs, shared by all servers (default: <data-dir>/logs on each server)")
	lost := fs.Duration("lost-timeout", def.LostTimeout, "retire a worker that has not synced for this long and re-run its jobs")
	uiStreamLife := fs.Duration("ui-stream-life", server.DefaultConfig().UIStreamLife, "how long a web UI page's live stream lasts before the browser reconnects (resuming where it was, with its session checked again)")
	grace := fs.Duration("dead-server-grace", def.DeadServerGrace, "remove a server gone this long from the Raft configuration")
	raftTimeout := fs.Duration("raft-timeout", 500*time.Millisecond, "Raft heartbeat and election timeout: how long a leader may be silent before others elect a new one (default: 500ms × -raft-multiplier)")
	multiplier := fs.Int("raft-multiplier", 1, "scale the timeouts that must outlast network delays (Raft heartbeat and election, gossip probes, -lost-timeout) for the network: 1 for one LAN, 5 for regions 30-150 ms apart (docs/operations.md, \"Servers in several regions\")")
	snapThreshold := fs.Uint64("raft-snapshot-threshold", def.SnapshotThreshold, "take a snapshot after this many new log entries")
	snapInterval := fs.Duration("raft-snapshot-interval", def.SnapshotInterval, "how often to check whether a snapshot is due")
	trailing := fs.Uint64("raft-trailing-logs", def.TrailingLogs, "log entries kept after a snapshot, so a briefly absent server catches up without one")
	readTimeout := fs.Duration("http-read-timeout", def.HTTPReadTimeout, "longest time to read one request, body included")
	writeTimeout := fs.Duration("http-write-timeout", def.HTTPWriteTimeout, "longest time to write one response (streamed logs and snapshots and forwarded requests are exempt)")
	idleTimeout := fs.Duration("http-idle-timeout", def.HTTPIdleTimeout, "close keep-alive connections idle this long")
	maxLost := fs.Int("max-lost-attempts", def.MaxLostAttempts, "end a job as error once it was lost with this many workers (0: no limit)")
	maxJobs := fs.Int64("max-jobs-per-batch", def.MaxJobsPerBatch, "refuse a batch that would hold more jobs than this")
	maxUpdate := fs.Int64("max-jobs-per-update", def.MaxJobsPerUpdate, "refuse an update (or a create request) adding more jobs than this")
	maxQueuedUser := fs.Int64("max-queued-jobs-per-user", def.MaxQueuedJobsPerUser, "refuse (429) submissions that would give one user more unfinished jobs than this (0: no limit)")
	maxQueuedProject := fs.Int64("max-queued-jobs-per-billing-project", def.MaxQueuedJobsPerBillingProject, "refuse (429) submissions that would give one billing project more unfinished jobs than this (0: no limit)")
	maxBatches := fs.Int64("max-batches-per-user", def.MaxBatchesPerUser, "refuse (429) a new running batch of a user who has this many not complete (0: no limit)")
	maxUpdates := fs.Int64("max-open-updates-per-user", def.MaxOpenUpdatesPerUser, "refuse (429) a new open update of a user who has this many (0: no limit)")
	updateIdle := fs.Duration("update-idle-timeout", def.UpdateIdleTimeout, "discard an open update that received no bunch or commit for this long")
	userRate := fs.Float64("max-requests-per-second-per-user", def.UserRequestsPerSecond, "answer 429 with Retry-After to a user token beyond this rate, per server (0: no limit)")
	workerRate := fs.Float64("max-requests-per-second-per-worker", def.WorkerRequestsPerSecond, "the same for a worker instance (0: no limit)")
	anonRate := fs.Float64("max-anonymous-requests-per-second", def.AnonymousRequestsPerSecond, "the same, per client address, for requests that fail to authenticate (0: no limit)")
	maxLog := fs.String("max-log-bytes-per-attempt", units.FormatBytes(def.MaxLogBytesPerAttempt), "cut an attempt's log, with a line saying so, past this much (e.g. 64MiB)")
	maxBatchLog := fs.String("max-log-bytes-per-batch", units.FormatBytes(def.MaxLogBytesPerBatch), "cut the logs of a batch past this much on this server (0: no limit; billing projects have quotas of their own: drover billing-project set-log-quota)")
	budget := fs.String("state-memory-budget", units.FormatBytes(def.StateMemoryBudget), "refuse submissions that would bring the jobs held in memory beyond this (e.g. 8GiB; 0: no budget)")
	gossipInterval := fs.Duration("gossip-interval", 0, "gossip probe interval (0: memberlist's LAN default, 1s)")
	gossipKeyFile := fs.String("gossip-key-file", "", "file of base64 gossip encryption keys, one a line, the first used to send (make one with 'drover operator gossip keyring generate'); needed by servers that gossip with others unless -insecure; without it a server alone does not gossip")
	secretsKeyFile := fs.String("secrets-key-file", "", "file of base64 keys sealing billing projects' storage credentials in the state, one a line, the first sealing (make one with 'drover operator secrets-key generate'); the same file on every server (default: <data-dir>/secrets.key, made at first start, for a single server; servers of several without one keep no credentials)")
	insecure := fs.Bool("insecure", false, "gossip, serve the API and talk Raft in the clear (a test, or a network no one else reaches): any process that reaches the Raft port can take the cluster, and the server warns so at every start")
	tlsCert := fs.String("tls-cert", "", "this server's certificate ('drover tls cert create -server -id ID'): the API serves HTTPS and Raft runs over mutual TLS with the -ca-file CA; needs -tls-key and -ca-file; needed by servers that work with others unless -insecure (without it Raft uses a CA the server makes in <data-dir>/tls)")
	tlsKey := fs.String("tls-key", "", "the key of -tls-cert")
	billingInterval := fs.Duration("billing-interval", def.BillingInterval, "how often the leader looks at every billing project's spend regardless (it cancels a project's open batches as the project reaches its spend limit, from the running prices it knows)")
	historyDSN := fs.String("history-dsn", "", "MySQL database for finished batches and the billing ledger, shared by all servers (user:password@tcp(host:3306)/drover); -history-dsn-file keeps the password off the command line (default: <data-dir>/history.db, for a single server)")
	historyDSNFile := fs.String("history-dsn-file", "", "file holding -history-dsn")
	retention := fs.Duration("retention", def.Retention, "how long a finished batch stays in memory once the history store holds it, and a retired worker instance once no batch in memory refers to it")
	exportInterval := fs.Duration("export-interval", def.ExportInterval, "how often the leader exports finished batches to the history store")
	tokenTTL := fs.Duration("token-ttl", def.DefaultTokenTTL, "how long a token lives when its maker does not say (a new user's first token too)")
	preemptEvery := fs.Duration("preempt-interval", def.PreemptInterval, "how often the leader decides whether queues that wait take capacity back (reclaim of guarantees, preemption for fair share)")
	sloWindow := fs.Duration("slo-window", def.SLOWindow, "the window of the SLO report the leader reads into its metrics (drover_workflow_slo_ratio, drover_tier_slo_successful_ratio), e.g. 720h")
	sloEvery := fs.Duration("slo-interval", def.SLOInterval, "how often the leader reads the SLO report into its metrics")
	sampleEvery := fs.Duration("queue-sample-interval", def.QueueSampleInterval, "how often the leader records what each queue in use holds in the history store (the data of drover queue recommend and queue slo)")
	sampleRetention := fs.Duration("queue-usage-retention", def.QueueUsageRetention, "how long the history store keeps the queue samples -queue-sample-interval records (24h to 87600h): the leader deletes older ones hourly, and drover queue recommend and queue slo look back at most this many whole days")
	var callbackAllow multiFlag
	fs.Var(&callbackAllow, "callback-allow", "a destination batches' completion callbacks may go to: an http(s) URL whose host and paths under it are allowed (repeatable; default: no callbacks)")
	metricsToken := fs.String("metrics-token", "", "bearer token /metrics requires (default: /metrics is open); -metrics-token-file keeps it off the command line")
	metricsTokenFile := fs.String("metrics-token-file", "", "file holding the bearer token /metrics requires")
	caFile := fs.String("ca-file", "", "the cluster's CA certificate ('drover tls ca create'): Raft peers and the servers requests are forwarded to must have certificates it signed")
	tlsClientCA := fs.String("tls-ca", "", "require a client certificate signed by this CA (or -ca-file) from every API caller")
	transLog := fs.String("debug-transition-log", "", "append every job state change to this file (for fault tests)")
	pprofOn := fs.Bool("debug-pprof", false, "serve Go profiles under /debug/pprof/ without a token (trusted networks only)")
	autoscale := fs.Bool("autoscale", false, "run the autoscaler while leading: make machines with the provider each cluster declares (gce: application default credentials; nomad: NOMAD_TOKEN)")
	deployment := fs.String("deployment", "drover", "with -autoscale: the label that marks this deployment's machines (distinct per deployment sharing a cloud project or Nomad cluster)")
	workerServers := fs.String("worker-servers", "", "with -autoscale: server addresses new machines' workers join (default: this server's -http-advertise)")
	autoscaleEvery := fs.Duration("autoscale-interval", 15*time.Second, "with -autoscale: time between the autoscaler's decisions")
	priceRefresh := fs.Duration("price-refresh", time.Hour, "with -autoscale: how often launch configs with price_from_cloud read the cloud's price (GCE: the Cloud Billing Catalog)")
	gcPercent := gcPercentFlag(fs, defaultGCPercent)
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logJSON := fs.Bool("log-json", false, "log as JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if err := applyConfigFile(fs, *cfgFile); err != nil {
		return err
	}
	if *dataDir == "" {
		return usagef("drover server needs -data-dir")
	}
	if err := setGCPercent(*gcPercent); err != nil {
		return err
	}
	timings, err := server.TimingsFor(*multiplier)
	if err != nil {
		return usagef("%v", err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["raft-timeout"] {
		*raftTimeout = timings.ElectionTimeout
	}
	if !set["lost-timeout"] {
		*lost = timings.LostTimeout
	}
	if !set["gossip-interval"] && *multiplier > 1 {
		*gossipInterval = timings.GossipInterval
	}
	if *raftTimeout < 50*time.Millisecond {
		return usagef("-raft-timeout %v is too short; use at least 50ms", *raftTimeout)
	}
	log, err := newLogger(m.Stderr, *logLevel, *logJSON)
	if err != nil {
		return err
	}
	cfg := def
	cfg.DataDir = *dataDir
	cfg.NodeID = *nodeID
	cfg.HTTPAddr = *httpAddr
	cfg.HTTPAdvertise = *httpAdv
	cfg.RaftAddr = *raftAddr
	cfg.RaftAdvertise = *raftAdv
	cfg.GossipAddr = *gossipAddr
	cfg.GossipAdvertise = *gossipAdv
	cfg.BootstrapExpect = *expect
	cfg.Join = splitList(*join)
	cfg.ConsulAddr = *consulAddr
	cfg.LogStoreURL = *logStore
	cfg.LostTimeout = *lost
	cfg.UIStreamLife = *uiStreamLife
	cfg.MaxLostAttempts = *maxLost
	cfg.DeadServerGrace = *grace
	cfg.HeartbeatTimeout = *raftTimeout
	cfg.ElectionTimeout = *raftTimeout
	cfg.LeaderLeaseTimeout = *raftTimeout / 2
	cfg.GossipInterval = *gossipInterval
	cfg.Insecure = *insecure
	cfg.SecretsKeyFile = *secretsKeyFile
	cfg.TLSCert, cfg.TLSKey, cfg.CAFile, cfg.TLSClientCA = *tlsCert, *tlsKey, *caFile, *tlsClientCA
	cfg.DefaultTokenTTL, cfg.MetricsToken, cfg.BillingInterval = *tokenTTL, *metricsToken, *billingInterval
	cfg.CallbackAllow = callbackAllow
	cfg.PreemptInterval = *preemptEvery
	cfg.QueueSampleInterval, cfg.QueueUsageRetention = *sampleEvery, *sampleRetention
	cfg.SLOWindow, cfg.SLOInterval = *sloWindow, *sloEvery
	cfg.HistoryDSN, cfg.Retention, cfg.ExportInterval = *historyDSN, *retention, *exportInterval
	if *historyDSNFile != "" {
		if *historyDSN != "" {
			return usagef("give -history-dsn or -history-dsn-file, not both")
		}
		if cfg.HistoryDSN, err = readSecretFile(*historyDSNFile, "history DSN"); err != nil {
			return err
		}
	}
	if *metricsTokenFile != "" {
		if *metricsToken != "" {
			return usagef("give -metrics-token or -metrics-token-file, not both")
		}
		if cfg.MetricsToken, err = readSecretFile(*metricsTokenFile, "metrics token"); err != nil {
			return err
		}
	}
	if *gossipKeyFile != "" {
		if cfg.GossipKeys, err = cluster.ReadGossipKeyFile(*gossipKeyFile); err != nil {
			return err
		}
	}
	cfg.SnapshotThreshold = *snapThreshold
	cfg.TrailingLogs = *trailing
	cfg.SnapshotInterval = *snapInterval
	cfg.TransitionLog = *transLog
	cfg.DebugPprof = *pprofOn
	cfg.HTTPReadTimeout, cfg.HTTPWriteTimeout, cfg.HTTPIdleTimeout = *readTimeout, *writeTimeout, *idleTimeout
	cfg.MaxJobsPerBatch = *maxJobs
	cfg.MaxJobsPerUpdate = *maxUpdate
	cfg.MaxQueuedJobsPerUser, cfg.MaxQueuedJobsPerBillingProject = *maxQueuedUser, *maxQueuedProject
	cfg.MaxBatchesPerUser, cfg.MaxOpenUpdatesPerUser, cfg.UpdateIdleTimeout = *maxBatches, *maxUpdates, *updateIdle
	cfg.UserRequestsPerSecond, cfg.WorkerRequestsPerSecond, cfg.AnonymousRequestsPerSecond = *userRate, *workerRate, *anonRate
	if cfg.StateMemoryBudget, err = parseBudget(*budget); err != nil {
		return usagef("-state-memory-budget: %v", err)
	}
	if cfg.MaxLogBytesPerAttempt, err = units.ParseBytes(*maxLog); err != nil {
		return usagef("-max-log-bytes-per-attempt: %v", err)
	}
	if cfg.MaxLogBytesPerBatch, err = units.ParseBytes(*maxBatchLog); err != nil {
		return usagef("-max-log-bytes-per-batch: %v", err)
	}
	cfg.Logger = log
	if *secretFile != "" {
		if cfg.WorkerSecret, err = readSecretFile(*secretFile, "worker secret"); err != nil {
			return err
		}
	} else {
		log.Warn("no -worker-secret-file: this server will refuse every worker")
	}
	if *autoscale {
		cfg.Autoscale = server.DefaultAutoscaleConfig()
		cfg.Autoscale.Deployment = *deployment
		cfg.Autoscale.Worker.Servers = *workerServers
		cfg.Autoscale.Factory = providerFactory(ctx, *deployment)
		cfg.Autoscale.Interval = *autoscaleEvery
		cfg.Autoscale.PriceRefresh = *priceRefresh
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	gossip := srv.GossipAddr()
	if gossip == "" {
		gossip = "none (a server alone without -gossip-key-file)"
	}
	safef(m.Stderr, "==> drover server %s: API %s, raft %s, gossip %s\n", srv.ID(), srv.HTTPAddr(), srv.RaftAddr(), gossip)
	// SIGHUP reads the certificates again (a rotation); the server logs
	// what it did.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-hup:
			if err := srv.ReloadTLS(); err != nil {
				safef(m.Stderr, "==> SIGHUP: %v\n", err)
			}
		}
	}
	fmt.Fprintln(m.Stderr, "==> stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// parseBudget reads a memory size such as 8GiB; "0" means no budget.
func parseBudget(s string) (int64, error) {
	if strings.TrimSpace(s) == "0" {
		return 0, nil
	}
	return units.ParseBytes(s)
}

// defaultGCPercent is the garbage collector's target for servers. A
// server's heap is mostly its state, which lives as long as its batches;
// Go's default (100: let the heap grow to twice what was live) mostly
// buys room the state never uses. At 60 the peak stays 1.6 times the live
// heap: in `bench sched` with 1,000,000 distinct jobs, peak RSS per server
// 500-625 MB instead of 560-750, for about 6% of throughput
// (docs/performance.md).
const defaultGCPercent = 60

func gcPercentFlag(fs *flag.FlagSet, def int) *int {
	return fs.Int("gc-percent", def, "garbage collector target: the heap may grow this many percent over what was live at the last collection (Go's GOGC; the GOGC environment variable wins)")
}

// setGCPercent applies -gc-percent unless GOGC is set in the environment.
func setGCPercent(p int) error {
	if p < 10 {
		return usagef("-gc-percent %d is too low; use 10 or more", p)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(p)
	}
	return nil
}
