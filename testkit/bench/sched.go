package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/mariadbtest"
	"github.com/drover-sched/drover/testkit/simworker"
	"github.com/drover-sched/drover/testkit/testcluster"
)

// SchedConfig is what `drover bench sched` runs: real servers (separate
// processes, real Raft over TCP) and simulated workers that speak the
// real sync protocol.
type SchedConfig struct {
	Binary      string // the drover executable the servers run
	Servers     int    // 1, 3 or 5
	Jobs        int    // per batch
	Workers     int    // simulated workers
	WorkerCores int    // cores per worker (1 GiB of memory per core)
	Array       bool   // each batch one job array (else distinct jobs in bunches)
	Bunch       int    // distinct jobs per request
	Duration    simworker.Dist
	// Users submit at once, each its own user with jobs of mixed sizes
	// (0: the admin submits one batch of 1-core jobs); each submits
	// Batches batches.
	Users, Batches int
	Seed           uint64  // of job sizes and durations
	CancelAt       float64 // cancel the batch once this fraction has completed (0: never)
	// PprofDir receives CPU profiles of every server and of this process
	// for PprofFor from PprofFrom after the first submission (and with
	// Retention, the servers' heap profiles when idle and after).
	PprofDir            string
	PprofFrom, PprofFor time.Duration
	Keep                bool     // keep the cluster's directory
	TLS                 bool     // TLS on every hop
	WAN                 bool     // each server in a region of its own, WANLatency apart (root)
	ServerFlags         []string // extra flags for every server
	History             string   // "mysql": a MariaDB for the run; "": the servers' default
	// Retention is the servers' -retention; with it, the run waits until
	// every batch left memory and compares heaps and snapshots with the
	// idle cluster's.
	Retention time.Duration
	// Regions and Clusters spread the workers over Regions regions of
	// Clusters clusters each (Regions 0: one default cluster).
	Regions, Clusters int
	// Teams puts the users in this many teams, each with its own billing
	// project and an even split of the fleet's cores as its cpu quota.
	Teams int
	// Queues puts the users in the 1,000 leaves of a three-level queue
	// tree (10 organizations, 10 projects each, 10 tiers each, weighted
	// 10 down to 1), each leaf a billing project guaranteed 80% of an even
	// split of the fleet (binding: every leaf wants more), borrowing the
	// rest.
	Queues bool
	// Gangs puts this fraction of each batch's distinct jobs in gangs
	// of 8 to 64 members (0: none).
	Gangs float64

	Progress Printf // progress lines
	Notices  Printf // retries, kept directories
	// Fairness, when set, hears of every fair-share sample.
	Fairness func(FairSample)
}

// Validate checks a config; its errors name the CLI's flags.
func (c *SchedConfig) Validate() error {
	if c.Regions < 0 || c.Clusters < 1 || c.Teams < 0 || (c.Teams > 0 && c.Users < c.Teams) {
		return errors.New("-regions must be 0 or more, -clusters 1 or more, and -teams at most -users")
	}
	if c.Queues && (c.Teams > 0 || c.Users < 1) {
		return errors.New("-queues needs -users and no -teams")
	}
	if c.Servers < 1 || c.Jobs < 1 || c.Workers < 1 || c.WorkerCores < 1 || c.Bunch < 1 || c.Batches < 1 || c.Users < 0 {
		return errors.New("-servers, -jobs, -workers, -worker-cores, -bunch and -batches must be positive")
	}
	if c.Users > 0 && (c.Array || c.CancelAt > 0) {
		return errors.New("-users submits distinct jobs of mixed sizes; -array and -cancel-at measure a single batch")
	}
	if c.Gangs < 0 || c.Gangs > 1 || (c.Gangs > 0 && (c.Users > 0 || c.Array)) {
		return errors.New("-gangs is a fraction from 0 to 1, of the distinct jobs a batch of -jobs holds (not with -users or -array)")
	}
	if c.History != "" && c.History != "mysql" {
		return errors.New("-history is mysql or empty")
	}
	return nil
}

