package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-sched/drover/api"
	localprov "github.com/drover-sched/drover/autoscaler/provider/local"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/worker"
)

func (m opsCmds) runAgent(ctx context.Context, args []string) error {
	fs := m.newFlags("agent", "-dev [flags]")
	cfgFile := configFlag(fs)
	dev := fs.Bool("dev", false, "run a development agent: one server that bootstraps itself, plus local workers")
	dataDir := fs.String("data-dir", "", "directory for the Raft log, snapshots, job logs, root.token, worker.secret and api.addr (default: a new temporary directory)")
	httpAddr := fs.String("http-addr", "127.0.0.1:4650", "address of the HTTP API (port 0: any free port, written to <data-dir>/api.addr)")
	raftAddr := fs.String("raft-addr", "", "removed: the dev agent's Raft runs in memory and listens nowhere; giving it is an error")
	workers := fs.Int("workers", 2, "number of local worker processes")
	cores := fs.Float64("worker-cores", float64(runtime.NumCPU()), "cores each worker offers")
	memory := fs.String("worker-memory", "", "memory each worker offers, e.g. 8GiB (default: 2GiB per core)")
	clustersFlag := fs.String("clusters", "", "local workers in named regions and clusters instead of -workers: REGION/CLUSTER:WORKERSxCORES[/capacity=N],... (e.g. us-east1/a:2x8,us-west1/b:2x8); "+
		"with -autoscale, /capacity=N (1 to 100000) makes this machine a cloud that has room for only N of the cluster's workers at once: the autoscaler may ask for up to WORKERS, "+
		"is refused the rest for want of capacity and marks the launch config capacity-limited, as with a real cloud (e.g. us-east1/a:3x4/capacity=1)")
	lost := fs.Duration("lost-timeout", 30*time.Second, "retire a worker that has not synced for this long and re-run its jobs")
	uiStreamLife := fs.Duration("ui-stream-life", server.DefaultConfig().UIStreamLife, "how long a web UI page's live stream lasts before the browser reconnects (resuming where it was, with its session checked again)")
	autoscale := fs.Bool("autoscale", false, "start no worker: the autoscaler launches local workers for waiting jobs, up to -workers (or the -clusters counts) per cluster, and stops them when idle")
	idle := fs.Duration("idle-timeout", 30*time.Second, "with -autoscale: stop a worker that ran nothing for this long")
	isolation := fs.String("isolation", "auto", "the workers' job isolation: auto, full or none (see drover worker -help)")
	exampleRates := fs.Bool("example-rates", true, "with -dev, price compute, memory and the service fee at example rates when no rate is set (deliberately high, so a short demo costs cents rather than $0.00; set real ones with drover rate set)")
	fileRoots := fs.String("file-url-roots", "", "comma-separated directories the workers' jobs may name in file:// input and output URLs")
	registryAuth := fs.String("registry-auth", "", "Docker config.json with registry credentials for the workers' image pulls")
	var registryAllow multiFlag
	fs.Var(&registryAllow, "registry-allow", "where the workers' image pulls may connect although the host, loopback and link-local addresses are refused: a registry HOST[:PORT], an address or a CIDR (repeatable; see drover worker -help)")
	var insecure multiFlag
	fs.Var(&insecure, "insecure-registry", "a registry HOST[:PORT] the workers pull from over plain HTTP, and may reach (repeatable; see drover worker -help)")
	pullTimeout := fs.Duration("pull-timeout", 0, "how long the workers' image pulls may take (default: drover worker's)")
	jobUIDs := fs.String("job-uids", "", "user IDs the workers' jobs run as, FIRST-LAST (default: drover worker's)")
	var writable multiFlag
	fs.Var(&writable, "job-writable-dir", "a host directory the workers' isolated jobs may write (repeatable; see drover worker -help)")
	retention := fs.Duration("retention", server.DefaultConfig().Retention, "how long a finished batch stays in memory once the history store (<data-dir>/history.db, or -history-dsn) holds it, and a retired worker instance once no batch in memory refers to it")
	historyDSN := fs.String("history-dsn", "", "MySQL database for finished batches and the billing ledger (default: <data-dir>/history.db)")
	sampleEvery := fs.Duration("queue-sample-interval", server.DefaultConfig().QueueSampleInterval, "how often the leader records what each queue in use holds (the data of drover queue recommend and queue report; as drover server's)")
	sampleRetention := fs.Duration("queue-usage-retention", server.DefaultConfig().QueueUsageRetention, "how long the history store keeps the queue samples drover queue recommend and queue slo read (24h to 87600h; as drover server's)")
	var callbackAllow multiFlag
	fs.Var(&callbackAllow, "callback-allow", "a destination batches' completion callbacks may go to: an http(s) URL whose host and paths under it are allowed (repeatable; default: no callbacks; as drover server's)")
	gcPercent := gcPercentFlag(fs, defaultGCPercent)
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logJSON := fs.Bool("log-json", false, "log as JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if err := applyConfigFile(fs, *cfgFile); err != nil {
		return err
	}
	if err := setGCPercent(*gcPercent); err != nil {
		return err
	}
	if !*dev {
		return usagef("drover agent needs -dev; for a production cluster run 'drover server' and 'drover worker' (see docs/operations.md)")
	}
	if *raftAddr != "" {
		return usagef("-raft-addr is gone: the dev agent's single server runs Raft in memory, with no listener a job could write to its log through; " +
			"a server that listens for Raft (over mutual TLS) is `drover server` (see docs/operations.md)")
	}
	if *workers < 0 {
		return usagef("-workers is %d; it must be 0 or more", *workers)
	}
	if *cores <= 0 {
		return usagef("-worker-cores is %g; it must be positive", *cores)
	}
	layout := []devCluster{{workers: *workers, cores: *cores}}
	if *clustersFlag != "" {
		var err error
		if layout, err = parseDevClusters(*clustersFlag); err != nil {
			return usagef("-clusters: %v", err)
		}
	}
	for _, dc := range layout {
		if dc.capacity > 0 && !*autoscale {
			return usagef("-clusters: %s/%s has a capacity; a capacity is what the local cloud gives the autoscaler, so it needs -autoscale (without it, the agent starts every worker itself)",
				dc.region, dc.cluster)
		}
	}
	memBytes := worker.DefaultMemory(*cores)
	if *memory != "" {
		n, err := units.ParseBytes(*memory)
		if err != nil {
			return usagef("-worker-memory: %v", err)
		}
		memBytes = n
	}
	log, err := newLogger(m.Stderr, *logLevel, *logJSON)
	if err != nil {
		return err
	}
	if *dataDir == "" {
		if *dataDir, err = os.MkdirTemp("", "drover-dev-"); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
	}
	if *dataDir, err = filepath.Abs(*dataDir); err != nil {
		return err
	}
	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	// It holds root.token and the worker secret: no job may look inside.
	if err := os.Chmod(*dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	workerFlags := []string{"-isolation", *isolation}
	if *fileRoots != "" {
		workerFlags = append(workerFlags, "-file-url-roots", *fileRoots)
	}
	if *registryAuth != "" {
		workerFlags = append(workerFlags, "-registry-auth", *registryAuth)
	}
	for _, a := range registryAllow {
		workerFlags = append(workerFlags, "-registry-allow", a)
	}
	for _, h := range insecure {
		workerFlags = append(workerFlags, "-insecure-registry", h)
	}
	if *pullTimeout > 0 {
		workerFlags = append(workerFlags, "-pull-timeout", pullTimeout.String())
	}
	if *jobUIDs != "" {
		workerFlags = append(workerFlags, "-job-uids", *jobUIDs)
	}
	for _, d := range writable {
		workerFlags = append(workerFlags, "-job-writable-dir", d)
	}
	secretFile := filepath.Join(*dataDir, "worker.secret")
	secret, err := ensureSecret(secretFile)
	if err != nil {
		return err
	}

	cfg := server.DefaultConfig()
	cfg.DataDir = *dataDir
	cfg.HTTPAddr = *httpAddr
	cfg.RaftAddr = "" // Raft in memory: no listener
	cfg.Bootstrap = true
	cfg.WorkerSecret = secret
	cfg.LostTimeout = *lost
	cfg.UIStreamLife = *uiStreamLife
	cfg.Retention, cfg.HistoryDSN, cfg.QueueUsageRetention = *retention, *historyDSN, *sampleRetention
	cfg.QueueSampleInterval = *sampleEvery
	cfg.CallbackAllow = callbackAllow
	// One voter: elect it quickly.
	cfg.HeartbeatTimeout = 300 * time.Millisecond
	cfg.ElectionTimeout = 300 * time.Millisecond
	cfg.LeaderLeaseTimeout = 150 * time.Millisecond
	cfg.Logger = log
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable to start workers: %w", err)
	}
	var local *localprov.Local
	if *autoscale {
		local = localprov.New(localprov.Options{Binary: self, Dir: filepath.Join(*dataDir, "machines"), Output: m.Stderr,
			Args: append([]string{"-log-level", *logLevel}, workerFlags...), Logger: log.With("component", "local-provider")})
		cfg.Autoscale = server.DefaultAutoscaleConfig()
		cfg.Autoscale.Provider = local
		cfg.Autoscale.Interval = 2 * time.Second
		cfg.Autoscale.MissingGrace = 10 * time.Second
		// The machines join with one-time tokens, not the secret.
		cfg.Autoscale.Deployment = "dev"
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if local != nil {
		// Before the server stops (deferred calls run last first).
		defer local.Stop()
	}
	apiAddr := "http://" + srv.HTTPAddr()
	// Scripts that let the agent pick a port (-http-addr 127.0.0.1:0) read
	// the address from here.
	if err := os.WriteFile(filepath.Join(*dataDir, "api.addr"), []byte(apiAddr+"\n"), 0o644); err != nil {
		return fmt.Errorf("write api.addr: %w", err)
	}
	tokenFile := filepath.Join(*dataDir, "root.token")
	if err := waitReady(ctx, srv, tokenFile, 60*time.Second); err != nil {
		return err
	}

	if err := devStorage(ctx, apiAddr, tokenFile, *fileRoots); err != nil {
		return err
	}
	if *exampleRates {
		set, err := devRates(ctx, apiAddr, tokenFile)
		if err != nil {
			return err
		}
		if set {
			safef(m.Stderr, "==> example rates set (not any cloud's prices; high so a demo costs cents): compute $36/core-hour, memory $2/GiB-hour, service-fee $0.36/core-hour; change them with drover rate set\n")
		}
	}
	if *autoscale {
		if err := devAutoscaler(ctx, apiAddr, tokenFile, layout, memBytes, *memory == "", *idle); err != nil {
			return err
		}
		safef(m.Stderr, `==> drover dev agent running, autoscaling
    API:         %s (plain HTTP: %s)
    Data dir:    %s
    Admin token: %s
    Web UI:      %s/ui/ (log in with the admin token)
    Workers:     none yet; launched for waiting jobs, stopped after %s idle (drover autoscaler status)
  Use it with:
    export DROVER_ADDR=%s DROVER_TOKEN=$(cat %s)
`, apiAddr, plainNote(srv.HTTPAddr()), *dataDir, tokenFile, apiAddr, *idle, apiAddr, tokenFile)
		<-ctx.Done()
		fmt.Fprintln(m.Stderr, "==> stopping: workers first, then the server")
		return nil
	}
	host, _ := os.Hostname()
	host = strings.Split(host, ".")[0]
	var wg sync.WaitGroup
	i := 0
	var summary []string
	for _, dc := range layout {
		wmem := memBytes
		if *memory == "" {
			wmem = worker.DefaultMemory(dc.cores)
		}
		if dc.cluster != "" {
			summary = append(summary, fmt.Sprintf("%s/%s: %d x %g cores", dc.region, dc.cluster, dc.workers, dc.cores))
		}
		for k := 0; k < dc.workers; k++ {
			i++
			name := fmt.Sprintf("%s-worker-%d", host, i)
			if dc.cluster != "" {
				name = fmt.Sprintf("%s-%s-%d", host, dc.cluster, k+1)
			}
			wargs := []string{
				"worker",
				"-servers", apiAddr,
				"-name", name,
				"-cores", strconv.FormatFloat(dc.cores, 'f', -1, 64),
				"-memory", strconv.FormatInt(wmem, 10) + "B",
				"-data-dir", filepath.Join(*dataDir, "workers", strconv.Itoa(i)),
				"-worker-secret-file", secretFile,
				"-log-level", *logLevel,
				"-parent-pid", strconv.Itoa(os.Getpid()),
			}
			wargs = append(wargs, workerFlags...)
			if dc.cluster != "" {
				wargs = append(wargs, "-region", dc.region, "-cluster", dc.cluster)
			}
			if *logJSON {
				wargs = append(wargs, "-log-json")
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.superviseWorker(ctx, log.With("worker", name), self, wargs)
			}()
		}
	}
	workersLine := fmt.Sprintf("%d x %g cores, %s each", *workers, *cores, units.FormatBytes(memBytes))
	if len(summary) > 0 {
		workersLine = strings.Join(summary, "; ")
	}
	safef(m.Stderr, `==> drover dev agent running
    API:         %s (plain HTTP: %s)
    Data dir:    %s
    Admin token: %s
    Web UI:      %s/ui/ (log in with the admin token)
    Workers:     %s
  Use it with:
    export DROVER_ADDR=%s DROVER_TOKEN=$(cat %s)
`, apiAddr, plainNote(srv.HTTPAddr()), *dataDir, tokenFile, apiAddr, workersLine, apiAddr, tokenFile)
	<-ctx.Done()
	fmt.Fprintln(m.Stderr, "==> stopping: workers first, then the server")
	wg.Wait()
	return nil
}

// superviseWorker runs a worker process and restarts it when it exits, until
// ctx ends; then it stops it with SIGTERM (SIGKILL after 15s).
func (m opsCmds) superviseWorker(ctx context.Context, log *slog.Logger, self string, args []string) {
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		cmd := exec.Command(self, args...)
		cmd.Stdout = m.Stderr
		cmd.Stderr = m.Stderr
		// Own process group: a terminal's Ctrl-C reaches the agent, which
		// stops workers in order. Pdeathsig: a killed agent takes its
		// workers with it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		started := time.Now()
		if err := cmd.Start(); err != nil {
			log.Error("start worker", "err", err)
		} else {
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if ctx.Err() == nil {
					log.Warn("worker exited; restarting it", "err", err, "in", backoff)
				}
			case <-ctx.Done():
				_ = cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-done:
				case <-time.After(15 * time.Second):
					_ = cmd.Process.Kill()
					<-done
				}
				return
			}
		}
		if time.Since(started) > time.Minute {
			backoff = 500 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// ensureSecret reads the worker join secret, creating it if missing.
func ensureSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read worker secret: %w", err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	s := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write worker secret: %w", err)
	}
	return s, nil
}

