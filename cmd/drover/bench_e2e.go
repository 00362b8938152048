package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/simworker"
)

// runBenchE2E measures the whole path on the dev agent: one server, real
// worker processes, and a real `true` process per job.
func (m *Main) runBenchE2E(ctx context.Context, args []string) error {
	fs := m.newFlags("bench e2e", "[flags]")
	jobs := fs.Int("jobs", 20_000, "jobs (an array of `true`)")
	workers := fs.Int("workers", 2, "worker processes")
	cores := fs.Int("worker-cores", 64, "cores per worker (each job takes one)")
	keep := fs.Bool("keep", false, "keep the agent's data dir")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "drover-bench-e2e-")
	if err != nil {
		return err
	}
	defer func() {
		if !*keep {
			os.RemoveAll(dir)
		}
	}()
	logFile, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	agent := exec.Command(self, "agent", "-dev", "-data-dir", filepath.Join(dir, "data"), "-http-addr", "127.0.0.1:0",
		"-workers", fmt.Sprint(*workers), "-worker-cores", fmt.Sprint(*cores), "-worker-memory", fmt.Sprintf("%dGiB", *cores), "-log-level", "warn")
	agent.Stdout, agent.Stderr = logFile, logFile
	agent.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := agent.Start(); err != nil {
		return err
	}
	defer func() { _ = agent.Process.Signal(syscall.SIGTERM); _ = agent.Wait() }()
	var cl *api.Client
	for deadline := time.Now().Add(60 * time.Second); ; {
		addr, err1 := os.ReadFile(filepath.Join(dir, "data", "api.addr"))
		tok, err2 := os.ReadFile(filepath.Join(dir, "data", "root.token"))
		if err1 == nil && err2 == nil {
			cl = api.NewClient(strings.TrimSpace(string(addr)), strings.TrimSpace(string(tok)))
			if insts, err := cl.ListInstances(ctx); err == nil && len(insts) == *workers {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent did not start with %d workers (see %s)", *workers, logFile.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	res, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bench-e2e", Jobs: []api.JobSpec{
		{JobID: 1, Name: "true", Count: int64(*jobs), Command: []string{"true"}, CPU: 1, Memory: 16 << 20},
	}})
	if err != nil {
		return err
	}
	submit := time.Since(start)
	ready := time.Now()
	b, err := cl.WaitBatch(ctx, res.ID, nil)
	if err != nil {
		return err
	}
	total := time.Since(start)
	if b.NSucceeded != b.NJobs {
		return fmt.Errorf("%w: %d of %d jobs succeeded; not reporting this run", simworker.ErrIncomplete, b.NSucceeded, b.NJobs)
	}
	all, err := cl.AllJobs(ctx, res.ID, "")
	if err != nil {
		return err
	}
	var starts, ends []time.Time
	var waits []float64
	for _, j := range all {
		a := j.Attempts[len(j.Attempts)-1]
		if a.StartTime == nil || a.EndTime == nil {
			continue
		}
		starts = append(starts, *a.StartTime)
		ends = append(ends, *a.EndTime)
		waits = append(waits, a.StartTime.Sub(ready).Seconds()*1000)
	}
	rate := func(ts []time.Time) float64 {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		if len(ts) < 2 {
			return 0
		}
		return float64(len(ts)) / ts[len(ts)-1].Sub(ts[0]).Seconds()
	}
	sort.Float64s(waits)
	out := map[string]any{
		"bench": "e2e", "jobs": *jobs, "workers": *workers, "worker_cores": *cores,
		"jobs_per_s": float64(*jobs) / total.Seconds(),
		"submit_s":   submit.Seconds(), "schedule_jobs_per_s": rate(starts), "complete_jobs_per_s": rate(ends),
		"total_s": total.Seconds(), "p50_ready_to_started_ms": waits[len(waits)/2], "p99_ready_to_started_ms": waits[len(waits)*99/100],
	}
	if !*asJSON {
		fmt.Fprintf(m.Stdout, "%d `true` jobs on %d workers: %.0f jobs/s end to end (submit to batch complete in %.2fs); first to last start %.0f jobs/s, first to last completion %.0f jobs/s\n",
			*jobs, *workers, out["jobs_per_s"], total.Seconds(), out["schedule_jobs_per_s"], out["complete_jobs_per_s"])
	}
	return json.NewEncoder(m.Stdout).Encode(out)
}
