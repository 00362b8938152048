package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/testkit/bench"
)

// runBenchE2E measures the whole path on the dev agent: one server, real
// worker processes, and a real `true` per job: a process, or with -image a
// container (runc) of that image.
func (m *Main) runBenchE2E(ctx context.Context, args []string) error {
	fs := m.newFlags("e2e", "[flags]")
	jobs := fs.Int("jobs", 20_000, "jobs (an array of 'true')")
	workers := fs.Int("workers", 2, "worker processes")
	cores := fs.Int("worker-cores", 64, "cores per worker (each job takes one)")
	image := fs.String("image", "", `run each job in a container of this image (its command: -command); "test" serves one from a registry in this process, built from drover's static test program (needs the go command)`)
	command := fs.String("command", "true", `the jobs' command, split at spaces ("jobtool true" with -image test)`)
	memory := fs.String("memory", "16MiB", "each job's memory limit (a container's includes runc's own init while it starts the job)")
	network := fs.String("network", api.NetworkBridge, `the jobs' network: "bridge" (the default: each job in a network namespace of its own on its worker's bridge), "none" or "host" (the machine's, without a network namespace)`)
	keep := fs.Bool("keep", false, "keep the agent's data dir")
	floor := fs.Bool("floor", false, "also measure the machine's floor: the jobs' command started -jobs times from workers × worker-cores goroutines (at most 64) of this process, with nothing of drover's running, before the agent starts and after it stops; prints drover's end-to-end rate as a share of it")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	if err := parse(fs, args); err != nil {
		return err
	}
	drover, err := droverBinary()
	if err != nil {
		return err
	}
	if err := api.ValidateNetwork(*network); err != nil {
		return usagef("-network: %v", err)
	}
	jobMem, err := units.ParseBytes(*memory)
	if err != nil {
		return usagef("-memory: %v", err)
	}
	cfg := bench.E2EConfig{Binary: drover, Jobs: *jobs, Workers: *workers, WorkerCores: *cores, Image: *image,
		Command: strings.Fields(*command), Memory: jobMem, Network: *network, Keep: *keep, Floor: *floor}
	r, err := bench.E2E(ctx, cfg)
	if err != nil {
		return err
	}
	out := map[string]any{
		"bench": "e2e", "jobs": *jobs, "workers": *workers, "worker_cores": *cores, "network": *network,
		"jobs_per_s": float64(*jobs) / r.Total.Seconds(),
		"submit_s":   r.Submit.Seconds(), "schedule_jobs_per_s": r.StartRate, "complete_jobs_per_s": r.CompleteRate,
		"total_s": r.Total.Seconds(), "p50_ready_to_started_ms": r.ReadyToStartedMs[0], "p99_ready_to_started_ms": r.ReadyToStartedMs[1],
		"attempt_p50_ms": r.AttemptMs[0], "attempt_p99_ms": r.AttemptMs[1],
	}
	if r.ServerCPU > 0 || r.WorkerCPU > 0 {
		out["server_cpu_us_per_job"] = float64(r.ServerCPU.Microseconds()) / float64(*jobs)
		out["worker_cpu_us_per_job"] = float64(r.WorkerCPU.Microseconds()) / float64(*jobs)
	}
	what := "`" + strings.Join(r.Command, " ") + "` processes on network " + *network
	if r.Image != "" {
		out["image"] = r.Image
		what = "`" + strings.Join(r.Command, " ") + "` containers on network " + *network
	}
	if r.ImagePulls >= 0 {
		out["image_pulls"] = r.ImagePulls
	}
	if *floor {
		f := (r.FloorBefore + r.FloorAfter) / 2
		out["floor_jobs_per_s"], out["floor_before_jobs_per_s"], out["floor_after_jobs_per_s"] = f, r.FloorBefore, r.FloorAfter
		out["of_floor"] = out["jobs_per_s"].(float64) / f
	}
	if !*asJSON {
		fmt.Fprintf(m.Stdout, "%d %s on %d workers: %.0f jobs/s end to end (submit to batch complete in %.2fs); first to last start %.0f jobs/s, first to last completion %.0f jobs/s; attempt wall p50 %.1f ms\n",
			*jobs, what, *workers, out["jobs_per_s"], r.Total.Seconds(), out["schedule_jobs_per_s"], out["complete_jobs_per_s"], out["attempt_p50_ms"])
		if r.ServerCPU > 0 || r.WorkerCPU > 0 {
			fmt.Fprintf(m.Stdout, "drover's own CPU a job: server %.0f µs, workers %.0f µs (not the jobs' own)\n", out["server_cpu_us_per_job"], out["worker_cpu_us_per_job"])
		}
		if *floor {
			fmt.Fprintf(m.Stdout, "floor: %d goroutines of this process started `%s` %d times at %.0f a second before the agent and %.0f after it; drover ran %.0f%% of their mean\n",
				cfg.FloorParallel(), strings.Join(r.Command, " "), *jobs, r.FloorBefore, r.FloorAfter, 100*out["of_floor"].(float64))
		}
	}
	return json.NewEncoder(m.Stdout).Encode(out)
}