// waitReady waits until the server has replayed its log and the admin
// exists. A data dir whose root.token was deleted still starts, with a
// warning.
func waitReady(ctx context.Context, srv *server.Server, tokenFile string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if srv.Ready() && srv.State().HasUsers() {
			_, err := os.Stat(tokenFile)
			if err == nil {
				return nil
			}
			// The server writes the token to a temporary file, commits
			// the admin, then renames the file: the state can have the
			// admin a moment before the file is there.
			if _, tmpErr := os.Stat(tokenFile + ".tmp"); tmpErr != nil {
				srv.Logger().Warn("the admin token file is missing; use a token you kept", "path", tokenFile)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent's server was not ready within %s (see the log above)", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readSecretFile reads a secret (what names it in errors) from a file.
func readSecretFile(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s file %s is empty", what, path)
	}
	return s, nil
}

// parentWatch cancels when the parent process is gone (the agent died in a
// way Pdeathsig did not cover).
func parentWatch(ctx context.Context, pid int, cancel context.CancelFunc) {
	if pid <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != pid {
					cancel()
					return
				}
			}
		}
	}()
}

// devCluster is one entry of the dev agent's -clusters flag.
type devCluster struct {
	region, cluster string
	workers         int
	cores           float64
	// capacity: the local provider runs at most this many of the
	// cluster's workers at once (0: no limit).
	capacity int
}

