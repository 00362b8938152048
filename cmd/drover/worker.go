package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/worker"
)

// workerGCPercent is the garbage collector's target for workers. A
// worker's live heap is small (its running attempts: some 15 MB with 64
// running), and what it allocates lives for one job: at Go's default a
// worker starting hundreds of small jobs a second collected every second
// or so, at 400 every few seconds, for some 30 MB more.
const workerGCPercent = 400

func (m opsCmds) runWorker(ctx context.Context, args []string) error {
	fs := m.newFlags("worker", "[flags]")
	cfgFile := configFlag(fs)
	gcPercent := gcPercentFlag(fs, workerGCPercent)
	defaultServers := os.Getenv("DROVER_ADDR")
	if defaultServers == "" {
		defaultServers = api.DefaultAddr
	}
	host, _ := os.Hostname()
	servers := fs.String("servers", defaultServers, "comma-separated server addresses (any server; the worker moves on when one fails)")
	name := fs.String("name", strings.Split(host, ".")[0], "a label for this worker in listings; several may share one (the servers know a worker by the node ID in its -data-dir)")
	cores := fs.Float64("cores", float64(runtime.NumCPU()), "cores offered to jobs")
	memory := fs.String("memory", "", "memory offered to jobs, e.g. 16GiB (default: 2GiB per core)")
	dataDir := fs.String("data-dir", "", "the worker's own directory: its node ID (how the servers know it across restarts: never copy it to another worker), its instance token, image cache and container state; made 0700, it must be the worker's user's, and only root or that user may change the directories above it (default: /var/lib/drover-worker-<name> as root, else $XDG_STATE_HOME/drover/worker-<name>, i.e. ~/.local/state/drover/worker-<name>)")
	secretFile := fs.String("worker-secret-file", "", "file holding the cluster's worker join secret, for a worker an operator starts (required unless DROVER_WORKER_SECRET holds it, or the worker joins with a join token)")
	joinTokenFile := fs.String("join-token-file", "", "file holding the one-time join token the autoscaler gave this machine (with -machine; set by the provider that launched it; default $"+provider.JoinTokenEnv+")")
	caFile := fs.String("ca-file", os.Getenv("DROVER_CACERT"), "the cluster's CA certificate: servers are reached over HTTPS and verified against it (default $DROVER_CACERT)")
	tlsCert := fs.String("tls-cert", "", "this worker's certificate ('drover tls cert create -worker'), sent when the servers require client certificates")
	tlsKey := fs.String("tls-key", "", "the key of -tls-cert")
	syncWait := fs.Duration("sync-wait", 20*time.Second, "how long the server may hold a sync open")
	killGrace := fs.Duration("kill-grace", 5*time.Second, "time between SIGTERM and SIGKILL when a job is stopped")
	keep := fs.Bool("keep-work-dirs", false, "keep jobs' working directories after they end, as <jobs dir>/<node>/kept/BATCH-JOB-ATTEMPT (reached by the worker's user only)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logJSON := fs.Bool("log-json", false, "log as JSON")
	parentPID := fs.Int("parent-pid", 0, "exit when this process is no longer the parent (set by the dev agent)")
	region := fs.String("region", "", `region this worker is in (default "default")`)
	cluster := fs.String("cluster", "", `cluster this worker is in; a cluster belongs to one region (default "default")`)
	pool := fs.String("pool", "", `pool (machine class) of its cluster this worker is in (default "default")`)
	var labels multiFlag
	fs.Var(&labels, "label", "free-form label KEY=VALUE (repeatable)")
	gpus := fs.String("gpus", "", "GPUs offered to jobs, as TYPE:COUNT (e.g. a100:4); a worker has one GPU type")
	machine := fs.String("machine", "", "the autoscaler's name for this machine (set by the provider that launched it)")
	def := worker.DefaultConfig()
	isolation := fs.String("isolation", def.Isolation, "auto, full or none: full runs each job as a user of its own in a cgroup of its own (CPU and memory enforced and measured), which needs root; none runs jobs as this user, unlimited; auto is full when run as root")
	jobsDir := fs.String("jobs-dir", "", "directory for the jobs' own directories (in a directory for each worker), outside -data-dir (default /var/lib/drover-jobs as root, else under the system temp dir)")
	jobUIDs := fs.String("job-uids", fmt.Sprintf("%d-%d", def.JobUIDFirst, def.JobUIDFirst+def.JobUIDCount-1), "user IDs jobs run as, FIRST-LAST; shared with the host's other workers through -uid-lease-dir")
	uidLeases := fs.String("uid-lease-dir", def.UIDLeaseDir, "directory where the host's workers lease job user IDs")
	cgroupParent := fs.String("cgroup-parent", "", "cgroup the jobs' cgroups go under (default drover/NODE)")
	maxProcs := fs.Int64("max-processes", def.MaxProcesses, "processes and threads a job may have at once when it names no max_processes (enforced with the pids controller)")
	bridgeSubnets := fs.String("bridge-subnets", def.BridgeSubnets.String(), `IPv4 addresses of the jobs on the host's workers' bridges (network = "bridge"): each worker leases a block of them, host-wide, through -network-lease-dir`)
	bridgeBlock := fs.Int("bridge-block", def.BridgeBlock, "prefix length of one worker's block of -bridge-subnets (22: 1,021 jobs at once)")
	var bridgeDeny multiFlag
	fs.Var(&bridgeDeny, "bridge-deny", "a destination CIDR jobs on the bridge may not reach, besides the host's own addresses, the servers' and 169.254.0.0/16 (repeatable)")
	netLeases := fs.String("network-lease-dir", def.NetworkLeaseDir, "directory where the host's workers lease their bridges' blocks")
	jobResolv := fs.String("job-resolv-conf", "", "resolv.conf the jobs see (default: the host's, or systemd-resolved's upstream servers when the host's are on loopback); port 53 of its nameservers stays open to jobs on the bridge")
	runc := fs.String("runc", def.Runc, "runc binary for container jobs")
	imageDir := fs.String("image-dir", "", "image layer cache (default DATA-DIR/images)")
	imageCache := fs.String("image-cache", units.FormatBytes(def.ImageCacheBytes), "image cache size limit; least recently used layers go first")
	registryAuth := fs.String("registry-auth", "", "Docker config.json with registry credentials (default ~/.docker/config.json or DOCKER_CONFIG)")
	var writable multiFlag
	fs.Var(&writable, "job-writable-dir", "a host directory isolated jobs may write, such as a shared scratch file system (repeatable); every job of the host shares it. Otherwise a job sees the host read-only but for its own directory and its private /tmp, /var/tmp and /dev/shm")
	var registryAllow multiFlag
	fs.Var(&registryAllow, "registry-allow", "where image pulls may connect although the rule refuses it (the host's own, loopback and link-local addresses, the servers', -bridge-deny): a registry HOST[:PORT] by name, an address or a CIDR (repeatable). A pull is the worker's act for a reference a job chose: otherwise it reaches no more than a job's network does")
	pullTimeout := fs.Duration("pull-timeout", def.PullTimeout, "how long an image pull may take; its time is the attempt's, billed from the attempt's reservation")
	var insecure multiFlag
	fs.Var(&insecure, "insecure-registry", "registry HOST[:PORT] pulled from over plain HTTP, and allowed as -registry-allow allows it (repeatable; localhost always is plain HTTP, but refused without -registry-allow)")
	fileRoots := fs.String("file-url-roots", "", "comma-separated directories that file:// input and output URLs may name (default: none; file:// URLs are refused)")
	usageInterval := fs.Duration("usage-interval", def.UsageReportInterval, "how often a running job's usage is reported")
	spotNotice := fs.String("spot-notice", "", "URL polled for the cloud's notice that this machine is being taken back (GCE: http://metadata.google.internal/computeMetadata/v1/instance/preempted); on it, as on SIGTERM, running jobs are preempted")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if err := applyConfigFile(fs, *cfgFile); err != nil {
		return err
	}
	if err := setGCPercent(*gcPercent); err != nil {
		return err
	}
	secret, joinToken, err := workerCredential(*secretFile, *joinTokenFile, *machine)
	if err != nil {
		return err
	}
	memBytes := worker.DefaultMemory(*cores)
	if *memory != "" {
		if memBytes, err = units.ParseBytes(*memory); err != nil {
			return usagef("-memory: %v", err)
		}
	}
	if *dataDir == "" {
		if *dataDir, err = worker.DefaultDataDir(*name); err != nil {
			return usagef("%v", err)
		}
	}
	log, err := newLogger(m.Stderr, *logLevel, *logJSON)
	if err != nil {
		return err
	}
	cfg := worker.DefaultConfig()
	cfg.Servers = strings.Split(*servers, ",")
	cfg.Name = *name
	cfg.CPU = *cores
	cfg.Memory = memBytes
	cfg.DataDir = *dataDir
	cfg.Secret, cfg.JoinToken = secret, joinToken
	cfg.SyncWait = *syncWait
	cfg.KillGrace = *killGrace
	cfg.KeepWorkDirs = *keep
	cfg.JobWritableDirs = writable
	cfg.RegistryAllow, cfg.PullTimeout = registryAllow, *pullTimeout
	cfg.Region, cfg.Cluster, cfg.Pool, cfg.Machine = *region, *cluster, *pool, *machine
	if *gpus != "" {
		typ, n, ok := strings.Cut(*gpus, ":")
		count, err := strconv.Atoi(n)
		if !ok || typ == "" || err != nil || count < 1 {
			return usagef("-gpus %q: write TYPE:COUNT, as in a100:4", *gpus)
		}
		cfg.GPUType, cfg.GPUs = typ, count
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return usagef("-label %q: write KEY=VALUE", l)
		}
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		cfg.Labels[k] = v
	}
	cfg.Isolation, cfg.JobsDir, cfg.UIDLeaseDir, cfg.CgroupParent = *isolation, *jobsDir, *uidLeases, *cgroupParent
	first, last, ok := strings.Cut(*jobUIDs, "-")
	f, err1 := strconv.Atoi(first)
	l, err2 := strconv.Atoi(last)
	if !ok || err1 != nil || err2 != nil || l < f {
		return usagef("-job-uids %q: write FIRST-LAST, as in 200000-265535", *jobUIDs)
	}
	cfg.JobUIDFirst, cfg.JobUIDCount = f, l-f+1
	cfg.MaxProcesses, cfg.BridgeBlock, cfg.NetworkLeaseDir, cfg.JobResolvConf = *maxProcs, *bridgeBlock, *netLeases, *jobResolv
	if cfg.BridgeSubnets, err = netip.ParsePrefix(*bridgeSubnets); err != nil {
		return usagef("-bridge-subnets %q: write a CIDR, as in 172.23.0.0/16", *bridgeSubnets)
	}
	for _, d := range bridgeDeny {
		p, err := netip.ParsePrefix(d)
		if err != nil {
			return usagef("-bridge-deny %q: write a CIDR, as in 10.0.0.0/8", d)
		}
		cfg.BridgeDeny = append(cfg.BridgeDeny, p)
	}
	cfg.Runc, cfg.ImageDir, cfg.RegistryAuthFile, cfg.InsecureRegistries = *runc, *imageDir, *registryAuth, insecure
	if cfg.ImageCacheBytes, err = units.ParseBytes(*imageCache); err != nil {
		return usagef("-image-cache: %v", err)
	}
	if *fileRoots != "" {
		cfg.FileURLRoots = strings.Split(*fileRoots, ",")
	}
	cfg.UsageReportInterval, cfg.SpotNoticeURL = *usageInterval, *spotNotice
	if *caFile != "" {
		if cfg.TLS, err = api.TLSConfig(*caFile, *tlsCert, *tlsKey); err != nil {
			return err
		}
	} else if *tlsCert != "" {
		return usagef("-tls-cert needs -ca-file: the CA the servers' certificates are verified against")
	}
	cfg.Logger = log
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parentWatch(ctx, *parentPID, cancel)
	return w.Run(ctx)
}

