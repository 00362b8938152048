package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/internal/mariadbtest"
	"github.com/drover-sched/drover/internal/simworker"
	"github.com/drover-sched/drover/internal/testcluster"
	"github.com/drover-sched/drover/server"
	"github.com/prometheus/common/expfmt"
)

// runBenchSched measures the control plane alone: real servers (separate
// processes, real Raft over TCP) and simulated workers that speak the real
// sync protocol, report each job started at once and finished after
// -job-duration. The workers are up before the first submission; the
// headline, jobs_per_s, is every job divided by the time from the first
// submit request to the last batch complete.
func (m *Main) runBenchSched(ctx context.Context, args []string) error {
	fs := m.newFlags("bench sched", "[flags]")
	servers := fs.Int("servers", 3, "servers (1, 3 or 5)")
	jobs := fs.Int("jobs", 1_000_000, "jobs per batch")
	workers := fs.Int("workers", 500, "simulated workers")
	cores := fs.Int("worker-cores", 64, "cores per simulated worker (1 GiB of memory per core)")
	array := fs.Bool("array", false, "submit each batch as one job array (else as distinct jobs in bunches)")
	bunch := fs.Int("bunch", 10_000, "distinct jobs per request")
	durFlag := fs.String("job-duration", "0", "how long each simulated job runs: a duration (2s) or exp:MEAN for an exponential distribution")
	users := fs.Int("users", 0, "tenants submitting at once, each its own user with jobs of mixed sizes (0: the admin submits one batch of 1-core jobs)")
	batches := fs.Int("batches", 1, "batches per tenant (with -users)")
	seed := fs.Uint64("seed", 1, "seed of job sizes and durations")
	cancelAt := fs.Float64("cancel-at", 0, "cancel the batch once this fraction of it has completed, and measure the cancellation")
	pprofDir := fs.String("pprof", "", "write CPU profiles of every server and of the bench process (its simulated workers and submitters) to this directory (with -retention, also every server's heap profiles when idle and after)")
	pprofFrom := fs.Duration("pprof-from", 2*time.Second, "start the profiles this long after the first submit request")
	pprofFor := fs.Duration("pprof-for", 20*time.Second, "length of the profiles")
	keep := fs.Bool("keep", false, "keep the cluster's directory afterwards")
	useTLS := fs.Bool("tls", false, "TLS on every hop: servers serve HTTPS and talk Raft over mutual TLS, workers and clients verify them (a CA and certificates are made for the run)")
	fairTrace := fs.Bool("trace-fairness", false, "with -users: print every fair-share sample (the tenants holding least and most)")
	serverFlags := fs.String("server-flags", "", "extra flags for every server, space-separated (e.g. \"-gc-percent 100\")")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	historyKind := fs.String("history", "", `history store of the servers: "mysql" starts a MariaDB (mariadbd from Debian's mariadb-server) for the run; "" leaves the servers' default (the embedded store, which exports only with one server)`)
	retention := fs.Duration("retention", 0, "the servers' -retention; with it, wait after the run until every batch has left memory, then report each server's heap and snapshot against the idle cluster's and read every batch back")
	nRegions := fs.Int("regions", 0, "spread the workers over this many regions (with -clusters; 0: one default cluster)")
	nClusters := fs.Int("clusters", 1, "clusters per region (with -regions)")
	nTeams := fs.Int("teams", 0, "with -users: put the users in this many teams, each with its own billing project and a cpu quota of an even split of the fleet (binding: every team wants more)")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *nRegions < 0 || *nClusters < 1 || *nTeams < 0 || (*nTeams > 0 && *users < *nTeams) {
		return usagef("-regions must be 0 or more, -clusters 1 or more, and -teams at most -users")
	}
	if *servers < 1 || *jobs < 1 || *workers < 1 || *cores < 1 || *bunch < 1 || *batches < 1 || *users < 0 {
		return usagef("-servers, -jobs, -workers, -worker-cores, -bunch and -batches must be positive")
	}
	dist, err := simworker.ParseDist(*durFlag)
	if err != nil {
		return usagef("-job-duration: %v", err)
	}
	if *users > 0 && (*array || *cancelAt > 0) {
		return usagef("-users submits distinct jobs of mixed sizes; -array and -cancel-at measure a single batch")
	}
	say := func(format string, a ...any) {
		if !*asJSON {
			safef(m.Stderr, format+"\n", a...)
		}
	}
	extra := strings.Fields(*serverFlags)
	if *pprofDir != "" {
		extra = append(extra, "-debug-pprof")
	}
	switch *historyKind {
	case "":
	case "mysql":
		dir, err := os.MkdirTemp("", "drover-bench-mariadb-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		db, err := mariadbtest.Start(dir)
		if err != nil {
			return err
		}
		defer db.Stop()
		dsn, err := db.CreateDatabase("drover")
		if err != nil {
			return err
		}
		extra = append(extra, "-history-dsn", dsn)
		say("MariaDB on %s holds the history", db.Addr())
	default:
		return usagef("-history is mysql or empty")
	}
	if *retention > 0 {
		extra = append(extra, "-retention", retention.String())
	}
	c, cleanup, err := m.benchCluster(ctx, testcluster.Options{Servers: *servers, Net: "127.0.5.", TLS: *useTLS}, *keep, extra...)
	if err != nil {
		return err
	}
	defer cleanup()
	cl, err := c.Client()
	if err != nil {
		return err
	}
	tenants, err := benchTenants(ctx, cl, *users)
	if err != nil {
		return err
	}
	if *nTeams > 0 {
		if err := benchTeams(ctx, cl, tenants, *nTeams, int64(*workers)*int64(*cores)); err != nil {
			return err
		}
	}
	place := func(i int) (string, string) {
		if *nRegions == 0 {
			return "", ""
		}
		k := i % (*nRegions * *nClusters)
		return fmt.Sprintf("r%d", k / *nClusters), fmt.Sprintf("r%d-c%d", k / *nClusters, k%*nClusters)
	}
	before, err := serverHeaps(ctx, c, cl.Token())
	if err != nil {
		return err
	}

	// The fleet is up and idle before the first submission.
	rec := simworker.NewRecorder()
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, *workers+len(tenants))
	addrs := strings.Split(c.HTTPAddrs(), ",")
	for i := 0; i < *workers; i++ {
		// Spread the workers' first server across the cluster; they move to
		// the leader on its hint.
		rot := append(addrs[i%len(addrs):], addrs[:i%len(addrs)]...)
		region, cluster := place(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := simworker.Run(wctx, simworker.Config{
				Servers: strings.Join(rot, ","), Secret: "cluster-secret", Name: fmt.Sprintf("sim-%d", i),
				Cores: *cores, Memory: int64(*cores) << 30, Duration: dist, Seed: *seed*1000 + uint64(i), SyncWait: 20 * time.Second, Rec: rec,
				Region: region, Cluster: cluster, TLS: c.ClientTLS,
			})
			if err != nil {
				errs <- err
			}
		}()
	}
	defer func() { stopWorkers(); wg.Wait() }()
	if err := waitWorkers(ctx, cl, *workers); err != nil {
		return err
	}
	var idle map[string]memAndSnapshot
	if *retention > 0 {
		if idle, err = memAndSnapshots(ctx, c, cl.Token(), *pprofDir, "idle"); err != nil {
			return err
		}
	}

	start := time.Now()
	total := len(tenants) * *batches * *jobs
	var submitted sync.WaitGroup
	var smu sync.Mutex
	var ids []int64
	var lastSubmit time.Time
	for ti, t := range tenants {
		submitted.Add(1)
		go func() {
			defer submitted.Done()
			for b := 0; b < *batches; b++ {
				var id int64
				var err error
				cores := int64(*jobs) * 1000 // millicores of the batch
				switch {
				case *array:
					var res *api.CreateBatchResponse
					res, err = t.client.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bench", Jobs: []api.JobSpec{
						{JobID: 1, Name: "j", Count: int64(*jobs), Command: []string{"true"}, CPU: 1, Memory: 1 << 20},
					}})
					if err == nil {
						id = res.ID
					}
				case *users > 0:
					id, cores, err = submitMixed(ctx, t.client, t.project, *jobs, *bunch, *seed+uint64(ti*(*batches)+b))
				default:
					id, err = submitDistinct(ctx, t.client, *jobs, *bunch)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: submit: %w", t.user, err)
					return
				}
				now := time.Now()
				rec.Track(id, *jobs, cores, t.user, now)
				smu.Lock()
				ids = append(ids, id)
				lastSubmit = now
				smu.Unlock()
			}
		}()
	}
	submitDone := make(chan struct{})
	go func() { submitted.Wait(); close(submitDone) }()

	if *pprofDir != "" {
		go func() {
			time.Sleep(*pprofFrom)
			for _, s := range c.Servers {
				go saveProfile(s, *pprofDir, *pprofFor)
			}
			go saveOwnProfile(*pprofDir, *pprofFor)
		}()
	}
	// Fair share: every second while every tenant has at least a share's
	// worth of jobs waiting to start, each
	// tenant's cores held on average over the second against an equal
	// split (and, as a narrower figure, the cores held at the instant).
	var fairDevs, instantDevs, fairAt []float64
	var prevSample map[string]simworker.UserSample
	var cancelled time.Time
	var cancelDone time.Duration
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastSay, lastSample := time.Now(), time.Now()
	submittedAll := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			return err
		case <-submitDone:
			submitDone = nil
			submittedAll = true
			say("submitted %d jobs in %s", total, lastSubmit.Sub(start).Round(time.Millisecond))
		case <-tick.C:
		}
		if now := time.Now(); len(tenants) > 1 && now.Sub(lastSample) >= time.Second {
			cur := rec.Sample(now)
			if w, i, ok := simworker.FairDeviation(prevSample, cur, now.Sub(lastSample), len(tenants)); ok {
				fairDevs = append(fairDevs, w)
				instantDevs = append(instantDevs, i)
				fairAt = append(fairAt, now.Sub(start).Seconds())
				if *fairTrace {
					traceFairness(m.Stderr, now.Sub(start), w, i, prevSample, cur, now.Sub(lastSample))
				}
			}
			prevSample, lastSample = cur, now
		}
		done := rec.Done()
		if *cancelAt > 0 && cancelled.IsZero() && float64(done) >= *cancelAt*float64(total) {
			if err := cl.CancelBatch(ctx, ids[0]); err != nil {
				return err
			}
			cancelled = time.Now()
			rec.Mark(cancelled)
			say("cancelled the batch at %d completed jobs", done)
		}
		if time.Since(lastSay) > 5*time.Second {
			say("%d/%d jobs completed", done, total)
			lastSay = time.Now()
		}
		if submittedAll && (done >= int64(total) || !cancelled.IsZero()) {
			complete, err := allComplete(ctx, cl, ids)
			if err != nil {
				return err
			}
			if complete {
				if !cancelled.IsZero() {
					cancelDone = time.Since(cancelled)
				}
				break
			}
		}
	}
	elapsed := time.Since(start)
	after, err := serverHeaps(ctx, c, cl.Token())
	if err != nil {
		return err
	}
	var perJob float64
	for id, a := range after {
		perJob = max(perJob, (float64(a)-float64(before[id]))/float64(total))
	}
	var succeeded, nJobs, nCancelled int64
	for _, id := range ids {
		b, err := cl.GetBatch(ctx, id)
		if err != nil {
			return err
		}
		succeeded, nJobs, nCancelled = succeeded+b.NSucceeded, nJobs+b.NJobs, nCancelled+b.NCancelled
	}
	sum := rec.Summarize()
	var retained map[string]any
	if *retention > 0 {
		if retained, err = waitRetained(ctx, c, cl, ids, idle, *pprofDir, say); err != nil {
			return err
		}
	}
	res := map[string]any{
		"bench": "sched", "servers": *servers, "tls": *useTLS, "jobs": total, "users": len(tenants), "batches": len(ids), "workers": *workers, "worker_cores": *cores,
		"array": *array, "job_duration": dist.String(),
		"jobs_per_s":               float64(total) / elapsed.Seconds(),
		"total_s":                  elapsed.Seconds(),
		"submit_s":                 lastSubmit.Sub(start).Seconds(),
		"schedule_jobs_per_s":      sum.ScheduleJobsPerS,
		"complete_jobs_per_s":      sum.CompleteJobsPerS,
		"p50_ready_to_assigned_ms": sum.P50ReadyToAssign,
		"p99_ready_to_assigned_ms": sum.P99ReadyToAssign,
		"p50_queue_wait_ms":        sum.P50QueueWait,
		"p99_queue_wait_ms":        sum.P99QueueWait,
		"heap_bytes_per_job":       perJob,
		"peak_rss_mb":              peakRSS(c),
		"regions":                  *nRegions,
		"clusters_per_region":      *nClusters,
		"teams":                    *nTeams,
	}
	if p99, n, err := histogramP99(ctx, c, "drover_scheduler_round_seconds"); err == nil {
		res["sched_round_p99_ms"] = p99 * 1000
		res["sched_rounds"] = n
		for key, name := range map[string]string{"sched_decide_p99_ms": "drover_scheduler_decide_seconds", "sched_round_cpu_p99_ms": "drover_scheduler_round_cpu_seconds"} {
			if p99, _, err := histogramP99(ctx, c, name); err == nil {
				res[key] = p99 * 1000
			}
		}
	} else {
		say("cannot read the leader's scheduling rounds: %v", err)
	}
	if retained != nil {
		res["retained"] = retained
	}
	fair := summarizeFairness(fairDevs, fairAt)
	instant := summarizeFairness(instantDevs, fairAt)
	if len(tenants) > 1 {
		res["fair_share_samples"] = len(fairDevs)
		res["fair_share_max_deviation"] = fair.max
		res["fair_share_p50_deviation"] = fair.p50
		res["fair_share_samples_within_5pct"] = fair.within
		res["fair_share_all_within_5pct_from_s"] = fair.settledAt
		res["fair_share_instant_p50_deviation"] = instant.p50
		res["fair_share_instant_max_deviation"] = instant.max
	}

	if !cancelled.IsZero() {
		effect := 0.0
		if sum.AfterMark > 0 {
			effect = sum.LastAfterMark.Sub(cancelled).Seconds()
		}
		res["cancel_assignments_after"] = sum.AfterMark
		res["cancel_effect_s"] = effect
		res["cancel_complete_s"] = cancelDone.Seconds()
		res["n_cancelled"] = nCancelled
		say("cancellation: %d assignments arrived after it (the last %.3fs after), the batch completed %.3fs after it", sum.AfterMark, effect, cancelDone.Seconds())
	} else if succeeded != nJobs || sum.Completions < int64(total) {
		return fmt.Errorf("%w: %d of %d jobs succeeded; not reporting this run", simworker.ErrIncomplete, succeeded, nJobs)
	}
	if !*asJSON {
		safef(m.Stdout, "%.0f jobs/s end to end (%d jobs, first submit to last batch complete in %.2fs; submit %.2fs), ready-to-assigned p50 %.1f ms p99 %.1f ms",
			float64(total)/elapsed.Seconds(), total, elapsed.Seconds(), lastSubmit.Sub(start).Seconds(), sum.P50ReadyToAssign, sum.P99ReadyToAssign)
		if len(tenants) > 1 {
			safef(m.Stdout, ", fair share (cores held over each second): worst tenant off by %.1f%% at the median sample, %.1f%% at the worst; %.0f%% of %d samples within 5%%, every one from %.0fs on",
				fair.p50*100, fair.max*100, fair.within*100, len(fairDevs), fair.settledAt)
		}
		safeln(m.Stdout)
	}
	return json.NewEncoder(m.Stdout).Encode(res)
}