// maxDevCapacity bounds a -clusters capacity, as the API bounds a launch
// config's.
const maxDevCapacity = 100_000

// parseDevClusters reads REGION/CLUSTER:WORKERSxCORES[/capacity=N],...
func parseDevClusters(s string) ([]devCluster, error) {
	var out []devCluster
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		where, size, ok := strings.Cut(strings.TrimSpace(item), ":")
		region, cluster, ok2 := strings.Cut(where, "/")
		size, capText, hasCap := strings.Cut(size, "/")
		n, c, ok3 := strings.Cut(size, "x")
		if !ok || !ok2 || !ok3 {
			return nil, fmt.Errorf("%q: write REGION/CLUSTER:WORKERSxCORES[/capacity=N], as in us-east1/a:2x8 or us-east1/a:3x4/capacity=1", item)
		}
		capacity := 0
		if hasCap {
			v, found := strings.CutPrefix(capText, "capacity=")
			var err error
			if capacity, err = strconv.Atoi(v); !found || err != nil || capacity < 1 || capacity > maxDevCapacity {
				return nil, fmt.Errorf("%q: after the size comes /capacity=N, N from 1 to %d (leave it out for no limit), as in us-east1/a:3x4/capacity=1", item, maxDevCapacity)
			}
		}
		workers, err := strconv.Atoi(n)
		if err != nil || workers < 0 || workers > 64 {
			return nil, fmt.Errorf("%q: the number of workers is 0 to 64", item)
		}
		cores, err := strconv.ParseFloat(c, 64)
		if err != nil || cores <= 0 || cores > 4096 {
			return nil, fmt.Errorf("%q: the cores per worker are more than 0 and at most 4096", item)
		}
		for what, name := range map[string]string{"region": region, "cluster": cluster} {
			if err := api.ValidatePlaceName(what, name); err != nil {
				return nil, fmt.Errorf("%q: %v", item, err)
			}
		}
		if seen[cluster] {
			return nil, fmt.Errorf("cluster %s is named twice", cluster)
		}
		seen[cluster] = true
		out = append(out, devCluster{region: region, cluster: cluster, workers: workers, cores: cores, capacity: capacity})
	}
	return out, nil
}