// workerCredential reads what the worker joins with: the machine's join
// token (a file, or, for a worker the autoscaler started as a Nomad job,
// the environment) when the autoscaler launched the machine, else the
// worker secret (a file, or DROVER_WORKER_SECRET) of a worker an operator
// starts.
func workerCredential(secretFile, joinTokenFile, machine string) (secret, joinToken string, err error) {
	if secretFile != "" && joinTokenFile != "" {
		return "", "", usagef("-worker-secret-file and -join-token-file exclude each other: a worker joins with one")
	}
	if secretFile == "" {
		joinToken = os.Getenv(provider.JoinTokenEnv)
		if joinTokenFile != "" {
			if joinToken, err = readSecretFile(joinTokenFile, "join token"); err != nil {
				return "", "", err
			}
		}
		if joinToken != "" {
			if machine == "" {
				return "", "", usagef("a join token joins only the machine it was made for: give -machine")
			}
			return "", joinToken, nil
		}
	}
	secret = os.Getenv("DROVER_WORKER_SECRET")
	if secretFile != "" || secret == "" {
		if secretFile == "" {
			return "", "", usagef("drover worker needs -worker-secret-file: the file with the cluster's worker join secret (or DROVER_WORKER_SECRET), or on a machine the autoscaler launched -join-token-file")
		}
		if secret, err = readSecretFile(secretFile, "worker secret"); err != nil {
			return "", "", err
		}
	}
	return secret, "", nil
}