type tenant struct {
	user    string
	project string // "" : the default
	client  *api.Client
}

// benchTeams puts the tenants in n teams, round robin: each team has its
// own billing project and an even split of the fleet's cores as its cpu
// quota.
func benchTeams(ctx context.Context, admin *api.Client, tenants []tenant, n int, fleetCores int64) error {
	cfg := &api.PlacementConfig{}
	members := make([][]string, n)
	for i := range tenants {
		members[i%n] = append(members[i%n], tenants[i].user)
		tenants[i].project = fmt.Sprintf("team-%02d", i%n)
	}
	for k := 0; k < n; k++ {
		project := fmt.Sprintf("team-%02d", k)
		if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: project, Members: members[k]}); err != nil {
			return err
		}
		cfg.Teams = append(cfg.Teams, api.Team{Name: project, BillingProjects: []string{project},
			Quota: api.Quota{CPU: math.Ceil(float64(fleetCores) / float64(n))}})
	}
	return admin.ApplyPlacement(ctx, cfg)
}

// histogramP99 reads one of the leader's histograms (scheduling round
// times) and returns its 99th percentile (the upper bound of the bucket it
// falls in: at most 10% above it) and the number of observations.
func histogramP99(ctx context.Context, c *testcluster.Cluster, name string) (float64, int64, error) {
	i, err := c.WaitLeader(ctx)
	if err != nil {
		return 0, 0, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Servers[i].URL()+"/metrics", nil)
	resp, err := c.HTTPClient(0).Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	fam := fams[name]
	if fam == nil || len(fam.Metric) == 0 {
		return 0, 0, fmt.Errorf("no %s on %s", name, c.Servers[i].HTTP)
	}
	h := fam.Metric[0].GetHistogram()
	n := h.GetSampleCount()
	for _, b := range h.GetBucket() {
		if float64(b.GetCumulativeCount()) >= 0.99*float64(n) {
			return b.GetUpperBound(), int64(n), nil
		}
	}
	return math.Inf(1), int64(n), nil
}