// devAutoscaler declares the dev agent's autoscaler unless launch configs
// exist already (a restarted agent keeps what was declared): one local
// launch config per cluster of the layout, capped at its workers and
// held to its capacity, with a nominal price so the spend figures mean
// something.
func devAutoscaler(ctx context.Context, apiAddr, tokenFile string, layout []devCluster, memBytes int64, memPerCore bool, idle time.Duration) error {
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return fmt.Errorf("read the admin token: %w", err)
	}
	cl := api.NewClient(apiAddr, strings.TrimSpace(string(tok)))
	if st, err := cl.AutoscalerStatus(ctx); err == nil && len(st.LaunchConfigs) > 0 {
		return nil
	}
	cfg := &api.PlacementConfig{Autoscaler: &api.AutoscalerSettings{Enabled: true, IdleTimeout: idle.String(), BootTimeout: "1m", LameTimeout: "1m",
		Window: "1m", Backoff: "30s", MaxAddsPerMinute: 30, MaxRemovesPerMinute: 30}}
	var nodes int64
	for _, dc := range layout {
		region, cluster := dc.region, dc.cluster
		if cluster == "" {
			region, cluster = "default", "default"
		}
		mem := memBytes
		if memPerCore {
			mem = worker.DefaultMemory(dc.cores)
		}
		cfg.Clusters = append(cfg.Clusters, api.ClusterDecl{Name: cluster, Region: region})
		cfg.LaunchConfigs = append(cfg.LaunchConfigs, api.LaunchConfig{Name: "local-" + cluster, Cluster: cluster, MachineType: fmt.Sprintf("local-%gc", dc.cores),
			Zone: "local", CPU: dc.cores, Memory: mem, PricePerHour: money.RateFromDollars(0.04 * dc.cores), MaxNodes: int64(dc.workers), Capacity: int64(dc.capacity)})
		nodes += int64(dc.workers)
	}
	cfg.Autoscaler.MaxNodes = nodes
	if err := cl.ApplyPlacement(ctx, cfg); err != nil {
		return fmt.Errorf("declare the dev autoscaler: %w", err)
	}
	return nil
}