// SchedResult is what Sched measured.
type SchedResult struct {
	Jobs    int // in all
	Users   int // tenants
	Batches int
	// Elapsed is from the first submit request to the last batch
	// complete; Submit to the last submission's answer.
	Elapsed, Submit time.Duration
	Summary         simworker.Summary
	HeapPerJob      float64            // the most any server's heap grew per job
	PeakRSSMB       map[string]float64 // per server
	// Rounds are the leader's scheduling rounds (nil: not read, a
	// notice says why).
	Rounds   *Rounds
	Retained *Retained // with Retention
	// FairSamples, Fair and Instant: with more than one user, the
	// deviations from an equal split of the cores held over each second
	// and at the instant.
	FairSamples   int
	Fair, Instant Fairness
	Cancel        *Cancel // with CancelAt
	// Commit is the leader's commit latency (a command handed to Raft
	// until applied: a round trip to a quorum and the disk), p50 and p99
	// in ms, of the scheduler's plans and of the workers' events.
	Commit map[string][2]float64
}

// Rounds are the p99s of the leader's scheduling round histograms, in ms.
type Rounds struct {
	N          int64
	RoundP99Ms float64
	// DecideP99Ms and CPUP99Ms are nil when the leader did not export
	// them.
	DecideP99Ms, CPUP99Ms *float64
	// LockWait is nil when the leader does not measure its state's lock.
	LockWait *LockWait
}

// LockWait is what the leader measured of its state's lock, in ms: the
// p99 and the largest (the upper bound of the highest bucket holding an
// observation) of the scheduling round's waits for its read, of other
// readers' waits, of apply's holds of the write lock (on the wall clock
// and in its thread's CPU time) and of apply's waits for it.
type LockWait struct {
	RoundReads                     int64
	RoundP99Ms, RoundMaxMs         float64
	OtherP99Ms, OtherMaxMs         float64
	HoldP99Ms, HoldMaxMs           float64
	HoldCPUP99Ms, HoldCPUMaxMs     float64
	ApplyWaitP99Ms, ApplyWaitMaxMs float64
	// EntryP99Ms and EntryMaxMs: applying one log entry, by command.
	EntryP99Ms, EntryMaxMs map[string]float64
}

// Cancel is what a cancellation took.
type Cancel struct {
	AssignmentsAfter int64   // assignments workers received after it
	EffectS          float64 // the last of them, seconds after it
	CompleteS        float64 // seconds until the batch was complete
	NCancelled       int64
}

// Retained compares the servers once every batch left memory with the
// idle cluster. Its fields are in the order of their JSON names.
type Retained struct {
	After           map[string]MemAndSnapshot `json:"after"`
	BatchesReadable int                       `json:"batches_readable"`
	HeapRatioMax    float64                   `json:"heap_ratio_max"`
	HeldMax         int64                     `json:"held_batches_and_jobs_max"`
	Idle            map[string]MemAndSnapshot `json:"idle"`
	LeftMemoryS     float64                   `json:"left_memory_s"`
	SnapshotRatio   float64                   `json:"snapshot_ratio_max"`
}