// benchTenants returns the admin alone (n == 0) or n new users, members of
// the default billing project.
func benchTenants(ctx context.Context, admin *api.Client, n int) ([]tenant, error) {
	if n == 0 {
		me, err := admin.Whoami(ctx)
		if err != nil {
			return nil, err
		}
		return []tenant{{user: me.Name, client: admin}}, nil
	}
	out := make([]tenant, n)
	for i := range out {
		name := fmt.Sprintf("tenant-%03d", i)
		u, err := admin.CreateUser(ctx, &api.CreateUserRequest{Name: name})
		if err != nil {
			return nil, err
		}
		if err := admin.AddMember(ctx, "default", name); err != nil {
			return nil, err
		}
		out[i] = tenant{user: name, client: api.NewClient(strings.Join(admin.Addrs(), ","), u.Token)}
	}
	return out, nil
}

// waitWorkers waits until n workers are active.
func waitWorkers(ctx context.Context, cl *api.Client, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		insts, err := cl.ListInstances(ctx)
		if err != nil {
			return err
		}
		active := 0
		for _, in := range insts {
			if in.Active {
				active++
			}
		}
		if active >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d simulated workers active after a minute", active, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// allComplete reports whether every batch is complete.
func allComplete(ctx context.Context, cl *api.Client, ids []int64) (bool, error) {
	for _, id := range ids {
		b, err := cl.GetBatch(ctx, id)
		if err != nil {
			return false, err
		}
		if b.State != api.BatchComplete {
			return false, nil
		}
	}
	return true, nil
}

// submitMixed creates a batch of n distinct jobs of mixed sizes: cores
// from 0.25 to 16, memory a quarter to one GiB per core. It returns the
// batch and the cores its jobs ask for in all.
func submitMixed(ctx context.Context, cl *api.Client, project string, n, bunch int, seed uint64) (id, coresMilli int64, err error) {
	sizes := []float64{0.25, 0.5, 1, 2, 4, 8, 16}
	rng := rand.New(rand.NewPCG(seed, 7))
	cpu := make([]float64, n)
	mem := make([]int64, n)
	for i := range cpu {
		cpu[i] = sizes[rng.IntN(len(sizes))]
		coresMilli += int64(cpu[i] * 1000)
		mem[i] = int64(cpu[i]*float64(1<<30)*(0.25+0.75*rng.Float64())) &^ (1<<20 - 1)
	}
	b, err := cl.Submit(ctx, &api.CreateBatchRequest{Name: "bench", BillingProject: project}, api.GeneratedJobs{N: n, Make: func(i int) api.JobSpec {
		id := i + 1
		return api.JobSpec{JobID: int64(id), Name: "job-" + strconv.Itoa(id), Command: []string{"true", strconv.Itoa(id)}, CPU: cpu[i], Memory: max(mem[i], 1<<20)}
	}}, &api.SubmitOptions{BunchSize: bunch})
	if err != nil {
		return 0, 0, err
	}
	return b.ID, coresMilli, nil
}

// submitDistinct creates a batch of n jobs, each its own spec, through an
// update posted in bunches.
func submitDistinct(ctx context.Context, cl *api.Client, n, bunch int) (int64, error) {
	b, err := cl.Submit(ctx, &api.CreateBatchRequest{Name: "bench"}, api.GeneratedJobs{N: n, Make: func(i int) api.JobSpec {
		id := i + 1
		return api.JobSpec{JobID: int64(id), Name: "job-" + strconv.Itoa(id), Command: []string{"true", strconv.Itoa(id)}, CPU: 1, Memory: 1 << 20}
	}}, &api.SubmitOptions{BunchSize: bunch})
	if err != nil {
		return 0, err
	}
	return b.ID, nil
}

type memAndSnapshot struct {
	Heap     uint64 `json:"heap_bytes"`
	Snapshot int64  `json:"snapshot_bytes"`
	// Audit is the audit log's share of the snapshot; Batches and Jobs
	// what the state holds.
	Audit   int64 `json:"audit_bytes"`
	Batches int64 `json:"state_batches"`
	Jobs    int64 `json:"state_jobs"`
	// RaftLogRewrites: how many times the server rewrote its Raft log
	// file so far (after a busy spell, once quiet).
	RaftLogRewrites int64 `json:"raft_log_rewrites"`
}

// heapSamples is how many times memAndSnapshots reads a server's heap.
const heapSamples = 5

// memAndSnapshots reads every server's live heap (after a GC) and the size
// of a snapshot of its state; with profDir (servers with -debug-pprof) it
// saves each server's heap profile there too, as ID.heap-LABEL.pprof.
func memAndSnapshots(ctx context.Context, c *testcluster.Cluster, token, profDir, label string) (map[string]memAndSnapshot, error) {
	out := map[string]memAndSnapshot{}
	settleBy := time.Now().Add(90 * time.Second)
	for _, s := range c.Servers {
		one := c.NewClient(s.URL(), token)
		n, err := one.SnapshotSave(ctx, io.Discard)
		if err != nil {
			return nil, fmt.Errorf("snapshot of %s: %w", s.ID(), err)
		}
		ms, err := leastHeap(ctx, one, settleBy)
		if err != nil {
			return nil, fmt.Errorf("memory of %s: %w", s.ID(), err)
		}
		if profDir != "" {
			saveServerProfile(s, "/debug/pprof/heap?gc=1", fmt.Sprintf("%s/%s.heap-%s.pprof", profDir, s.ID(), label))
		}
		out[s.ID()] = memAndSnapshot{Heap: ms.HeapAlloc, Snapshot: n, Audit: ms.AuditBytes, Batches: ms.StateBatches, Jobs: ms.StateJobs, RaftLogRewrites: ms.RaftLogRewrites}
	}
	return out, nil
}

// leastHeap reads a server's heap heapSamples times, half a second apart,
// and returns the least reading: what the server keeps, without the
// requests (worker syncs, heartbeats) in flight at one GC. Readings taken
// while its Raft log file is due for a rewrite, or across one, are taken
// again once it is done (until deadline): a snapshot's
// compaction can free a run's log at any time, and the rewrite follows
// once the server is quiet.
func leastHeap(ctx context.Context, cl *api.Client, deadline time.Time) (*api.MemoryStats, error) {
	for {
		var ms *api.MemoryStats
		settled, rewrites := true, int64(-1)
		for k := range heapSamples {
			if k > 0 {
				time.Sleep(500 * time.Millisecond)
			}
			got, err := cl.Memory(ctx)
			if err != nil {
				return nil, err
			}
			if got.RaftLogRewriteDue || (rewrites >= 0 && got.RaftLogRewrites != rewrites) {
				settled = false
			}
			rewrites = got.RaftLogRewrites
			if ms == nil || got.HeapAlloc < ms.HeapAlloc {
				ms = got
			}
		}
		if settled || time.Now().After(deadline) {
			return ms, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// waitRetained waits until every batch has left the servers' memory for
// the history store, reads each back through the API, and compares each
// server's heap and snapshot with the idle cluster's.
func waitRetained(ctx context.Context, c *testcluster.Cluster, cl *api.Client, ids []int64, idle map[string]memAndSnapshot, profDir string, say func(string, ...any)) (map[string]any, error) {
	start := time.Now()
	for {
		st, err := cl.Leader(ctx)
		if err == nil && st.History != nil && st.History.ForgottenBatches >= int64(len(ids)) && st.History.WaitingBatches == 0 {
			break
		}
		if err == nil && st.History != nil && time.Since(start) > 10*time.Minute {
			return nil, fmt.Errorf("batches still in memory after 10 minutes: %+v", st.History)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	gone := time.Since(start)
	say("every batch left memory %.1fs after the last completed", gone.Seconds())
	var readable int
	for _, id := range ids {
		b, err := cl.GetBatch(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("batch %d after it left memory: %w", id, err)
		}
		page, err := cl.ListJobs(ctx, id, "", 0)
		if err != nil {
			return nil, fmt.Errorf("jobs of batch %d after it left memory: %w", id, err)
		}
		if b.State == api.BatchComplete && b.NSucceeded == b.NJobs && len(page.Jobs) == min(int(b.NJobs), 50) {
			readable++
		}
	}
	// Let what a busy run leaves behind for a while go first: the MySQL
	// store's idle connections and their buffers, and BoltDB's page
	// bookkeeping for the run's Raft log, which goes when the servers
	// rewrite the file once quiet.
	settle := max(2*history.ConnMaxIdleTime, server.RaftLogRewriteQuiet+server.RaftLogRewriteCheck) + 5*time.Second
	say("waiting %s for idle connections to close and the Raft log files to be rewritten before measuring", settle)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(settle):
	}
	after, err := memAndSnapshots(ctx, c, cl.Token(), profDir, "after")
	if err != nil {
		return nil, err
	}
	// The audit log (every mutating request, the last 20,000 kept) is
	// left out of the snapshot comparison: it is bounded by design and
	// not batch state.
	var worstHeap, worstSnap float64
	var held int64
	for id, a := range after {
		worstHeap = max(worstHeap, float64(a.Heap)/float64(idle[id].Heap))
		worstSnap = max(worstSnap, float64(a.Snapshot-a.Audit)/float64(idle[id].Snapshot-idle[id].Audit))
		held = max(held, a.Batches+a.Jobs)
	}
	say("after: heap at most %.3fx and snapshot (without the audit log) at most %.3fx the idle cluster's; %d of %d batches read back", worstHeap, worstSnap, readable, len(ids))
	return map[string]any{"idle": idle, "after": after, "left_memory_s": gone.Seconds(), "batches_readable": readable,
		"heap_ratio_max": worstHeap, "snapshot_ratio_max": worstSnap, "held_batches_and_jobs_max": held}, nil
}

// serverHeaps asks every server for its live heap (after a GC).
func serverHeaps(ctx context.Context, c *testcluster.Cluster, token string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, s := range c.Servers {
		one := c.NewClient(s.URL(), token)
		ms, err := one.Memory(ctx)
		if err != nil {
			return nil, fmt.Errorf("memory of %s: %w", s.ID(), err)
		}
		out[s.ID()] = ms.HeapAlloc
	}
	return out, nil
}

// peakRSS reads each server's peak resident set size (VmHWM) in MiB.
func peakRSS(c *testcluster.Cluster) map[string]float64 {
	out := map[string]float64{}
	for _, s := range c.Servers {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.PID()))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				fields := strings.Fields(rest)
				if kb, err := strconv.ParseFloat(fields[0], 64); err == nil {
					out[s.ID()] = kb / 1024
				}
			}
		}
		f.Close()
	}
	return out
}

// saveOwnProfile writes a CPU profile of the bench process.
func saveOwnProfile(dir string, length time.Duration) {
	_ = os.MkdirAll(dir, 0o755)
	f, err := os.Create(dir + "/bench.cpu.pprof")
	if err != nil {
		return
	}
	defer f.Close()
	if pprof.StartCPUProfile(f) != nil {
		return
	}
	time.Sleep(length)
	pprof.StopCPUProfile()
}

// saveProfile fetches a CPU profile from a server started with
// -debug-pprof.
func saveProfile(s *testcluster.Server, dir string, length time.Duration) {
	saveServerProfile(s, "/debug/pprof/profile?seconds="+strconv.Itoa(max(1, int(length.Seconds()))), fmt.Sprintf("%s/%s.cpu.pprof", dir, s.ID()))
}

// saveServerProfile fetches a profile from a server started with
// -debug-pprof into file.
func saveServerProfile(s *testcluster.Server, path, file string) {
	_ = os.MkdirAll(filepath.Dir(file), 0o755)
	resp, err := s.HTTPClient(0).Get(s.URL() + path)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.ReadFrom(resp.Body)
}

// fairness summarizes per-sample deviations from the fair share.
type fairness struct {
	max, p50, within float64
	// settledAt is the run time (s) from which every sample was within 5%
	// (-1: the last one was not).
	settledAt float64
}

func summarizeFairness(devs, at []float64) fairness {
	f := fairness{settledAt: -1}
	if len(devs) == 0 {
		return f
	}
	sorted := slices.Sorted(slices.Values(devs))
	f.max, f.p50 = sorted[len(sorted)-1], sorted[len(sorted)/2]
	for _, d := range sorted {
		if d <= 0.05 {
			f.within++
		}
	}
	f.within /= float64(len(sorted))
	for i := len(devs) - 1; i >= 0 && devs[i] <= 0.05; i-- {
		f.settledAt = at[i]
	}
	return f
}

// traceFairness prints one fair-share sample: the deviations and the
// tenants that held the fewest and the most cores over the window.
func traceFairness(w io.Writer, at time.Duration, window, instant float64, prev, cur map[string]simworker.UserSample, dt time.Duration) {
	var lo, hi string
	loV, hiV := math.Inf(1), math.Inf(-1)
	for name, c := range cur {
		avg := (c.CoreSeconds - prev[name].CoreSeconds) / dt.Seconds() / 1000
		if avg < loV || (avg == loV && name < lo) {
			lo, loV = name, avg
		}
		if avg > hiV || (avg == hiV && name < hi) {
			hi, hiV = name, avg
		}
	}
	safef(w, "fair share at %5.1fs: off by %5.1f%% over the second (%5.1f%% at the instant); least %s %.0f cores, most %s %.0f cores\n",
		at.Seconds(), window*100, instant*100, lo, loV, hi, hiV)
}