// devStorage gives the dev agent's default billing project a storage
// prefix for each of its -file-url-roots (the bucket root `make demo` and
// the examples use), unless it has one: jobs read and write only under
// their project's prefixes.
func devStorage(ctx context.Context, apiAddr, tokenFile, roots string) error {
	if roots == "" {
		return nil
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return fmt.Errorf("read the admin token: %w", err)
	}
	cl := api.NewClient(apiAddr, strings.TrimSpace(string(tok)))
	have, err := cl.ListStoragePrefixes(ctx, server.DefaultConfig().DefaultBillingProject)
	if err != nil {
		return fmt.Errorf("the default billing project's storage: %w", err)
	}
	for _, root := range strings.Split(roots, ",") {
		abs, err := filepath.Abs(strings.TrimSpace(root))
		if err != nil {
			return fmt.Errorf("-file-url-roots %s: %w", root, err)
		}
		prefix, err := api.CleanStoragePrefix("file://" + abs)
		if err != nil {
			return fmt.Errorf("-file-url-roots %s: %w", root, err)
		}
		if slices.ContainsFunc(have, func(p api.StoragePrefix) bool { return p.Prefix == prefix }) {
			continue
		}
		if _, err := cl.AddStoragePrefix(ctx, server.DefaultConfig().DefaultBillingProject, &api.AddStoragePrefixRequest{Prefix: prefix}); err != nil {
			return fmt.Errorf("give the default billing project the storage prefix %s: %w", prefix, err)
		}
	}
	return nil
}

