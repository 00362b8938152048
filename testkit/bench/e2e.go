package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/nomadview"
	"github.com/drover-sched/drover/testkit/simworker"
	"github.com/drover-sched/drover/testkit/testimage"
)

// E2EConfig is what `drover bench e2e` runs: the dev agent (one server,
// real worker processes) and a real command per job, a process or a
// container.
type E2EConfig struct {
	Binary      string // the drover executable the agent runs
	Jobs        int    // an array of this many
	Workers     int    // worker processes
	WorkerCores int    // cores per worker (each job takes one)
	// Image runs each job in a container of this image ("test": one built
	// from drover's test program, served from a registry in this process).
	Image   string
	Command []string // the jobs' command (nil: true; true is jobtool true with Image "test")
	Memory  int64    // each job's memory limit
	Network string   // the jobs' network mode
	Keep    bool     // keep the agent's data dir
	// Floor also measures the machine's floor (see Floor): the jobs'
	// command started Jobs times from Workers × WorkerCores goroutines
	// (at most 64) of this process, before the agent starts and after it
	// stops.
	Floor bool
	// Nomad submits the jobs as a Nomad job (one group of Jobs
	// allocations of a raw_exec task) through Nomad's own Go client to
	// drover's Nomad API, instead of a batch through drover's.
	Nomad bool
}

// E2EResult is what E2E measured.
type E2EResult struct {
	Command []string // what each job ran
	Image   string   // the image's reference ("" for processes)
	// Submit is the batch's creation; Total from it to the batch
	// complete.
	Submit, Total time.Duration
	// StartRate and CompleteRate are attempts per second from the first
	// start (completion) to the last.
	StartRate, CompleteRate float64
	// ReadyToStartedMs and AttemptMs are the p50 and p99 of the time from
	// the batch's creation to each attempt's start, and of an attempt's
	// wall time on its worker (from starting the executor, for a
	// container its bundle, root filesystem and runc, to the end of the
	// command and its cleanup: for `true`, nearly all of it is the cost of
	// starting and stopping).
	ReadyToStartedMs, AttemptMs [2]float64
	// ImagePulls is the manifests the test registry served (-1: no test
	// registry).
	ImagePulls int
	// FloorBefore and FloorAfter are Floor's rates before the agent
	// started and after it stopped (0: not measured).
	FloorBefore, FloorAfter float64
	// ServerCPU and WorkerCPU are the CPU time the agent's server and its
	// workers (not their jobs) used from the batch's submission to its
	// completion (0: not measured).
	ServerCPU, WorkerCPU time.Duration
}

// FloorParallel is how many goroutines Floor runs for an E2E config: one
// per job slot of the agent's workers, at most 64.
func (cfg *E2EConfig) FloorParallel() int { return min(max(cfg.Workers*cfg.WorkerCores, 1), 64) }