// Sched runs a scheduling benchmark. The workers are up before the first
// submission; the headline is Jobs / Elapsed.
func Sched(ctx context.Context, cfg SchedConfig) (*SchedResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	say := cfg.Progress.printf
	extra := append([]string(nil), cfg.ServerFlags...)
	if cfg.PprofDir != "" {
		extra = append(extra, "-debug-pprof")
	}
	if cfg.History == "mysql" {
		dir, err := os.MkdirTemp("", "drover-bench-mariadb-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		db, err := mariadbtest.Start(dir)
		if err != nil {
			return nil, err
		}
		defer db.Stop()
		dsn, err := db.CreateDatabase("drover")
		if err != nil {
			return nil, err
		}
		extra = append(extra, "-history-dsn", dsn)
		say("MariaDB on %s holds the history", db.Addr())
	}
	if cfg.Retention > 0 {
		extra = append(extra, "-retention", cfg.Retention.String())
	}
	opts := testcluster.Options{Servers: cfg.Servers, Net: "127.0.5.", TLS: cfg.TLS}
	if cfg.WAN {
		down, err := wan(&opts)
		if err != nil {
			return nil, err
		}
		defer down()
		say("servers in %d regions, %d to %d ms apart one way", cfg.Servers, WANLatency(0, 1), WANLatency(1, 2))
	}
	c, cleanup, err := StartCluster(ctx, cfg.Binary, opts, cfg.Keep, cfg.Notices, extra...)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cl, err := c.Client()
	if err != nil {
		return nil, err
	}
	tenants, err := benchTenants(ctx, cl, cfg.Users)
	if err != nil {
		return nil, err
	}
	if cfg.Teams > 0 {
		if err := benchTeams(ctx, cl, tenants, cfg.Teams, int64(cfg.Workers)*int64(cfg.WorkerCores)); err != nil {
			return nil, err
		}
	}
	if cfg.Queues {
		if err := benchQueues(ctx, cl, tenants, int64(cfg.Workers)*int64(cfg.WorkerCores)); err != nil {
			return nil, err
		}
	}
	place := func(i int) (string, string) {
		if cfg.Regions == 0 {
			return "", ""
		}
		k := i % (cfg.Regions * cfg.Clusters)
		return fmt.Sprintf("r%d", k/cfg.Clusters), fmt.Sprintf("r%d-c%d", k/cfg.Clusters, k%cfg.Clusters)
	}
	before, err := serverHeaps(ctx, c, cl.Token())
	if err != nil {
		return nil, err
	}

	// The fleet is up and idle before the first submission.
	rec := simworker.NewRecorder()
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Workers+len(tenants))
	addrs := strings.Split(c.HTTPAddrs(), ",")
	for i := 0; i < cfg.Workers; i++ {
		// Spread the workers' first server across the cluster; they move to
		// the leader on its hint.
		rot := append(addrs[i%len(addrs):], addrs[:i%len(addrs)]...)
		region, cluster := place(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := simworker.Run(wctx, simworker.Config{
				Servers: strings.Join(rot, ","), Secret: "cluster-secret", Name: fmt.Sprintf("sim-%d", i),
				Cores: cfg.WorkerCores, Memory: int64(cfg.WorkerCores) << 30, Duration: cfg.Duration, Seed: cfg.Seed*1000 + uint64(i), SyncWait: 20 * time.Second, Rec: rec,
				Region: region, Cluster: cluster, TLS: c.ClientTLS,
			})
			if err != nil {
				errs <- err
			}
		}()
	}
	defer func() { stopWorkers(); wg.Wait() }()
	if err := waitWorkers(ctx, cl, cfg.Workers); err != nil {
		return nil, err
	}
	var idle map[string]MemAndSnapshot
	if cfg.Retention > 0 {
		if idle, err = memAndSnapshots(ctx, c, cl.Token(), cfg.PprofDir, "idle"); err != nil {
			return nil, err
		}
	}

	start := time.Now()
	total := len(tenants) * cfg.Batches * cfg.Jobs
	var submitted sync.WaitGroup
	var smu sync.Mutex
	var ids []int64
	var lastSubmit time.Time
	for ti, t := range tenants {
		submitted.Add(1)
		go func() {
			defer submitted.Done()
			for b := 0; b < cfg.Batches; b++ {
				var id int64
				var err error
				cores := int64(cfg.Jobs) * 1000 // millicores of the batch
				switch {
				case cfg.Array:
					var res *api.CreateBatchResponse
					res, err = t.client.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bench", Jobs: []api.JobSpec{
						{JobID: 1, Name: "j", Count: int64(cfg.Jobs), Command: []string{"true"}, CPU: 1, Memory: 1 << 20},
					}})
					if err == nil {
						id = res.ID
					}
				case cfg.Users > 0:
					id, cores, err = submitMixed(ctx, t.client, t.project, cfg.Jobs, cfg.Bunch, cfg.Seed+uint64(ti*cfg.Batches+b))
				default:
					id, err = submitDistinct(ctx, t.client, cfg.Jobs, cfg.Bunch, cfg.Gangs, cfg.Seed+uint64(ti*cfg.Batches+b))
				}
				if err != nil {
					errs <- fmt.Errorf("%s: submit: %w", t.user, err)
					return
				}
				now := time.Now()
				rec.Track(id, cfg.Jobs, cores, t.user, now)
				smu.Lock()
				ids = append(ids, id)
				lastSubmit = now
				smu.Unlock()
			}
		}()
	}
	submitDone := make(chan struct{})
	go func() { submitted.Wait(); close(submitDone) }()

	if cfg.PprofDir != "" {
		go func() {
			time.Sleep(cfg.PprofFrom)
			for _, s := range c.Servers {
				go saveProfile(s, cfg.PprofDir, cfg.PprofFor)
			}
			go saveOwnProfile(cfg.PprofDir, cfg.PprofFor)
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
			return nil, ctx.Err()
		case err := <-errs:
			return nil, err
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
				if cfg.Fairness != nil {
					cfg.Fairness(NewFairSample(now.Sub(start), w, i, prevSample, cur, now.Sub(lastSample)))
				}
			}
			prevSample, lastSample = cur, now
		}
		done := rec.Done()
		if cfg.CancelAt > 0 && cancelled.IsZero() && float64(done) >= cfg.CancelAt*float64(total) {
			if err := cl.CancelBatch(ctx, ids[0]); err != nil {
				return nil, err
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
				return nil, err
			}
			if complete {
				if !cancelled.IsZero() {
					cancelDone = time.Since(cancelled)
				}
				break
			}
		}
	}
	res := &SchedResult{Jobs: total, Users: len(tenants), Batches: len(ids), Elapsed: time.Since(start), Submit: lastSubmit.Sub(start)}
	after, err := serverHeaps(ctx, c, cl.Token())
	if err != nil {
		return nil, err
	}
	for id, a := range after {
		res.HeapPerJob = max(res.HeapPerJob, (float64(a)-float64(before[id]))/float64(total))
	}
	var succeeded, nJobs, nCancelled int64
	for _, id := range ids {
		b, err := cl.GetBatch(ctx, id)
		if err != nil {
			return nil, err
		}
		succeeded, nJobs, nCancelled = succeeded+b.NSucceeded, nJobs+b.NJobs, nCancelled+b.NCancelled
	}
	res.Summary = rec.Summarize()
	if cfg.Retention > 0 {
		if res.Retained, err = waitRetained(ctx, c, cl, ids, idle, cfg.PprofDir, say); err != nil {
			return nil, err
		}
	}
	res.PeakRSSMB = peakRSS(c)
	if all, err := leaderHistograms(ctx, c, "drover_raft_apply_seconds", "command"); err == nil {
		res.Commit = map[string][2]float64{}
		for _, cmd := range []string{"plan", "events"} {
			if h, ok := all[cmd]; ok && h.N > 0 {
				res.Commit[cmd] = [2]float64{HistogramQuantile(h.Buckets, h.N, 0.5) * 1000, HistogramP99(h.Buckets, h.N) * 1000}
			}
		}
	}
	if p99, n, err := leaderHistogramP99(ctx, c, "drover_scheduler_round_seconds"); err == nil {
		res.Rounds = &Rounds{N: n, RoundP99Ms: p99 * 1000}
		if p99, _, err := leaderHistogramP99(ctx, c, "drover_scheduler_decide_seconds"); err == nil {
			res.Rounds.DecideP99Ms = ptr(p99 * 1000)
		}
		if p99, _, err := leaderHistogramP99(ctx, c, "drover_scheduler_round_cpu_seconds"); err == nil {
			res.Rounds.CPUP99Ms = ptr(p99 * 1000)
		}
		if b, n, err := leaderHistogram(ctx, c, "drover_state_read_wait_seconds", "reader", "round"); err == nil {
			res.Rounds.LockWait = &LockWait{RoundP99Ms: HistogramP99(b, n) * 1000, RoundMaxMs: HistogramMax(b, n) * 1000, RoundReads: int64(n)}
			if b, n, err := leaderHistogram(ctx, c, "drover_state_read_wait_seconds", "reader", "other"); err == nil {
				res.Rounds.LockWait.OtherP99Ms, res.Rounds.LockWait.OtherMaxMs = HistogramP99(b, n)*1000, HistogramMax(b, n)*1000
			}
			if b, n, err := leaderHistogram(ctx, c, "drover_state_apply_hold_seconds", "", ""); err == nil {
				res.Rounds.LockWait.HoldP99Ms, res.Rounds.LockWait.HoldMaxMs = HistogramP99(b, n)*1000, HistogramMax(b, n)*1000
			}
			if b, n, err := leaderHistogram(ctx, c, "drover_state_apply_hold_cpu_seconds", "", ""); err == nil {
				res.Rounds.LockWait.HoldCPUP99Ms, res.Rounds.LockWait.HoldCPUMaxMs = HistogramP99(b, n)*1000, HistogramMax(b, n)*1000
			}
			if b, n, err := leaderHistogram(ctx, c, "drover_state_apply_wait_seconds", "", ""); err == nil {
				res.Rounds.LockWait.ApplyWaitP99Ms, res.Rounds.LockWait.ApplyWaitMaxMs = HistogramP99(b, n)*1000, HistogramMax(b, n)*1000
			}
			if all, err := leaderHistograms(ctx, c, "drover_state_apply_entry_seconds", "command"); err == nil {
				res.Rounds.LockWait.EntryP99Ms, res.Rounds.LockWait.EntryMaxMs = map[string]float64{}, map[string]float64{}
				for cmd, h := range all {
					res.Rounds.LockWait.EntryP99Ms[cmd], res.Rounds.LockWait.EntryMaxMs[cmd] = HistogramP99(h.Buckets, h.N)*1000, HistogramMax(h.Buckets, h.N)*1000
				}
			}
		}
	} else {
		say("cannot read the leader's scheduling rounds: %v", err)
	}
	if len(tenants) > 1 {
		res.FairSamples = len(fairDevs)
		res.Fair, res.Instant = SummarizeFairness(fairDevs, fairAt), SummarizeFairness(instantDevs, fairAt)
	}
	if !cancelled.IsZero() {
		sum := res.Summary
		effect := 0.0
		if sum.AfterMark > 0 {
			effect = sum.LastAfterMark.Sub(cancelled).Seconds()
		}
		res.Cancel = &Cancel{AssignmentsAfter: sum.AfterMark, EffectS: effect, CompleteS: cancelDone.Seconds(), NCancelled: nCancelled}
		say("cancellation: %d assignments arrived after it (the last %.3fs after), the batch completed %.3fs after it", sum.AfterMark, effect, cancelDone.Seconds())
	} else if succeeded != nJobs || res.Summary.Completions < int64(total) {
		return nil, fmt.Errorf("%w: %d of %d jobs succeeded; not reporting this run", simworker.ErrIncomplete, succeeded, nJobs)
	}
	return res, nil
}

