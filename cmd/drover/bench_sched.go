package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/launch"
	"github.com/drover-sched/drover/internal/simworker"
)

// runBenchSched measures the control plane alone: real servers (separate
// processes, real Raft over TCP) and simulated workers that speak the real
// sync protocol and finish each job as soon as it is assigned (or after
// -job-duration).
func (m *Main) runBenchSched(ctx context.Context, args []string) error {
	fs := m.newFlags("bench sched", "[flags]")
	servers := fs.Int("servers", 3, "servers (1, 3 or 5)")
	jobs := fs.Int("jobs", 1_000_000, "jobs in the batch")
	workers := fs.Int("workers", 500, "simulated workers")
	cores := fs.Int("worker-cores", 64, "cores per simulated worker (jobs take 1 core)")
	array := fs.Bool("array", false, "submit the jobs as one job array (else as distinct jobs in bunches)")
	bunch := fs.Int("bunch", 10_000, "distinct jobs per request")
	duration := fs.Duration("job-duration", 0, "how long each simulated job runs")
	cancelAt := fs.Float64("cancel-at", 0, "cancel the batch once this fraction of it has completed, and measure the cancellation")
	pprofDir := fs.String("pprof", "", "write 20s CPU profiles of every server, taken mid-run, to this directory")
	keep := fs.Bool("keep", false, "keep the cluster's directory afterwards")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *servers < 1 || *jobs < 1 || *workers < 1 || *cores < 1 || *bunch < 1 {
		return usagef("-servers, -jobs, -workers, -worker-cores and -bunch must be positive")
	}
	say := func(format string, a ...any) {
		if !*asJSON {
			fmt.Fprintf(m.Stderr, format+"\n", a...)
		}
	}
	extra := []string{"-lost-timeout", "5m"}
	if *pprofDir != "" {
		extra = append(extra, "-debug-pprof")
	}
	c, cleanup, err := m.benchCluster(ctx, *servers, "127.0.5.", *keep, extra...)
	if err != nil {
		return err
	}
	defer cleanup()
	cl, err := c.Client()
	if err != nil {
		return err
	}
	before, err := serverHeaps(ctx, c, cl.Token())
	if err != nil {
		return err
	}

	start := time.Now()
	var batchID int64
	if *array {
		res, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bench", Jobs: []api.JobSpec{
			{JobID: 1, Name: "j", Count: int64(*jobs), Command: []string{"true"}, CPU: 1, Memory: 1 << 20},
		}})
		if err != nil {
			return err
		}
		batchID = res.ID
	} else {
		if batchID, err = submitDistinct(ctx, cl, *jobs, *bunch); err != nil {
			return err
		}
	}
	submit := time.Since(start)
	ready := time.Now()
	say("submitted %d jobs in %s", *jobs, submit.Round(time.Millisecond))
	after, err := serverHeaps(ctx, c, cl.Token())
	if err != nil {
		return err
	}
	var perJob float64
	for id, a := range after {
		perJob = max(perJob, (float64(a)-float64(before[id]))/float64(*jobs))
	}
	say("live heap per job: %.0f bytes", perJob)

	rec := simworker.NewRecorder(*jobs)
	rec.Ready = ready
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	for i := 0; i < *workers; i++ {
		// Spread the workers' first server across the cluster; they move to
		// the leader on its hint.
		addrs := strings.Split(c.HTTPAddrs(), ",")
		rot := append(addrs[i%len(addrs):], addrs[:i%len(addrs)]...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := simworker.Run(wctx, simworker.Config{
				Servers: strings.Join(rot, ","), Secret: "cluster-secret", Name: fmt.Sprintf("sim-%d", i),
				Cores: *cores, Memory: int64(*cores) << 30, Duration: *duration, SyncWait: 20 * time.Second, Rec: rec,
			})
			if err != nil {
				errs <- err
			}
		}()
	}
	defer func() { stopWorkers(); wg.Wait() }()

	if *pprofDir != "" {
		go func() {
			time.Sleep(2 * time.Second)
			for _, s := range c.Servers {
				go saveProfile(s, *pprofDir)
			}
		}()
	}
	var cancelled time.Time
	var cancelDone time.Duration
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastSay := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			return err
		case <-tick.C:
		}
		done := rec.Done()
		if *cancelAt > 0 && cancelled.IsZero() && float64(done) >= *cancelAt*float64(*jobs) {
			if err := cl.CancelBatch(ctx, batchID); err != nil {
				return err
			}
			cancelled = time.Now()
			rec.Mark(cancelled)
			say("cancelled the batch at %d completed jobs", done)
		}
		if time.Since(lastSay) > 5*time.Second {
			say("%d/%d jobs completed", done, *jobs)
			lastSay = time.Now()
		}
		if done >= int64(*jobs) || !cancelled.IsZero() {
			b, err := cl.GetBatch(ctx, batchID)
			if err != nil {
				return err
			}
			if b.State == api.BatchComplete {
				if !cancelled.IsZero() {
					cancelDone = time.Since(cancelled)
				}
				break
			}
		}
	}
	total := time.Since(start)
	b, err := cl.GetBatch(ctx, batchID)
	if err != nil {
		return err
	}
	sum := rec.Summarize()
	res := map[string]any{
		"bench": "sched", "servers": *servers, "jobs": *jobs, "workers": *workers, "worker_cores": *cores,
		"array": *array, "job_duration": duration.String(),
		"submit_s":                 submit.Seconds(),
		"schedule_jobs_per_s":      sum.ScheduleJobsPerS,
		"complete_jobs_per_s":      sum.CompleteJobsPerS,
		"total_s":                  total.Seconds(),
		"p50_ready_to_assigned_ms": sum.P50ReadyToAssign,
		"p99_ready_to_assigned_ms": sum.P99ReadyToAssign,
		"p50_queue_wait_ms":        sum.P50QueueWait,
		"p99_queue_wait_ms":        sum.P99QueueWait,
		"heap_bytes_per_job":       perJob,
		"peak_rss_mb":              peakRSS(c),
	}
	if !cancelled.IsZero() {
		effect := 0.0
		if sum.AfterMark > 0 {
			effect = sum.LastAfterMark.Sub(cancelled).Seconds()
		}
		res["cancel_assignments_after"] = sum.AfterMark
		res["cancel_effect_s"] = effect
		res["cancel_complete_s"] = cancelDone.Seconds()
		res["n_cancelled"] = b.NCancelled
		say("cancellation: %d assignments arrived after it (the last %.3fs after), the batch completed %.3fs after it", sum.AfterMark, effect, cancelDone.Seconds())
	} else if b.NSucceeded != b.NJobs || sum.Completions < int64(*jobs) {
		return fmt.Errorf("%w: %d of %d jobs succeeded; not reporting this run", simworker.ErrIncomplete, b.NSucceeded, b.NJobs)
	}
	if !*asJSON {
		fmt.Fprintf(m.Stdout, "scheduled %.0f jobs/s, completed %.0f jobs/s, total %.2fs, ready-to-assigned p50 %.1f ms p99 %.1f ms\n",
			sum.ScheduleJobsPerS, sum.CompleteJobsPerS, total.Seconds(), sum.P50ReadyToAssign, sum.P99ReadyToAssign)
	}
	return json.NewEncoder(m.Stdout).Encode(res)
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

// serverHeaps asks every server for its live heap (after a GC).
func serverHeaps(ctx context.Context, c *launch.Cluster, token string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, s := range c.Servers {
		one := api.NewClient("http://"+s.HTTP, token)
		ms, err := one.Memory(ctx)
		if err != nil {
			return nil, fmt.Errorf("memory of %s: %w", s.ID(), err)
		}
		out[s.ID()] = ms.HeapAlloc
	}
	return out, nil
}

// peakRSS reads each server's peak resident set size (VmHWM) in MiB.
func peakRSS(c *launch.Cluster) map[string]float64 {
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

// saveProfile fetches a 20 s CPU profile from a server started with
// -debug-pprof.
func saveProfile(s *launch.Server, dir string) {
	_ = os.MkdirAll(dir, 0o755)
	resp, err := http.Get("http://" + s.HTTP + "/debug/pprof/profile?seconds=20")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(fmt.Sprintf("%s/%s.cpu.pprof", dir, s.ID()))
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.ReadFrom(resp.Body)
}
