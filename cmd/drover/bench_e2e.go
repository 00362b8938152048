package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/simworker"
	"github.com/drover-sched/drover/internal/testimage"
	"github.com/drover-sched/drover/internal/units"
)

// runBenchE2E measures the whole path on the dev agent: one server, real
// worker processes, and a real `true` per job: a process, or with -image a
// container (runc) of that image.
func (m *Main) runBenchE2E(ctx context.Context, args []string) error {
	fs := m.newFlags("bench e2e", "[flags]")
	jobs := fs.Int("jobs", 20_000, "jobs (an array of `true`)")
	workers := fs.Int("workers", 2, "worker processes")
	cores := fs.Int("worker-cores", 64, "cores per worker (each job takes one)")
	image := fs.String("image", "", `run each job in a container of this image (its command: -command); "test" serves one from a registry in this process, built from drover's static test program (needs the go command)`)
	command := fs.String("command", "true", `the jobs' command, split at spaces ("jobtool true" with -image test)`)
	memory := fs.String("memory", "16MiB", "each job's memory limit (a container's includes runc's own init while it starts the job)")
	network := fs.String("network", api.NetworkBridge, `the jobs' network: "bridge" (the default: each job in a network namespace of its own on its worker's bridge), "none" or "host" (the machine's, without a network namespace)`)
	keep := fs.Bool("keep", false, "keep the agent's data dir")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	argv := strings.Fields(*command)
	if err := api.ValidateNetwork(*network); err != nil {
		return usagef("-network: %v", err)
	}
	jobMem, err := units.ParseBytes(*memory)
	if err != nil {
		return usagef("-memory: %v", err)
	}
	var reg *testimage.Registry
	if *image == "test" {
		if reg, *image, err = benchImage(); err != nil {
			return err
		}
		defer reg.Close()
		if *command == "true" {
			argv = []string{"jobtool", "true"}
		}
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
	if *image != "" {
		// Warm every worker's image cache first: the figures are for
		// jobs whose image is there.
		warm, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bench-e2e-warm", Jobs: []api.JobSpec{
			{JobID: 1, Name: "warm", Count: int64(*workers * *cores), Command: argv, Image: *image, CPU: 1, Memory: jobMem, Network: *network},
		}})
		if err != nil {
			return err
		}
		if b, err := cl.WaitBatch(ctx, warm.ID, nil); err != nil || b.NSucceeded != b.NJobs {
			return fmt.Errorf("warming the image caches: %+v %v (see %s)", b, err, logFile.Name())
		}
	}
	start := time.Now()
	res, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bench-e2e", Jobs: []api.JobSpec{
		{JobID: 1, Name: "true", Count: int64(*jobs), Command: argv, Image: *image, CPU: 1, Memory: jobMem, Network: *network},
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
	var waits, walls []float64
	for _, j := range all {
		a := j.Attempts[len(j.Attempts)-1]
		if a.StartTime == nil || a.EndTime == nil {
			continue
		}
		starts = append(starts, *a.StartTime)
		ends = append(ends, *a.EndTime)
		waits = append(waits, a.StartTime.Sub(ready).Seconds()*1000)
		walls = append(walls, a.EndTime.Sub(*a.StartTime).Seconds()*1000)
	}
	sort.Float64s(walls)
	rate := func(ts []time.Time) float64 {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		if len(ts) < 2 {
			return 0
		}
		return float64(len(ts)) / ts[len(ts)-1].Sub(ts[0]).Seconds()
	}
	sort.Float64s(waits)
	out := map[string]any{
		"bench": "e2e", "jobs": *jobs, "workers": *workers, "worker_cores": *cores, "network": *network,
		"jobs_per_s": float64(*jobs) / total.Seconds(),
		"submit_s":   submit.Seconds(), "schedule_jobs_per_s": rate(starts), "complete_jobs_per_s": rate(ends),
		"total_s": total.Seconds(), "p50_ready_to_started_ms": waits[len(waits)/2], "p99_ready_to_started_ms": waits[len(waits)*99/100],
		// An attempt's wall time on its worker: from starting the
		// executor (for a container: its bundle, root filesystem and
		// runc) to the end of the command and its cleanup. For `true`,
		// nearly all of it is the cost of starting and stopping.
		"attempt_p50_ms": walls[len(walls)/2], "attempt_p99_ms": walls[len(walls)*99/100],
	}
	what := "`" + strings.Join(argv, " ") + "` processes on network " + *network
	if *image != "" {
		out["image"] = *image
		what = "`" + strings.Join(argv, " ") + "` containers on network " + *network
	}
	if reg != nil {
		pulls := reg.Count(func(r testimage.Request) bool { return r.Kind == testimage.KindManifest && r.Method == http.MethodGet })
		out["image_pulls"] = pulls
	}
	if !*asJSON {
		safef(m.Stdout, "%d %s on %d workers: %.0f jobs/s end to end (submit to batch complete in %.2fs); first to last start %.0f jobs/s, first to last completion %.0f jobs/s; attempt wall p50 %.1f ms\n",
			*jobs, what, *workers, out["jobs_per_s"], total.Seconds(), out["schedule_jobs_per_s"], out["complete_jobs_per_s"], out["attempt_p50_ms"])
	}
	return json.NewEncoder(m.Stdout).Encode(out)
}

// benchImage serves drover's test image (jobtool) from a registry in this
// process, reachable by the bench's workers on loopback.
func benchImage() (*testimage.Registry, string, error) {
	dir, err := os.MkdirTemp("", "drover-bench-image-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	bin, err := testimage.Build(dir)
	if err != nil {
		return nil, "", err
	}
	img, err := testimage.Image(bin)
	if err != nil {
		return nil, "", err
	}
	reg, err := testimage.NewRegistry(testimage.RegistryConfig{})
	if err != nil {
		return nil, "", err
	}
	if _, err := reg.Push(img, "bench/jobtool:1"); err != nil {
		reg.Close()
		return nil, "", err
	}
	return reg, reg.Ref("bench/jobtool:1"), nil
}