func ptr[T any](v T) *T { return &v }

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
		zero := 0.0
		cfg.Queues = append(cfg.Queues, api.Queue{Path: project, BillingProjects: []string{project},
			Guarantee: api.Quota{CPU: math.Ceil(float64(fleetCores) / float64(n))}, BorrowLimit: &api.Limit{CPU: &zero}})
	}
	return admin.ApplyPlacement(ctx, cfg)
}

// benchQueues makes a three-level tree of 1,000 leaves, each its own
// billing project with the tenants round robin, guaranteed 80% of an even
// split of the fleet's cores (a parent the sum of its children's), tiers
// weighted 10 down to 1, borrowing on.
func benchQueues(ctx context.Context, admin *api.Client, tenants []tenant, fleetCores int64) error {
	const fan = 10
	leafCores := math.Floor(0.8 * float64(fleetCores) / fan / fan / fan)
	members := map[string][]string{}
	for i := range tenants {
		k := i % (fan * fan * fan)
		tenants[i].project = fmt.Sprintf("q-%03d", k)
		members[tenants[i].project] = append(members[tenants[i].project], tenants[i].user)
	}
	cfg := &api.PlacementConfig{}
	for o := range fan {
		org := fmt.Sprintf("org%d", o)
		cfg.Queues = append(cfg.Queues, api.Queue{Path: org, Guarantee: api.Quota{CPU: leafCores * fan * fan}})
		for p := range fan {
			proj := fmt.Sprintf("%s/proj%d", org, p)
			cfg.Queues = append(cfg.Queues, api.Queue{Path: proj, Guarantee: api.Quota{CPU: leafCores * fan}})
			for t := range fan {
				name := fmt.Sprintf("q-%03d", o*fan*fan+p*fan+t)
				if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: name, Members: members[name]}); err != nil {
					return err
				}
				cfg.Queues = append(cfg.Queues, api.Queue{Path: fmt.Sprintf("%s/tier%d", proj, t), Weight: int64(fan - t),
					Guarantee: api.Quota{CPU: leafCores}, BillingProjects: []string{name}})
			}
		}
	}
	return admin.ApplyPlacement(ctx, cfg)
}