// E2E runs the whole path on the dev agent.
func E2E(ctx context.Context, cfg E2EConfig) (*E2EResult, error) {
	argv := cfg.Command
	if len(argv) == 0 {
		argv = []string{"true"}
	}
	res := &E2EResult{ImagePulls: -1, Image: cfg.Image}
	var reg *testimage.Registry
	if cfg.Image == "test" {
		var err error
		if reg, res.Image, err = testImage(); err != nil {
			return nil, err
		}
		defer reg.Close()
		if slices.Equal(argv, []string{"true"}) {
			argv = []string{"jobtool", "true"}
		}
	}
	res.Command = argv
	if cfg.Floor {
		if cfg.Image != "" {
			return nil, fmt.Errorf("-floor measures processes: it has no meaning with -image")
		}
		var err error
		if res.FloorBefore, err = Floor(ctx, argv, cfg.FloorParallel(), cfg.Jobs); err != nil {
			return nil, err
		}
		defer func() {
			if res != nil && res.Total > 0 {
				res.FloorAfter, _ = Floor(ctx, argv, cfg.FloorParallel(), cfg.Jobs)
			}
		}()
	}
	dir, err := os.MkdirTemp("", "drover-bench-e2e-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if !cfg.Keep {
			os.RemoveAll(dir)
		}
	}()
	logFile, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	args := []string{"agent", "-dev", "-data-dir", filepath.Join(dir, "data"), "-http-addr", "127.0.0.1:0",
		"-workers", fmt.Sprint(cfg.Workers), "-worker-cores", fmt.Sprint(cfg.WorkerCores), "-worker-memory", fmt.Sprintf("%dGiB", cfg.WorkerCores), "-log-level", "warn"}
	if reg != nil {
		// The test registry is on the host's loopback: pulls reach it
		// only where the operator allows it.
		args = append(args, "-registry-allow", reg.Host)
	}
	agent := exec.Command(cfg.Binary, args...)
	agent.Stdout, agent.Stderr = logFile, logFile
	agent.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := agent.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = agent.Process.Signal(syscall.SIGTERM); _ = agent.Wait() }()
	var cl *api.Client
	for deadline := time.Now().Add(60 * time.Second); ; {
		addr, err1 := os.ReadFile(filepath.Join(dir, "data", "api.addr"))
		tok, err2 := os.ReadFile(filepath.Join(dir, "data", "root.token"))
		if err1 == nil && err2 == nil {
			cl = api.NewClient(strings.TrimSpace(string(addr)), strings.TrimSpace(string(tok)))
			if insts, err := cl.ListInstances(ctx); err == nil && len(insts) == cfg.Workers {
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the agent did not start with %d workers (see %s)", cfg.Workers, logFile.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res.Image != "" {
		// Warm every worker's image cache first: the figures are for
		// jobs whose image is there.
		warm, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bench-e2e-warm", Jobs: []api.JobSpec{
			{JobID: 1, Name: "warm", Count: int64(cfg.Workers * cfg.WorkerCores), Command: argv, Image: res.Image, CPU: 1, Memory: cfg.Memory, Network: cfg.Network},
		}})
		if err != nil {
			return nil, err
		}
		if b, err := cl.WaitBatch(ctx, warm.ID, nil); err != nil || b.NSucceeded != b.NJobs {
			return nil, fmt.Errorf("warming the image caches: %+v %v (see %s)", b, err, logFile.Name())
		}
	}
	serverCPU, workerCPU, cpuErr := agentCPU(agent.Process.Pid)
	start := time.Now()
	var created *api.CreateBatchResponse
	if cfg.Nomad {
		created, err = submitNomad(cfg, dir, argv)
	} else {
		created, err = cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bench-e2e", Jobs: []api.JobSpec{
			{JobID: 1, Name: "true", Count: int64(cfg.Jobs), Command: argv, Image: res.Image, CPU: 1, Memory: cfg.Memory, Network: cfg.Network},
		}})
	}
	if err != nil {
		return nil, err
	}
	res.Submit = time.Since(start)
	ready := time.Now()
	b, err := cl.WaitBatch(ctx, created.ID, nil)
	if err != nil {
		return nil, err
	}
	res.Total = time.Since(start)
	if b.TimeCompleted != nil && b.TimeCompleted.After(start) {
		// When the server completed it (the same machine's clock), not
		// when the client's next look saw it: WaitBatch looks every
		// 1.1 s at most, which was up to a tenth of a 10,000-job run.
		res.Total = b.TimeCompleted.Sub(start)
	}
	if s, w, err := agentCPU(agent.Process.Pid); err == nil && cpuErr == nil {
		res.ServerCPU, res.WorkerCPU = s-serverCPU, w-workerCPU
	}
	if b.NSucceeded != b.NJobs {
		return nil, fmt.Errorf("%w: %d of %d jobs succeeded; not reporting this run", simworker.ErrIncomplete, b.NSucceeded, b.NJobs)
	}
	all, err := cl.AllJobs(ctx, created.ID, "")
	if err != nil {
		return nil, err
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
	sort.Float64s(waits)
	res.StartRate, res.CompleteRate = Rate(starts), Rate(ends)
	res.ReadyToStartedMs = [2]float64{Percentile(waits, 50), Percentile(waits, 99)}
	res.AttemptMs = [2]float64{Percentile(walls, 50), Percentile(walls, 99)}
	if reg != nil {
		res.ImagePulls = reg.Count(func(r testimage.Request) bool { return r.Kind == testimage.KindManifest && r.Method == http.MethodGet })
	}
	return res, nil
}

// testImage serves drover's test image (jobtool) from a registry in this
// process, reachable by the bench's workers on loopback.
func testImage() (*testimage.Registry, string, error) {
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

// submitNomad registers the jobs as a Nomad job through Nomad's own Go
// client, as a Nomad user would: one group of cfg.Jobs allocations of a
// raw_exec task taking a core (1,000 MHz) each.
func submitNomad(cfg E2EConfig, dir string, argv []string) (*api.CreateBatchResponse, error) {
	if cfg.Image != "" {
		return nil, fmt.Errorf("the Nomad path runs raw_exec tasks: it has no -image")
	}
	addr, err1 := os.ReadFile(filepath.Join(dir, "data", "api.addr"))
	tok, err2 := os.ReadFile(filepath.Join(dir, "data", "root.token"))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	base := strings.TrimSpace(string(addr))
	if !strings.HasPrefix(base, "http") {
		base = "http://" + base
	}
	nc, err := nomad.NewClient(&nomad.Config{Address: base, SecretID: strings.TrimSpace(string(tok))})
	if err != nil {
		return nil, err
	}
	task := nomad.NewTask("true", "raw_exec").SetConfig("command", argv[0]).SetConfig("args", argv[1:])
	task.Require(&nomad.Resources{CPU: new(1000), MemoryMB: new(int(cfg.Memory >> 20))})
	job := nomad.NewBatchJob("bench-e2e", "bench-e2e", "global", 50)
	job.AddTaskGroup(nomad.NewTaskGroup("g", cfg.Jobs).AddTask(task))
	if cfg.Network == api.NetworkHost || cfg.Network == api.NetworkNone {
		job.TaskGroups[0].Networks = []*nomad.NetworkResource{{Mode: cfg.Network}}
	}
	reg, _, err := nc.Jobs().Register(job, nil)
	if err != nil {
		return nil, fmt.Errorf("register the Nomad job: %w", err)
	}
	batch, _, ok := nomadview.ParseEvalID(reg.EvalID)
	if !ok {
		return nil, fmt.Errorf("the Nomad job's evaluation %q names no batch", reg.EvalID)
	}
	return &api.CreateBatchResponse{Batch: api.Batch{ID: int64(batch)}}, nil
}