// plainNote says what the dev agent's plain HTTP means where it listens:
// the agent has no TLS, which is right on loopback and nowhere else.
func plainNote(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return "loopback only, for this machine; servers others reach use TLS, see docs/operations.md"
	}
	return "WARNING: not loopback, so tokens cross the network in clear; run servers with -tls-cert for that (docs/operations.md)"
}

// ExampleRates are the dev agent's rates when none is set: examples, not
// any cloud's prices, and high on purpose (a core-second costs a cent) so
// that a demo whose jobs run for seconds shows costs in cents, not $0.00.
var ExampleRates = []api.NewRate{
	{Resource: "compute", PricePerHour: 36 * money.DollarPerHour},
	{Resource: "memory", PricePerHour: 2 * money.DollarPerHour},
	{Resource: "service-fee", PricePerHour: 3600 * money.CentPerHour / 100},
}

// devRates sets ExampleRates on a dev agent that has no rate yet, and
// says whether it did.
func devRates(ctx context.Context, apiAddr, tokenFile string) (bool, error) {
	tok, err := os.ReadFile(tokenFile)
	if os.IsNotExist(err) {
		return false, nil // a data dir whose token file was deleted: no rates set for it
	}
	if err != nil {
		return false, fmt.Errorf("read the admin token: %w", err)
	}
	cl := api.NewClient(apiAddr, strings.TrimSpace(string(tok)))
	have, err := cl.Rates(ctx, true)
	if err != nil {
		return false, fmt.Errorf("read the rates: %w", err)
	}
	if len(have) > 0 {
		return false, nil
	}
	if _, err := cl.SetRates(ctx, ExampleRates); err != nil {
		return false, fmt.Errorf("set the example rates: %w", err)
	}
	return true, nil
}