// leaderHistogramP99 reads one of the leader's histograms (scheduling
// round times) and returns its HistogramP99 and the number of
// observations.
func leaderHistogramP99(ctx context.Context, c *testcluster.Cluster, name string) (float64, int64, error) {
	b, n, err := leaderHistogram(ctx, c, name, "", "")
	if err != nil {
		return 0, 0, err
	}
	return HistogramP99(b, n), int64(n), nil
}

// leaderHistogram reads one of the leader's histograms, the series whose
// label is value when label is not empty, as buckets and a count.
func leaderHistogram(ctx context.Context, c *testcluster.Cluster, name, label, value string) ([]Bucket, uint64, error) {
	all, err := leaderHistograms(ctx, c, name, label)
	if err != nil {
		return nil, 0, err
	}
	h, ok := all[value]
	if !ok {
		return nil, 0, fmt.Errorf("no %s{%s=%q} on the leader", name, label, value)
	}
	return h.Buckets, h.N, nil
}

// Histogram is one series of a Prometheus histogram.
type Histogram struct {
	Buckets []Bucket
	N       uint64
}

// leaderHistograms reads every series of one of the leader's histograms,
// by the value of its label ("" for the one series of an unlabelled one).
func leaderHistograms(ctx context.Context, c *testcluster.Cluster, name, label string) (map[string]Histogram, error) {
	i, err := c.WaitLeader(ctx)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Servers[i].URL()+"/metrics", nil)
	resp, err := c.HTTPClient(0).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	fam := fams[name]
	if fam == nil {
		return nil, fmt.Errorf("no %s on %s", name, c.Servers[i].HTTP)
	}
	out := map[string]Histogram{}
	for _, m := range fam.Metric {
		value := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				value = l.GetValue()
			}
		}
		h := m.GetHistogram()
		var buckets []Bucket
		for _, b := range h.GetBucket() {
			buckets = append(buckets, Bucket{UpperBound: b.GetUpperBound(), Count: b.GetCumulativeCount()})
		}
		out[value] = Histogram{Buckets: buckets, N: h.GetSampleCount()}
	}
	return out, nil
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
// update posted in bunches; about a fraction gangs of them in gangs of 8
// to 64 members (seeded).
func submitDistinct(ctx context.Context, cl *api.Client, n, bunch int, gangs float64, seed uint64) (int64, error) {
	// Each entry's first job and size (1: a plain job).
	type entry struct{ first, count int }
	var entries []entry
	if gangs > 0 {
		rng := rand.New(rand.NewPCG(seed, 11))
		// An entry is a gang with the probability that puts the
		// fraction of jobs in gangs (mean size 36).
		const mean = 36.0
		q := gangs / (mean*(1-gangs) + gangs)
		for id := 1; id <= n; {
			size := 1
			if rng.Float64() < q {
				size = min(8+rng.IntN(57), n-id+1)
			}
			entries = append(entries, entry{id, size})
			id += size
		}
	}
	var src api.JobSource = api.GeneratedJobs{N: n, Make: func(i int) api.JobSpec {
		id := i + 1
		return api.JobSpec{JobID: int64(id), Name: "job-" + strconv.Itoa(id), Command: []string{"true", strconv.Itoa(id)}, CPU: 1, Memory: 1 << 20}
	}}
	if entries != nil {
		src = entryJobs{n: n, count: len(entries), make: func(i int) api.JobSpec {
			e := entries[i]
			js := api.JobSpec{JobID: int64(e.first), Name: "job-" + strconv.Itoa(e.first), Command: []string{"true", strconv.Itoa(e.first)}, CPU: 1, Memory: 1 << 20}
			if e.count > 1 {
				js.Count, js.Gang = int64(e.count), true
			}
			return js
		}}
	}
	b, err := cl.Submit(ctx, &api.CreateBatchRequest{Name: "bench"}, src, &api.SubmitOptions{BunchSize: bunch})
	if err != nil {
		return 0, err
	}
	return b.ID, nil
}

// entryJobs is a JobSource of count entries holding n jobs in all (some
// of them arrays).
type entryJobs struct {
	n, count int
	make     func(i int) api.JobSpec
}

func (e entryJobs) Len() int       { return e.count }
func (e entryJobs) NumJobs() int64 { return int64(e.n) }
func (e entryJobs) Entries(lo, hi int) []api.JobSpec {
	out := make([]api.JobSpec, hi-lo)
	for i := range out {
		out[i] = e.make(lo + i)
	}
	return out
}
